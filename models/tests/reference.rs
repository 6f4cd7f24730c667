//! ctxd's BERT embedder against vectors computed once with sentence-transformers on PyTorch
//! (`scripts/gen-reference-vectors.py`, committed in `tests/fixtures/reference.json`).
//! Needs the default model installed (`scripts/fetch-model.sh`), and its f16 copy for the f16
//! tests (`scripts/convert-f16.sh`).

mod common;

use ctxd_models::{
    embedder::max_sim, embedder::Embedder, loaded::LoadedModel, resolve::resolve_model, resolve::DEFAULT_MODEL,
    service::EmbedService, service::EmbedServiceConfig, tokens::TokenCounter, BertEmbedder, FastBert, Precision,
};

#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<String>,
    vectors: Vec<Vec<f32>>,
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb)
}

fn reference() -> Reference {
    serde_json::from_str(include_str!("fixtures/reference.json")).expect("fixture parses")
}

#[test]
fn bert_matches_sentence_transformers() {
    let loaded = LoadedModel::resolve(DEFAULT_MODEL).expect("default model installed (scripts/fetch-model.sh)");
    let mut model = BertEmbedder::load(&loaded, candle_core::Device::Cpu).unwrap();
    assert_eq!(model.dim(), 384);
    assert_eq!(model.max_seq_len(), 256);
    let reference = reference();
    // All texts in one padded batch: padding must not change any vector.
    let got = model.embed(&reference.texts).unwrap();
    for ((text, want), got) in reference.texts.iter().zip(&reference.vectors).zip(&got) {
        let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");
        let cos = cosine(want, got);
        assert!(cos >= 0.999, "cosine {cos} < 0.999 for {:?}", &text[..text.len().min(40)]);
    }
    // One at a time (no padding) gives the same vectors.
    for (text, want) in reference.texts.iter().zip(&reference.vectors).take(3) {
        let single = model.embed(std::slice::from_ref(text)).unwrap();
        assert!(cosine(want, &single[0]) >= 0.999);
    }
}

#[test]
fn service_batches_by_tokens_and_keeps_order() {
    let loaded = LoadedModel::resolve(DEFAULT_MODEL).expect("default model installed (scripts/fetch-model.sh)");
    let model = BertEmbedder::load(&loaded, candle_core::Device::Cpu).unwrap();
    // A small token cap forces several forward passes of length-sorted texts.
    let svc = EmbedService::spawn(
        model,
        EmbedServiceConfig { max_batch_tokens: 300, max_batch_texts: 4, ..Default::default() },
    );
    let reference = reference();
    let got = svc.embed_blocking(reference.texts.clone()).unwrap();
    assert_eq!(got.len(), reference.texts.len());
    for (want, got) in reference.vectors.iter().zip(&got) {
        assert!(cosine(want, got) >= 0.999);
    }
}

