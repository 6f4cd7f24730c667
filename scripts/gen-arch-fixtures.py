#!/usr/bin/env python3
"""Random-weight checkpoints of each embedding architecture ctxd runs, with the reference
implementation's vectors for a fixed text set: the fixtures of `models/tests/architectures.rs`.

For each architecture this writes `models/tests/fixtures/arch/<name>/`: a tiny config (2-3 layers,
hidden 64), random weights (`model.safetensors`), a small tokenizer trained on the text set
(the real tokenizers are not reachable from here; a WordPiece one for the BERT family, a
byte-level BPE one for ModernBERT and Qwen3), the sentence-transformers model card that says how
to pool and prompt (`modules.json`, `1_Pooling/config.json`, `config_sentence_transformers.json`,
`sentence_bert_config.json`) and `reference.json`: the documents' and the queries' vectors as
sentence-transformers computes them on that model card (queries with the card's query prompt),
in f32 on the CPU.

| fixture      | reference                                                  | what it covers                      |
|--------------|------------------------------------------------------------|-------------------------------------|
| nomic_bert   | transformers' NomicBertModel (CodeRankEmbed, nomic-embed)  | rotary, SwiGLU, post-norm; mean pooling, query/document prompts; the same weights under the original (`Wqkv`, `fc11`…) names in `nomic_bert_original/` |
| modernbert   | transformers' ModernBertModel (gte-modernbert, granite r2) | global/local (sliding window) attention, two RoPE bases, GeGLU, pre-norm; CLS pooling |
| jina_bert    | the jina-bert-v2-qk-post-norm modelling code, transcribed below in PyTorch (it is not on PyPI) | ALiBi, Q/K LayerNorm, GEGLU, post-norm; mean pooling |
| qwen3        | transformers' Qwen3Model (Qwen3-Embedding)                 | causal attention, GQA, RMSNorm, per-head Q/K norm, RoPE; last-token pooling, instruction prompt |

Cross-encoders (`models/tests/fixtures/cross/<name>/`: BERT, XLM-RoBERTa and ModernBERT with a
one-label sequence-classification head, as ms-marco-MiniLM, bge-reranker and gte-reranker-modernbert
are) get `reference.json` with transformers' logit for every (query, text) pair, tokenized as a pair.

Needs torch, transformers and sentence-transformers (a venv: `python3 -m venv V && V/bin/pip install
torch transformers sentence-transformers`). Run from the repository root:

    V/bin/python scripts/gen-arch-fixtures.py [--out models/tests/fixtures/arch] [--only NAME]

The fixtures are committed (each well under 2 MB). A rerun draws the same weights (fixed seeds),
but WordPiece training may order tied pieces differently, so the tokenizers, and with them the
reference vectors, can differ in detail: commit the whole set a run writes.

`--full-size DIR` writes instead each architecture at its real size with random weights
(NomicBERT as CodeRankEmbed / nomic-embed-text: 768 × 12 layers; ModernBERT as gte-modernbert-base:
768 × 22; JinaBERT as jina-embeddings-v2-base-code: 768 × 12; Qwen3 as Qwen3-Embedding-0.6B:
1024 × 28, 16 heads over 8 K/V heads) with all-MiniLM-L6-v2's WordPiece tokenizer (real chunk
lengths; the real tokenizers are not reachable from here) and no reference: what
`benches/embed_vs_pytorch.py --arch` times ctxd against PyTorch on.
"""

import argparse
import json
import math
import os
import shutil

