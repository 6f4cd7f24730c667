#!/usr/bin/env python3
"""Tests of train_encoder.py's gradient caching and weight interpolation on the real default model,
and of its search-box form of a docstring query (`short_query`, plain Python).

The model tests need torch and sentence-transformers (the training venv, train/README.md) and the default
model's folder (scripts/setup.sh); where either is missing each test says it skipped and why.

    ~/.cache/ctxd/train-venv/bin/python -m unittest train/test_train_encoder.py
"""
import sys
import tempfile
import types
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import train_encoder as te  # noqa: E402

try:
    import torch  # noqa: F401
    import sentence_transformers  # noqa: F401

    MISSING = None if (te.DEFAULT_BASE / "model.safetensors").is_file() else f"no default model at {te.DEFAULT_BASE}"
except ImportError as e:
    MISSING = f"torch or sentence-transformers not installed ({e}); the training venv has them"

QUERIES = ["how to read a file", "sort a dict by value", "parse a json string", "retry an upload"]
DOCS = [
    "def read(p):\n    return open(p).read()",
    "def s(d):\n    return sorted(d.items(), key=lambda kv: kv[1])",
    "def p(s):\n    import json\n    return json.loads(s)",
    "def retry(f):\n    for i in range(3):\n        try:\n            return f()\n        except Exception:\n            pass",
    "class A:\n    pass",
    "x = 1",
]


class ShortQueryTest(unittest.TestCase):
    def test_first_sentence_lower_case_without_full_stop(self):
        self.assertEqual(te.short_query("Return the number of nodes.  Counts self-loops once."), "return the number of nodes")
        self.assertEqual(te.short_query("Parse the header\nof a file."), "parse the header")
        self.assertEqual(te.short_query("Version 1.2 of the API: what it reads!"), "version 1.2 of the api: what it reads")

    def test_cut_to_at_most_max_words(self):
        long = "Returns the pointwise entropy over the possible states at each position in the chain."
        self.assertEqual(te.short_query(long).split(), long.lower().split()[:12])
        self.assertEqual(te.short_query(long, max_words=3), "returns the pointwise")


@unittest.skipIf(MISSING, f"skipped: {MISSING}")
class TrainEncoderTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.enc = te.Encoder(te.DEFAULT_BASE, "cpu", False)

    def grads(self, mini_batch):
        self.enc.model.zero_grad()
        args = types.SimpleNamespace(mini_batch=mini_batch, query_len=16, doc_len=32, scale=20.0)
        loss = te.contrastive_step(self.enc, QUERIES, DOCS, args)
        grads = [p.grad.flatten() for p in self.enc.model.parameters() if p.grad is not None]
        return float(loss), torch.cat(grads)

    def test_gradient_caching_gives_the_whole_batchs_update(self):
        for mode in ("eval", "train"):  # dropout off, then on and replayed
            with self.subTest(mode=mode):
                getattr(self.enc.model, mode)()
                torch.manual_seed(7)
                whole_loss, whole = self.grads(0)
                torch.manual_seed(7)
                cached_loss, cached = self.grads(3)
                if mode == "eval":
                    self.assertAlmostEqual(whole_loss, cached_loss, places=5)
                    self.assertLess((whole - cached).abs().max().item(), 1e-6 + 1e-4 * whole.abs().max().item())
                self.assertGreater(cached.norm().item(), 0.0)
        self.enc.model.eval()

    def test_interpolation_mixes_base_and_tuned_weights(self):
        from safetensors.torch import load_file, save_file

        with tempfile.TemporaryDirectory() as tmp:
            tuned = Path(tmp) / "tuned"
            self.enc.st.save(str(tuned))
            weights = load_file(str(tuned / "model.safetensors"))
            shifted = {k: v + 1.0 if v.is_floating_point() else v for k, v in weights.items()}
            save_file(shifted, str(tuned / "model.safetensors"), metadata={"format": "pt"})
            half = Path(tmp) / "half"
            te.interpolate(te.DEFAULT_BASE, tuned, 0.5, half)
            mixed = load_file(str(half / "model.safetensors"))
            self.assertEqual(set(mixed), set(weights))
            for name, w in weights.items():
                if w.is_floating_point():
                    self.assertTrue(torch.allclose(mixed[name], w + 0.5, atol=1e-5), name)
            self.assertTrue((half / "modules.json").is_file())


if __name__ == "__main__":
    unittest.main()