/// The fast CPU path (oneDNN, no padding) against the same reference, at both precisions:
/// f32 must agree to 0.999 like candle; bf16 to 0.995 (in practice ≥ 0.999, see the benchmark).
/// bf16 needs native bf16 (AVX512-BF16, AMX or AVX2-VNNI-2): on a CPU without it (or with
/// `ONEDNN_MAX_CPU_ISA=AVX2`) the bf16 check is skipped, saying so, and the refusal is checked
/// instead.
#[test]
fn fast_cpu_path_matches_sentence_transformers() {
    let loaded = LoadedModel::resolve(DEFAULT_MODEL).expect("default model installed (scripts/fetch-model.sh)");
    let reference = reference();
    let dnnl = ctxd_models::dnnl::Dnnl::load().expect("onednn installed (scripts/fetch-onednn.sh)");
    for (precision, floor) in [(Precision::F32, 0.999), (Precision::Bf16, 0.995)] {
        if precision == Precision::Bf16 && !dnnl.native_bf16() {
            let err = match FastBert::load(&loaded, Some(precision), 2) {
                Ok(_) => panic!("bf16 was accepted on a CPU without native bf16 ({})", dnnl.bf16_reason()),
                Err(e) => e.to_string(),
            };
            assert_clear_bf16_refusal(&err);
            eprintln!("skipped: the bf16 reference check ({}); checked the refusal instead", dnnl.bf16_reason());
            continue;
        }
        let mut model =
            FastBert::load(&loaded, Some(precision), 2).expect("onednn installed (scripts/fetch-onednn.sh)");
        assert_eq!(model.dim(), 384);
        let got = model.embed(&reference.texts).unwrap();
        assert_eq!(got.len(), reference.texts.len());
        for ((text, want), got) in reference.texts.iter().zip(&reference.vectors).zip(&got) {
            let norm: f32 = got.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "not unit length: {norm}");
            let cos = cosine(want, got);
            assert!(cos >= floor, "{precision:?}: cosine {cos} < {floor} for {:?}", &text[..text.len().min(40)]);
        }
        // Alone (one worker busy, other lengths around it) gives the same vectors.
        for (text, want) in reference.texts.iter().zip(&reference.vectors).rev().take(3) {
            let single = model.embed(std::slice::from_ref(text)).unwrap();
            assert!(cosine(want, &single[0]) >= floor);
        }
    }
}

/// The one sentence a forced bf16 gets where bf16 is not native: it names bf16, what the CPU
/// lacks and the way out, and no oneDNN status code.
fn assert_clear_bf16_refusal(err: &str) {
    assert!(err.contains("precision bf16 cannot run on this CPU"), "{err}");
    assert!(err.contains("lacks native bf16") && err.contains("AVX512-BF16"), "{err}");
    assert!(err.contains("--precision f32") && err.contains("auto"), "{err}");
    assert!(!err.contains("status"), "a library status code reached the user: {err}");
}

/// `precision = "auto"` picks bf16 only where it is native and pays (AMX, or AMD's AVX512-BF16)
/// and says why; a forced bf16 on a CPU without native bf16 fails at start-up with the one
/// clear sentence.
#[test]
fn runtime_picks_precision_by_the_cpu_and_refuses_forced_bf16_without_it() {
    let dnnl = ctxd_models::dnnl::Dnnl::load().expect("onednn installed (scripts/fetch-onednn.sh)");
    let runtime = |precision: &str| ctxd_models::runtime::Runtime {
        device: ctxd_choice::DeviceChoice::Cpu,
        precision: precision.parse().unwrap(),
        backend: ctxd_choice::BackendChoice::Onednn,
        threads: 1,
        ..ctxd_models::runtime::Runtime::default()
    };
    let loaded = LoadedModel::resolve(DEFAULT_MODEL).expect("default model installed (scripts/fetch-model.sh)");
    let auto = FastBert::load(&loaded, None, 1).unwrap();
    let (bf16, why) = dnnl.auto_bf16();
    let want = if bf16 { Precision::Bf16 } else { Precision::F32 };
    assert_eq!(auto.precision(), want, "{}", auto.precision_reason());
    let reason = auto.precision_reason();
    assert!(reason.contains(dnnl.isa_name()) && reason.contains(&why), "{reason}");
    eprintln!("auto on this CPU: {reason}");
    if bf16 {
        assert!(dnnl.native_bf16(), "bf16 only where native");
    }
    if dnnl.native_bf16() {
        // Native bf16: the choice rests on the implementation oneDNN picks, which is named.
        let imp = dnnl.bf16_matmul_impl().unwrap();
        assert!(reason.contains(&imp), "{reason} does not name {imp}");
    } else {
        assert!(reason.contains("lacks native bf16"), "{reason}");
    }
    let forced = ctxd_models::start(DEFAULT_MODEL, EmbedServiceConfig::default(), &runtime("bf16"));
    if dnnl.native_bf16() {
        assert!(forced.is_ok(), "bf16 is native here ({})", dnnl.bf16_reason());
        eprintln!("skipped: the forced-bf16 refusal (this CPU has native bf16: {})", dnnl.bf16_reason());
    } else {
        let err = forced.err().map(|e| e.to_string()).unwrap_or_default();
        assert_clear_bf16_refusal(&err);
    }
}