TEXTS = [
    "def read_config(path):\n    with open(path) as f:\n        return json.load(f)",
    "fn parse_header(bytes: &[u8]) -> Result<Header, Error> { Header::decode(bytes) }",
    "class LRUCache:\n    def __init__(self, capacity):\n        self.capacity = capacity\n        self.items = OrderedDict()",
    "Retries a failed HTTP request with exponential back-off until the deadline passes.",
    "SELECT name, count(*) FROM users GROUP BY name ORDER BY count(*) DESC LIMIT 10;",
    "The tokenizer splits text into word pieces; unknown words fall back to characters.",
    "async function fetchJson(url) { const r = await fetch(url); return r.json(); }",
    "def quicksort(xs):\n    if len(xs) < 2:\n        return xs\n    p = xs[0]\n    return quicksort([x for x in xs[1:] if x < p]) + [p] + quicksort([x for x in xs[1:] if x >= p])",
    "Mitochondria are the site of oxidative phosphorylation in eukaryotic cells.",
    "impl Drop for Connection { fn drop(&mut self) { self.socket.shutdown(); } }",
    "git checkout -b feature && git commit -am 'wip' && git push origin feature",
    "A watcher debounces file events and re-indexes only the files whose contents changed.",
    "def cosine(a, b):\n    return sum(x * y for x, y in zip(a, b)) / (norm(a) * norm(b))",
    "x",
    "Error: connection refused while connecting to 127.0.0.1:5432 (is the server running?)",
    "for (int i = 0; i < n; ++i) { sum += values[i] * weights[i]; }",
    "The index keeps every commit as a versioned snapshot that readers can open by number.",
    "try:\n    import numpy as np\nexcept ImportError:\n    np = None",
    "SwiGLU multiplies one projection by the SiLU of another before the down projection.",
    "pub struct Span { pub start: usize, pub end: usize }",
    "def load_weights(path, device='cpu'):\n    state = torch.load(path, map_location=device)\n    model.load_state_dict(state)\n    return model",
    "Long documents are split into chunks that fit the model's token window.",
    "while read -r line; do echo \"$line\" | tr a-z A-Z; done < input.txt",
    "Rotary position embeddings rotate query and key pairs by an angle that grows with position.",
]
QUERIES = ["how to read a json config file", "retry a request with back-off", "sort a list recursively"]

WORDPIECE_SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Set by --full-size: the real configs' sizes (and MiniLM's tokenizer) instead of the tiny ones.
FULL = {}
MINILM = os.path.join(os.environ.get("CTXD_MODEL_DIR", os.path.expanduser("~/.cache/ctxd/models")),
                      "sentence-transformers", "all-MiniLM-L6-v2")


def sized(tiny, full):
    """The tiny fixture's settings, or the real model's under --full-size."""
    return {**tiny, **full} if FULL else tiny


def minilm_tokenizer(out):
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy(os.path.join(MINILM, f), os.path.join(out, f))


def wordpiece_tokenizer(path, vocab_size=1200):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=WORDPIECE_SPECIAL)
    tok.train_from_iterator(TEXTS + QUERIES, trainer)
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", cls), ("[SEP]", sep)]
    )
    tok.save(path)
    return tok


def bpe_tokenizer(path, special, template, vocab_size=1200, pair=None):
    """A byte-level BPE tokenizer (ModernBERT's and Qwen3's kind) with `special` tokens and a
    post-processing template over them."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(TEXTS + QUERIES, trainer)
    tok.post_processor = processors.TemplateProcessing(
        single=template, pair=pair, special_tokens=[(t, tok.token_to_id(t)) for t in special if t in template]
    )
    tok.save(path)
    return tok


def hf_tokenizer_files(out, tok_json, **specials):
    """tokenizer_config.json so transformers' AutoTokenizer loads tokenizer.json."""
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": 512}
    cfg.update(specials)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1)


def model_card(out, pooling, prompts=None, max_seq_length=128, normalize=True, hidden=64):
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}]
    modules.append({"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"})
    if normalize:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"})
        os.makedirs(os.path.join(out, "2_Normalize"), exist_ok=True)
    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump(modules, f, indent=1)
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump(
            {
                "word_embedding_dimension": hidden,
                "pooling_mode_cls_token": pooling == "cls",
                "pooling_mode_mean_tokens": pooling == "mean",
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
                "pooling_mode_weightedmean_tokens": False,
                "pooling_mode_lasttoken": pooling == "lasttoken",
                "include_prompt": True,
            },
            f,
            indent=1,
        )
    with open(os.path.join(out, "sentence_bert_config.json"), "w") as f:
        json.dump({"max_seq_length": 512 if FULL else max_seq_length, "do_lower_case": False}, f)
    st = {"prompts": prompts or {}, "default_prompt_name": None, "similarity_fn_name": "cosine"}
    with open(os.path.join(out, "config_sentence_transformers.json"), "w") as f:
        json.dump(st, f, indent=1)


def reference(out, prompts):
    """The documents' and queries' vectors by sentence-transformers on the model card."""
    import torch
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(out, device="cpu", trust_remote_code=False)
    model.eval()
    with torch.inference_mode():
        docs = model.encode(TEXTS, batch_size=8, convert_to_numpy=True, prompt=prompts.get("document"))
        queries = model.encode(QUERIES, batch_size=8, convert_to_numpy=True, prompt=prompts.get("query"))
    ref = {
        "texts": TEXTS,
        "queries": QUERIES,
        "documents": [[float(x) for x in v] for v in docs],
        "query_vectors": [[float(x) for x in v] for v in queries],
        "torch": torch.__version__,
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)


