"""Tests of train/fit_query_adapter.py: both fits learn a planted query map, the validation score
ranks within a repository, and the vector cache embeds through a real `ctxd embed` once and is read
back without it. Needs numpy (the test venv of scripts/test.sh has it); each test says it skipped
without it, or without a ctxd binary (CTXD_BIN)."""
import os
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
try:
    import numpy as np
    import fit_query_adapter as fqa
except ImportError as e:  # numpy missing
    np = None
    WHY = f"numpy is not installed here ({e}); scripts/test.sh runs this with its test venv"


def planted(n, dim=32, seed=0):
    """Documents at random, each query the document's vector under a fixed random rotation plus
    noise: the base (identity) ranks poorly, the inverse rotation perfectly."""
    rng = np.random.default_rng(seed)
    docs = fqa.unit(rng.standard_normal((n, dim)).astype(np.float32))
    rot, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    queries = docs @ rot.T.astype(np.float32) + 0.05 * rng.standard_normal((n, dim)).astype(np.float32)
    return queries.astype(np.float32), docs


@unittest.skipIf(np is None, "numpy missing" if np is None else "")
class Fits(unittest.TestCase):
    def test_both_fits_learn_a_planted_map_the_base_misses(self):
        q, d = planted(600)
        test_q, test_d = q[400:], d[400:]
        gold = np.arange(len(test_q))
        base = fqa.mrr_at_10(test_q, test_d, gold)
        ridge = fqa.fit_ridge(q[:400], d[:400], 0.1)
        negs = d[np.roll(np.arange(400), 7)][:, None, :]
        contrastive = fqa.fit_contrastive(q[:400], d[:400], negs, 0.0, epochs=60, seed=1, batch=64, lr=1e-2)
        self.assertLess(base, 0.2, "the planted rotation should hide the documents from the base")
        self.assertGreater(fqa.mrr_at_10(test_q @ ridge, test_d, gold), 0.9)
        self.assertGreater(fqa.mrr_at_10(test_q @ contrastive, test_d, gold), 0.8)

    def test_a_strong_pull_keeps_the_identity(self):
        q, d = planted(200)
        w = fqa.fit_ridge(q, d, 1e6)
        self.assertLess(float(np.abs(w - np.eye(w.shape[0])).max()), 1e-2)

    def test_validation_ranks_each_query_among_its_own_repository_only(self):
        class Fixed:
            def __init__(self, table):
                self.table = table

            def matrix(self, texts):
                return np.stack([self.table[t] for t in texts]).astype(np.float32)

        e = np.eye(4, dtype=np.float32)
        table = {"qa": e[0], "a": e[0], "qb": e[1], "b": e[2], "x": e[1]}
        # Repository r1: "qb"'s positive "b" loses to its own negative "x" (rank 2 → 0.5); the
        # document "a" of r0 would not change that, being in another repository.
        valid = [
            {"repo": "r0", "query": "qa", "positive": "a", "negative_texts": []},
            {"repo": "r1", "query": "qb", "positive": "b", "negative_texts": ["x"]},
        ]
        self.assertAlmostEqual(fqa.validation_mrr(valid, Fixed(table), None), (1.0 + 0.5) / 2)


@unittest.skipIf(np is None or not os.environ.get("CTXD_BIN"), "numpy or CTXD_BIN (a ctxd binary) missing")
class Cache(unittest.TestCase):
    def test_vectors_are_embedded_once_then_read_back_without_ctxd(self):
        with tempfile.TemporaryDirectory() as tmp:
            texts = ["parse a date string", "def parse(s): return s", "parse a date string"]
            first = fqa.Vectors(os.environ["CTXD_BIN"], tmp)
            first.ensure(texts)
            m = first.matrix(texts)
            self.assertEqual(m.shape[0], 3)
            self.assertAlmostEqual(float(np.linalg.norm(m[0])), 1.0, places=3)
            self.assertTrue(np.allclose(m[0], m[2]))
            self.assertFalse(np.allclose(m[0], m[1]))
            again = fqa.Vectors("/bin/false", tmp)  # would fail if asked to embed
            again.ensure(texts)
            self.assertTrue(np.allclose(again.matrix(texts), m))


if __name__ == "__main__":
    unittest.main()