/// Token embeddings: one unit row per token between [CLS] and [SEP], the same from candle
/// and from the fast path (f32), the same through the service, and MaxSim prefers the text
/// that answers the query over one that shares only its topic.
#[test]
fn token_embeddings_agree_across_backends_and_score_by_late_interaction() {
    let loaded = LoadedModel::resolve(DEFAULT_MODEL).expect("default model installed (scripts/fetch-model.sh)");
    let mut candle = BertEmbedder::load(&loaded, candle_core::Device::Cpu).unwrap();
    let mut fast =
        FastBert::load(&loaded, Some(Precision::F32), 2).expect("onednn installed (scripts/fetch-onednn.sh)");
    let texts: Vec<String> = vec![
        "check if a variable is iterable".into(),
        "utils.py is_iterable\ndef is_iterable(obj):\n    return hasattr(obj, '__iter__')".into(),
        "utils.py read_config\ndef read_config(path):\n    with open(path) as f:\n        return json.load(f)".into(),
    ];
    let ids = candle.encode(&texts).unwrap();
    let (a, b) = (candle.forward_tokens(&ids).unwrap(), fast.forward_tokens(&ids).unwrap());
    for ((seq, a), b) in ids.iter().zip(&a).zip(&b) {
        assert_eq!(a.len(), (seq.len() - 2) * 384, "one row per token between [CLS] and [SEP]");
        assert_eq!(a.len(), b.len());
        for (ra, rb) in a.chunks_exact(384).zip(b.chunks_exact(384)) {
            let norm: f32 = ra.iter().map(|x| x * x).sum::<f32>().sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "row not unit length: {norm}");
            assert!(cosine(ra, rb) >= 0.999, "candle and fast path disagree on a token");
        }
    }
    let svc = EmbedService::spawn(candle, EmbedServiceConfig::default());
    let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let via_service = runtime.block_on(svc.embed_tokens(texts.clone())).unwrap();
    assert_eq!(via_service.len(), 3);
    assert!(cosine(&via_service[1], &a[1]) >= 0.9999);
    let (answer, other) = (max_sim(&a[0], &a[1], 384), max_sim(&a[0], &a[2], 384));
    assert!(answer > other + 0.05, "maxsim {answer} vs {other}");
    assert!(answer <= 1.0 + 1e-4 && other > 0.0);
}

/// The direct WordPiece count equals the `tokenizers` count on real code and prose (every line
/// and every file of this repository's sources and docs), edge cases included.
#[test]
fn fast_token_count_equals_the_tokenizer() {
    let files = resolve_model(DEFAULT_MODEL).expect("default model installed (scripts/fetch-model.sh)");
    let counter = TokenCounter::from_model(&files).unwrap();
    assert!(counter.has_fast_path());
    let manifest = common::manifest_dir();
    let root = manifest.parent().unwrap();
    let mut texts: Vec<String> = vec![
        "".into(),
        "   ".into(),
        "fn main() { println!(\"{}\", x[0]); }".into(),
        "a\u{7}b\tc\rd\u{b}e\u{c}f\u{7f}g".into(),
        "x".repeat(150),
        format!("{} tail", "ab".repeat(60)),
        "[CLS] special [SEP] tokens [UNK]".into(),
        "CamelCaseIdentifier snake_case_identifier SCREAMING_CASE 0xDEADBEEF 3.14e-10".into(),
        "naïve café".into(),
    ];
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        // Other tests may create and remove folders meanwhile (e.g. Python caches): skip those.
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let p = entry.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if p.is_dir() && !name.starts_with('.') && name != "target" && name != "__pycache__" {
                stack.push(p);
            } else if ["rs", "md", "toml", "sh", "py"].iter().any(|e| name.ends_with(e)) {
                let text = std::fs::read_to_string(&p).unwrap_or_default();
                texts.extend(text.lines().map(str::to_string));
                texts.push(text);
            }
        }
    }
    assert!(texts.len() > 5000, "enough real text: {}", texts.len());
    for t in &texts {
        assert_eq!(counter.count(t), counter.exact(t), "count differs for {:?}", &t[..t.len().min(80)]);
    }
}