# Random weights at the usual std (0.02) give vectors that are all alike (cosine > 0.9999 between
# any two documents under CLS pooling), so a ranking would compare noise: the configs below draw
# them wider, which spreads the documents apart (see `spread` in the output).


def perturb_norms(model):
    """Random offsets on the norms' weights (initialised to one and zero), so a test shows they are read."""
    import torch

    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)


def save_model(model, out):
    model.eval()
    model.save_pretrained(out, safe_serialization=True)


def nomic_bert(out):
    import torch
    from transformers import NomicBertConfig, NomicBertModel

    if FULL:
        minilm_tokenizer(out)
    else:
        wordpiece_tokenizer(os.path.join(out, "tokenizer.json"))
        hf_tokenizer_files(out, "tokenizer.json", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]")
    size = sized(
        dict(vocab_size=1200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
             initializer_range=0.3),
        dict(vocab_size=30528, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
             initializer_range=0.02),
    )
    cfg = NomicBertConfig(
        **size, max_position_embeddings=512, rope_parameters={"rope_type": "default", "rope_theta": 1000.0},
    )
    torch.manual_seed(1)
    save_model(NomicBertModel(cfg), out)
    prompts = {"query": "Represent this query for searching relevant code: ", "document": "search_document: "}
    model_card(out, "mean", prompts, hidden=cfg.hidden_size)
    if FULL:
        return
    reference(out, prompts)
    original_names(out, out + "_original", cfg)


