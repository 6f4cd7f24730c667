#!/usr/bin/env python3
"""Computes the reference embeddings committed in models/tests/fixtures/reference.json.

Run once with sentence-transformers on PyTorch (CPU) against the same model directory ctxd uses:
    python3 -m venv /tmp/st && /tmp/st/bin/pip install sentence-transformers
    /tmp/st/bin/python scripts/gen-reference-vectors.py ~/.cache/ctxd/models/sentence-transformers/all-MiniLM-L6-v2
The Rust test `bert_matches_sentence_transformers` checks ctxd's vectors against these (cosine >= 0.999).
"""
import json
import sys

from sentence_transformers import SentenceTransformer

TEXTS = [
    "how to check if a variable is iterable in python",
    "def is_iterable(obj):\n    try:\n        iter(obj)\n        return True\n    except TypeError:\n        return False",
    "src/auth/login.rs login_user\npub fn login_user(db: &Db, name: &str, password: &str) -> Result<Session, AuthError> {\n    let user = db.find_user(name)?;\n    user.verify(password)?;\n    Ok(Session::new(user.id))\n}",
    "Vitamin D supplementation reduces the risk of respiratory infections in adults.",
    "a",
    "Ünïcödé text with émojis 🚀 and CJK 漢字 mixed in.",
    " ".join(["long input that must be truncated to the model window of two hundred fifty six tokens"] * 40),
    "SELECT id, name FROM users WHERE created_at > NOW() - INTERVAL '7 days' ORDER BY name;",
]

model = SentenceTransformer(sys.argv[1], device="cpu")
vectors = model.encode(TEXTS, normalize_embeddings=False, convert_to_numpy=True, batch_size=4)
out = {
    "model": "sentence-transformers/all-MiniLM-L6-v2",
    "generator": "sentence-transformers " + __import__("sentence_transformers").__version__,
    "texts": TEXTS,
    "vectors": [[round(float(x), 7) for x in v] for v in vectors],
}
json.dump(out, sys.stdout, ensure_ascii=False)