// The default model's f16 copy (`scripts/convert-f16.sh`): half the bytes, and the same vectors
// as the reference whether the weights are widened to f32 (both CPU paths) or computed in f16
// (candle's f16 path, the one a GPU runs, here on the CPU).

fn half_model() -> LoadedModel {
    let dir = ctxd_models::resolve::ctxd_model_dir().join(format!("{DEFAULT_MODEL}-f16"));
    assert!(
        dir.join("model.safetensors").is_file(),
        "{} is missing: run scripts/convert-f16.sh (scripts/test.sh does)",
        dir.display()
    );
    LoadedModel::resolve(dir.to_str().unwrap()).expect("the f16 copy loads")
}

/// The lowest cosine of `model`'s vectors of the reference texts to the reference vectors.
fn lowest_cosine(model: &mut dyn Embedder) -> f32 {
    let reference: Reference = serde_json::from_str(include_str!("fixtures/reference.json")).expect("fixture parses");
    let got = model.embed(&reference.texts).unwrap();
    // A NaN cosine (a NaN vector) counts as the worst: `f32::min` alone would skip it.
    got.iter()
        .zip(&reference.vectors)
        .map(|(g, w)| cosine(g, w))
        .map(|c| if c.is_nan() { -1.0 } else { c })
        .fold(f32::INFINITY, f32::min)
}

#[test]
fn the_f16_copy_holds_half_precision_tensors_in_half_the_bytes() {
    let half = half_model();
    let full = LoadedModel::resolve(DEFAULT_MODEL).expect("default model installed (scripts/fetch-model.sh)");
    let size = |m: &LoadedModel| std::fs::metadata(&m.files().weights).unwrap().len();
    let (h, f) = (size(&half), size(&full));
    assert!(h * 2 <= f + (1 << 20), "f16 file {h} bytes vs f32 {f}");
    let tensors = candle_core::safetensors::load(&half.files().weights, &candle_core::Device::Cpu).unwrap();
    assert!(!tensors.is_empty());
    assert!(tensors.values().all(|t| t.dtype() != candle_core::DType::F32), "an f32 tensor is left in the f16 copy");
    assert!(tensors.values().any(|t| t.dtype() == candle_core::DType::F16));
}

#[test]
fn f16_weights_agree_with_the_reference_on_every_cpu_path() {
    let half = half_model();
    let mut candle_f32 = BertEmbedder::load(&half, candle_core::Device::Cpu).unwrap();
    let c = lowest_cosine(&mut candle_f32);
    assert!(c >= 0.999, "candle f32 from f16 weights: lowest cosine {c}");
    // The GPU's computation (weights and activations in f16), run by candle on the CPU.
    let mut candle_f16 = BertEmbedder::load_as(&half, candle_core::Device::Cpu, candle_core::DType::F16).unwrap();
    let c = lowest_cosine(&mut candle_f16);
    assert!(c >= 0.995, "candle f16: lowest cosine {c}");
    // Alone (no padding, so no attention bias) as well as in the padded batch above: candle's
    // own BertModel gave NaN here (its bias `0 * f32::MIN` is `0 * -inf` in f16).
    let reference = reference();
    let single = candle_f16.embed(std::slice::from_ref(&reference.texts[0])).unwrap();
    let c = cosine(&reference.vectors[0], &single[0]);
    assert!(c >= 0.995, "candle f16, one text alone: cosine {c}");
    match FastBert::load(&half, Some(Precision::F32), 2) {
        Ok(mut fast) => {
            let c = lowest_cosine(&mut fast);
            assert!(c >= 0.999, "fast path f32 from f16 weights: lowest cosine {c}");
        }
        Err(e) => panic!("onednn installed (scripts/fetch-onednn.sh): {e}"),
    }
}