def original_names(src, out, cfg):
    """The same checkpoint under nomic-ai's original names and config keys (what CodeRankEmbed and
    nomic-embed-text ship): Wqkv fused, fc11/fc12/fc2, norm1/norm2, emb_ln, n_embd…"""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out)
    state = load_file(os.path.join(src, "model.safetensors"))
    renamed = {}
    for name, t in state.items():
        if ".self_attn.k_proj." in name or ".self_attn.v_proj." in name:
            continue
        if ".self_attn.q_proj." in name:
            k = state[name.replace("q_proj", "k_proj")]
            v = state[name.replace("q_proj", "v_proj")]
            renamed[name.replace("self_attn.q_proj", "attn.Wqkv")] = torch.cat([t, k, v], 0)
            continue
        n = name.replace("embeddings.LayerNorm", "emb_ln").replace("self_attn.o_proj", "attn.out_proj")
        n = n.replace("up_proj", "fc11").replace("gate_proj", "fc12").replace("down_proj", "fc2")
        n = n.replace("post_attention_layernorm", "norm1").replace("post_mlp_layernorm", "norm2")
        if n.startswith("layers."):
            n = "encoder." + n
        renamed[n] = t.contiguous()
    save_file(renamed, os.path.join(out, "model.safetensors"))
    original = {
        "model_type": "nomic_bert", "architectures": ["NomicBertModel"], "vocab_size": cfg.vocab_size,
        "n_embd": cfg.hidden_size, "n_head": cfg.num_attention_heads, "n_layer": cfg.num_hidden_layers,
        "n_inner": cfg.intermediate_size, "n_positions": cfg.max_position_embeddings, "activation_function": "swiglu",
        "rotary_emb_base": 1000, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": False,
        "layer_norm_epsilon": cfg.layer_norm_eps, "prenorm": False, "qkv_proj_bias": False, "mlp_fc1_bias": False,
        "mlp_fc2_bias": False, "type_vocab_size": cfg.type_vocab_size, "causal": False,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(original, f, indent=1)


def modernbert(out):
    import torch
    from transformers import ModernBertConfig, ModernBertModel

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    if FULL:
        from tokenizers import Tokenizer

        minilm_tokenizer(out)
        tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    else:
        tok = bpe_tokenizer(os.path.join(out, "tokenizer.json"), special, "[CLS] $A [SEP]")
        hf_tokenizer_files(out, "tokenizer.json", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]")
    size = sized(
        dict(vocab_size=1200, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=96,
             local_attention=8, initializer_range=0.5),
        dict(vocab_size=50368, hidden_size=768, num_hidden_layers=22, num_attention_heads=12, intermediate_size=1152,
             local_attention=128, initializer_range=0.02),
    )
    cfg = ModernBertConfig(
        **size, max_position_embeddings=512, global_attn_every_n_layers=3,
        pad_token_id=tok.token_to_id("[PAD]"), cls_token_id=tok.token_to_id("[CLS]"),
        sep_token_id=tok.token_to_id("[SEP]"), bos_token_id=tok.token_to_id("[CLS]"),
        eos_token_id=tok.token_to_id("[SEP]"),
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(2)
    model = ModernBertModel(cfg)
    # ModernBERT initialises its norms to one and biases to zero; random ones test that they are read.
    perturb_norms(model)
    save_model(model, out)
    model_card(out, "cls", hidden=cfg.hidden_size)
    if not FULL:
        reference(out, {})


def qwen3(out):
    import torch
    from transformers import Qwen3Config, Qwen3Model

    special = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    if FULL:
        minilm_tokenizer(out)
        pad = 0
    else:
        tok = bpe_tokenizer(os.path.join(out, "tokenizer.json"), special, "$A <|endoftext|>")
        hf_tokenizer_files(out, "tokenizer.json", eos_token="<|endoftext|>", pad_token="<|endoftext|>", padding_side="left")
        pad = tok.token_to_id("<|endoftext|>")
    size = sized(
        dict(vocab_size=1200, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, head_dim=16, initializer_range=0.2),
        dict(vocab_size=151669, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
             num_key_value_heads=8, head_dim=128, initializer_range=0.02),
    )
    cfg = Qwen3Config(
        **size, max_position_embeddings=1024, tie_word_embeddings=True,
        rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, rms_norm_eps=1e-6,
        pad_token_id=pad, eos_token_id=pad,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(3)
    model = Qwen3Model(cfg)
    perturb_norms(model)
    save_model(model, out)
    prompts = {"query": "Instruct: Given a code search query, retrieve relevant code\nQuery:"}
    model_card(out, "lasttoken", prompts, hidden=cfg.hidden_size)
    if not FULL:
        reference(out, prompts)


# --- JinaBERT v2 (the qk-post-norm variant of jina-embeddings-v2-base-code), transcribed ----------


def jina_modules():
    import torch
    from torch import nn

    class Layer(nn.Module):
        def __init__(self, h, heads, inter, eps):
            super().__init__()
            self.heads = heads
            att = nn.Module()
            att.self = nn.Module()
            for n in ("query", "key", "value"):
                setattr(att.self, n, nn.Linear(h, h))
            att.self.layer_norm_q = nn.LayerNorm(h, eps=eps)
            att.self.layer_norm_k = nn.LayerNorm(h, eps=eps)
            att.output = nn.Module()
            att.output.dense = nn.Linear(h, h)
            att.output.LayerNorm = nn.LayerNorm(h, eps=eps)
            self.attention = att
            self.mlp = nn.Module()
            self.mlp.up_gated_layer = nn.Linear(h, inter * 2, bias=False)
            self.mlp.down_layer = nn.Linear(inter, h)
            self.layer_norm_1 = nn.LayerNorm(h, eps=eps)
            self.layer_norm_2 = nn.LayerNorm(h, eps=eps)
            self.inter = inter

        def forward(self, x, bias):
            s = self.attention.self
            b, n, h = x.shape
            d = h // self.heads

            def split(t):
                return t.view(b, n, self.heads, d).permute(0, 2, 1, 3)

            q = split(s.layer_norm_q(s.query(x)))
            k = split(s.layer_norm_k(s.key(x)))
            v = split(s.value(x))
            scores = q @ k.transpose(-1, -2) / math.sqrt(d) + bias
            ctx = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(b, n, h)
            o = self.attention.output
            att = o.LayerNorm(o.dense(ctx) + x)
            r = self.layer_norm_1(x + att)
            up = self.mlp.up_gated_layer(r)
            m = self.mlp.down_layer(up[..., : self.inter] * torch.nn.functional.gelu(up[..., self.inter :]))
            return self.layer_norm_2(r + m)

    def slopes(n):
        def pow2(n):
            start = 2 ** (-(2 ** -(math.log2(n) - 3)))
            return [start * start**i for i in range(n)]

        if math.log2(n).is_integer():
            return pow2(n)
        c = 2 ** math.floor(math.log2(n))
        return pow2(c) + slopes(2 * c)[0::2][: n - c]

    class JinaBert(nn.Module):
        def __init__(self, vocab, h, layers, heads, inter, eps=1e-12):
            super().__init__()
            self.heads = heads
            self.embeddings = nn.Module()
            self.embeddings.word_embeddings = nn.Embedding(vocab, h)
            self.embeddings.token_type_embeddings = nn.Embedding(2, h)
            self.embeddings.LayerNorm = nn.LayerNorm(h, eps=eps)
            self.encoder = nn.Module()
            self.encoder.layer = nn.ModuleList([Layer(h, heads, inter, eps) for _ in range(layers)])

        def forward(self, ids, mask):
            e = self.embeddings
            x = e.LayerNorm(e.word_embeddings(ids) + e.token_type_embeddings.weight[0])
            n = ids.shape[1]
            pos = torch.arange(n)
            rel = (pos[None, :] - pos[:, None]).abs()
            alibi = (-torch.tensor(slopes(self.heads)))[:, None, None] * rel[None]
            bias = alibi[None] + (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
            for layer in self.encoder.layer:
                x = layer(x, bias)
            return x

    return JinaBert


def jina_embed(model, tok, texts):
    """`texts` through a JinaBERT transcription (`jina_modules`) with tokenizer `tok`: mean pooling over
    the real tokens, unit length (what the model card asks), as one tensor."""
    import torch

    encs = tok.encode_batch(texts)
    n = max(len(e.ids) for e in encs)
    ids = torch.tensor([e.ids + [0] * (n - len(e.ids)) for e in encs])
    mask = torch.tensor([[1] * len(e.ids) + [0] * (n - len(e.ids)) for e in encs])
    with torch.inference_mode():
        hidden = model(ids, mask)
    m = mask[..., None].float()
    pooled = (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)
    return torch.nn.functional.normalize(pooled, dim=-1)


def jina_bert(out):
    import torch
    from safetensors.torch import save_file
    from tokenizers import Tokenizer

    if FULL:
        minilm_tokenizer(out)
        tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
    else:
        tok = wordpiece_tokenizer(os.path.join(out, "tokenizer.json"))
    size = sized(
        {"vocab_size": 1200, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 128},
        {"vocab_size": 61056, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
         "intermediate_size": 3072},
    )
    cfg = {
        "model_type": "bert", "architectures": ["JinaBertForMaskedLM"], **size, "hidden_act": "gelu",
        "feed_forward_type": "geglu", "position_embedding_type": "alibi", "max_position_embeddings": 8192,
        "type_vocab_size": 2, "layer_norm_eps": 1e-12, "pad_token_id": 0, "emb_pooler": "mean",
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    torch.manual_seed(4)
    model = jina_modules()(*(size[k] for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                                               "num_attention_heads", "intermediate_size"))).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or "layer_norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
            elif "weight" in name and not FULL:
                p.mul_(3.0)
            elif name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.02)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, os.path.join(out, "model.safetensors"))
    model_card(out, "mean", hidden=cfg["hidden_size"])
    if FULL:
        return
    tok.no_padding()
    tok.enable_truncation(128)

    def embed(texts):
        return jina_embed(model, tok, texts).tolist()

    ref = {
        "texts": TEXTS, "queries": QUERIES, "documents": embed(TEXTS), "query_vectors": embed(QUERIES),
        "torch": torch.__version__,
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(ref, f)
    assert isinstance(Tokenizer.from_file(os.path.join(out, "tokenizer.json")), Tokenizer)


# --- Cross-encoders: a sequence-classification head over a pair, scored by transformers ----------


def cross_reference(out, model):
    """transformers' logits for every (query, text) pair, tokenized as a pair by the fixture's
    tokenizer (segment ids from its template), in `reference.json`."""
    import torch
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    pairs = [(q, t) for q in QUERIES for t in TEXTS]
    scores = []
    model.eval()
    with torch.inference_mode():
        for i in range(0, len(pairs), 16):
            part = pairs[i:i + 16]
            enc = tok([p[0] for p in part], [p[1] for p in part], padding=True, truncation=True, max_length=128,
                      return_tensors="pt")
            scores.extend(model(**enc).logits[:, -1].tolist())
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"queries": QUERIES, "texts": TEXTS, "scores": scores, "torch": torch.__version__}, f)


def cross_bert(out):
    from transformers import BertConfig, BertForSequenceClassification

    wordpiece_tokenizer(os.path.join(out, "tokenizer.json"))
    # Segment ids as BERT's own tokenizer gives them: 1 for the pair's second text.
    hf_tokenizer_files(out, "tokenizer.json", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]",
                       model_max_length=128, model_input_names=["input_ids", "token_type_ids", "attention_mask"])
    cfg = BertConfig(vocab_size=1200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                     max_position_embeddings=512, num_labels=1, initializer_range=0.2)
    return BertForSequenceClassification(cfg)


def cross_xlmr(out):
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification

    special = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok = bpe_tokenizer(os.path.join(out, "tokenizer.json"), special, "<s> $A </s>", pair="<s> $A </s> </s> $B </s>")
    hf_tokenizer_files(out, "tokenizer.json", bos_token="<s>", cls_token="<s>", eos_token="</s>", sep_token="</s>",
                       pad_token="<pad>", unk_token="<unk>", model_max_length=128)
    cfg = XLMRobertaConfig(vocab_size=1200, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                           intermediate_size=128, max_position_embeddings=514, type_vocab_size=1, num_labels=1,
                           pad_token_id=tok.token_to_id("<pad>"), bos_token_id=0, eos_token_id=2, initializer_range=0.2)
    return XLMRobertaForSequenceClassification(cfg)


def cross_modernbert(out):
    from transformers import ModernBertConfig, ModernBertForSequenceClassification

    special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = bpe_tokenizer(os.path.join(out, "tokenizer.json"), special, "[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]")
    hf_tokenizer_files(out, "tokenizer.json", cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]", unk_token="[UNK]",
                       model_max_length=128)
    cfg = ModernBertConfig(
        vocab_size=1200, hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=96,
        max_position_embeddings=512, local_attention=8, global_attn_every_n_layers=3, initializer_range=0.5,
        pad_token_id=tok.token_to_id("[PAD]"), cls_token_id=tok.token_to_id("[CLS]"),
        sep_token_id=tok.token_to_id("[SEP]"), bos_token_id=tok.token_to_id("[CLS]"),
        eos_token_id=tok.token_to_id("[SEP]"), num_labels=1, classifier_pooling="mean",
    )
    cfg._attn_implementation = "eager"
    model = ModernBertForSequenceClassification(cfg)
    perturb_norms(model)
    return model