/// One pass gives the pooled vector and the token states (`forward_both`), equal to the two
/// passes; and the late-interaction codes stored at index time (the full 8-bit codec) score each
/// (query, text) pair within 0.01 of the model's own MaxSim.
#[test]
fn stored_late_codes_score_like_the_models_max_sim() {
    let loaded = LoadedModel::resolve(DEFAULT_MODEL).expect("default model installed (scripts/fetch-model.sh)");
    let mut fast =
        FastBert::load(&loaded, Some(Precision::F32), 2).expect("onednn installed (scripts/fetch-onednn.sh)");
    let texts = reference().texts;
    let ids = fast.encode(&texts).unwrap();
    let (pooled, tokens, both) =
        (fast.forward(&ids).unwrap(), fast.forward_tokens(&ids).unwrap(), fast.forward_both(&ids).unwrap());
    for ((p, t), b) in pooled.iter().zip(&tokens).zip(&both) {
        assert_eq!(b.len(), p.len() + t.len());
        assert!(cosine(&b[..384], p) >= 0.9999 && cosine(&b[384..], t) >= 0.9999, "one pass differs from two");
    }
    let codec = ctxd_models::late::LateCodec::full(384);
    let queries: Vec<String> =
        vec!["check if a variable is iterable".into(), "read a json config file".into(), "sort a list by key".into()];
    let q_tokens = fast.forward_tokens(&fast.encode(&queries).unwrap()).unwrap();
    let mut worst = 0f32;
    for q in &q_tokens {
        let mut prepared = codec.query(q);
        for (doc, seq) in tokens.iter().zip(&ids) {
            let code = codec.encode(doc, ctxd_models::embedder::inner_ids(seq));
            assert_eq!(code.len(), 8 + doc.len() / 384 * (6 + codec.k()));
            let (exact, coded) = (max_sim(q, doc, 384), codec.max_sim(&mut prepared, &code).unwrap());
            worst = worst.max((exact - coded).abs());
        }
    }
    eprintln!("largest |model MaxSim - stored codes' MaxSim|: {worst:.4}");
    assert!(worst <= 0.01, "a coded MaxSim is {worst} from the model's");
    // The default codec: fewer bits a value, punctuation left out. Against the model's MaxSim over
    // the tokens that are not punctuation (as ColBERT masks them), within the 4-bit rounding.
    let punctuation = ctxd_models::embedder::punctuation_ids(&fast);
    assert!(punctuation.len() >= 30, "the tokenizer gives ASCII punctuation ids: {punctuation:?}");
    let words = ctxd_models::late::LateCodec::words(384, &punctuation);
    let (mut worst, mut dropped) = (0f32, 0);
    for q in &q_tokens {
        let mut prepared = words.query(q);
        for (doc, seq) in tokens.iter().zip(&ids) {
            let inner = ctxd_models::embedder::inner_ids(seq);
            let kept: Vec<f32> = doc
                .chunks_exact(384)
                .zip(inner)
                .filter(|(_, id)| !punctuation.contains(id))
                .flat_map(|(row, _)| row.to_vec())
                .collect();
            dropped += inner.len() - kept.len() / 384;
            let code = words.encode(doc, inner);
            assert_eq!(code.len(), 8 + kept.len() / 384 * (6 + 384 * usize::from(words.bits()) / 8));
            let (exact, coded) = (max_sim(q, &kept, 384), words.max_sim(&mut prepared, &code).unwrap());
            worst = worst.max((exact - coded).abs());
        }
    }
    eprintln!(
        "largest |model MaxSim without punctuation - packed codes' MaxSim|: {worst:.4}; {dropped} tokens dropped"
    );
    assert!(dropped > 0, "the reference texts hold punctuation");
    assert!(worst <= 0.005, "a packed MaxSim is {worst} from the model's");
}