def cross_fixture(build, seed):
    """A cross-encoder fixture: the model `build(out)` returns (its tokenizer files written; torch seeded
    with `seed` first), saved with transformers' scores beside it."""
    def make(out):
        import torch

        torch.manual_seed(seed)
        model = build(out)
        save_model(model, out)
        cross_reference(out, model)
    return make


CROSS = {"bert": (cross_bert, 5), "xlm_roberta": (cross_xlmr, 6), "modernbert": (cross_modernbert, 7)}

FIXTURES = {"nomic_bert": nomic_bert, "modernbert": modernbert, "jina_bert": jina_bert, "qwen3": qwen3}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="models/tests/fixtures/arch")
    p.add_argument("--only", choices=sorted(FIXTURES) + ["cross-" + n for n in sorted(CROSS)])
    p.add_argument("--full-size", metavar="DIR", help="write full-size random checkpoints (no reference) under DIR")
    args = p.parse_args()
    import torch

    torch.set_num_threads(2)
    if args.full_size:
        FULL["on"] = True
    cross = {} if args.full_size else {"cross-" + n: cross_fixture(*f) for n, f in CROSS.items()}
    for name, make in {**FIXTURES, **cross}.items():
        if args.only and name != args.only:
            continue
        out = os.path.join(args.full_size or args.out, name)
        if name.startswith("cross-"):
            out = os.path.join(os.path.dirname(os.path.normpath(args.out)), "cross", name[len("cross-"):])
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        make(out)
        if FULL:
            print(f"{name}: {out} (full size, random weights)")
            continue
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(out) for f in fs)
        ref = json.load(open(os.path.join(out, "reference.json")))
        if "scores" in ref:
            print(f"{name}: {out} ({size / 1024:.0f} KiB), scores {min(ref['scores']):.3f} .. {max(ref['scores']):.3f}")
            continue
        gaps = []
        for q in ref["query_vectors"]:
            scores = sorted((sum(a * b for a, b in zip(q, d)) for d in ref["documents"]), reverse=True)
            gaps.append(min(scores[i] - scores[i + 1] for i in range(10)))
        docs = ref["documents"]
        spread = min(sum(a * b for a, b in zip(x, y)) for x in docs for y in docs)
        print(f"{name}: {out} ({size / 1024:.0f} KiB), spread: least document cosine {spread:.3f}, "
              f"least top-10 score gap {min(gaps):.1e}")


if __name__ == "__main__":
    main()
