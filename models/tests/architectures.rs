//! Each non-BERT architecture against its reference implementation: random-weight checkpoints
//! with the vectors transformers / sentence-transformers computed for a fixed text set
//! (`scripts/gen-arch-fixtures.py` wrote `tests/fixtures/arch/`). ctxd loads each through the
//! model card like any model — pooling and prompts included — and must give every vector at
//! cosine ≥ 0.9999 to the reference, and the same top-10 order of the documents for each query.

use std::path::PathBuf;

use ctxd_models::loaded::LoadedModel;
use ctxd_models::runtime::Runtime;
use ctxd_models::Family;

#[derive(serde::Deserialize)]
struct Reference {
    texts: Vec<String>,
    queries: Vec<String>,
    documents: Vec<Vec<f32>>,
    query_vectors: Vec<Vec<f32>>,
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/arch").join(name)
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    dot(a, b) / (dot(a, a).sqrt() * dot(b, b).sqrt()).max(1e-12)
}

/// The documents' order for `query` (best first), the first ten.
fn top10(query: &[f32], docs: &[Vec<f32>]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..docs.len()).collect();
    order.sort_by(|&a, &b| dot(query, &docs[b]).total_cmp(&dot(query, &docs[a])));
    order.truncate(10);
    order
}

/// [`check_on`] on candle alone, and with oneDNN's matmuls where the library loads.
fn check(name: &str, family: Family) {
    check_on(name, family, "candle");
    if ctxd_models::dnnl::Dnnl::load().is_ok() {
        check_on(name, family, "onednn");
    } else {
        eprintln!("{name}: the oneDNN path skipped: libdnnl.so.3 not found (scripts/fetch-onednn.sh)");
    }
}

fn check_on(name: &str, family: Family, backend: &str) {
    let dir = fixture(name);
    let reference: Reference =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
    let loaded = LoadedModel::resolve(dir.to_str().unwrap()).unwrap();
    assert_eq!(loaded.family(), family);
    let runtime =
        Runtime { device: ctxd_choice::DeviceChoice::Cpu, backend: backend.parse().unwrap(), ..Runtime::default() };
    let mut picked = runtime.load(&loaded).unwrap();
    assert_eq!(picked.backend, backend, "{name}: {}", picked.summary());
    let name = &format!("{name} ({backend})");
    let card = loaded.card().clone();
    let docs: Vec<String> = reference.texts.iter().map(|t| card.document_text(t)).collect();
    let queries: Vec<String> = reference.queries.iter().map(|q| card.query_text(q)).collect();
    // One batch of mixed lengths (padding and masks matter), and the queries on their own.
    let got_docs = picked.embedder.embed(&docs).unwrap();
    let got_queries = picked.embedder.embed(&queries).unwrap();
    let least = got_docs.iter().zip(&reference.documents).map(|(g, w)| cosine(g, w)).fold(1.0f32, f32::min);
    eprintln!("{name}: least cosine to the reference over {} documents: {least:.7}", docs.len());
    for (i, (got, want)) in got_docs.iter().zip(&reference.documents).enumerate() {
        let c = cosine(got, want);
        assert!(c >= 0.9999, "{name}: document {i} ({:?}) at cosine {c} to the reference", reference.texts[i]);
    }
    for (i, (got, want)) in got_queries.iter().zip(&reference.query_vectors).enumerate() {
        let c = cosine(got, want);
        assert!(c >= 0.9999, "{name}: query {i} at cosine {c} to the reference");
        assert_eq!(top10(got, &got_docs), top10(want, &reference.documents), "{name}: query {i}'s top 10");
    }
    // A text embedded alone gives the vector it gets in a padded batch.
    let alone = picked.embedder.embed(&docs[..1]).unwrap();
    assert!(cosine(&alone[0], &got_docs[0]) > 0.99999, "{name}: padding changed a vector");
}

#[test]
fn nomic_bert_matches_transformers() {
    check("nomic_bert", Family::NomicBert);
}

#[test]
fn nomic_bert_with_its_original_config_keys_matches_too() {
    check("nomic_bert_original", Family::NomicBert);
}

#[test]
fn modernbert_matches_transformers() {
    check("modernbert", Family::ModernBert);
}

#[test]
fn jina_bert_matches_its_reference() {
    check("jina_bert", Family::JinaBert);
}

#[test]
fn qwen3_matches_transformers() {
    check("qwen3", Family::Qwen3);
}

#[test]
fn the_card_is_read() {
    let qwen = LoadedModel::resolve(fixture("qwen3").to_str().unwrap()).unwrap();
    assert_eq!(qwen.card().pooling, ctxd_models::Pooling::LastToken);
    assert!(qwen.card().query_prompt.as_deref().unwrap_or("").starts_with("Instruct:"));
    let modern = LoadedModel::resolve(fixture("modernbert").to_str().unwrap()).unwrap();
    assert_eq!(modern.card().pooling, ctxd_models::Pooling::Cls);
    let nomic = LoadedModel::resolve(fixture("nomic_bert").to_str().unwrap()).unwrap();
    assert_eq!(nomic.card().document_prompt.as_deref(), Some("search_document: "));
}

#[test]
fn an_unknown_architecture_is_refused_by_name() {
    let dir = std::env::temp_dir().join(format!("ctxd-arch-t5-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["tokenizer.json", "model.safetensors"] {
        std::fs::copy(fixture("qwen3").join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("config.json"), r#"{"model_type": "t5", "d_model": 64}"#).unwrap();
    let err = LoadedModel::resolve(dir.to_str().unwrap()).err().expect("t5 is refused").to_string();
    assert!(err.contains("'t5'") && err.contains("nomic_bert") && err.contains("config.json"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[derive(serde::Deserialize)]
struct CrossReference {
    queries: Vec<String>,
    texts: Vec<String>,
    /// transformers' logit of every (query, text) pair, queries outer.
    scores: Vec<f32>,
}

/// A cross-encoder fixture against transformers' logits: every pair within 1e-4.
fn check_cross(name: &str) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/cross").join(name);
    let reference: CrossReference =
        serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap();
    let loaded = LoadedModel::resolve(dir.to_str().unwrap()).unwrap();
    let dnnl = ctxd_models::dnnl::Dnnl::load().ok();
    for gemm in [None, dnnl.as_ref()] {
        let mut cross = ctxd_models::cross::CrossEncoder::load(&loaded, candle_core::Device::Cpu, gemm).unwrap();
        let backend = if gemm.is_some() { "onednn" } else { "candle" };
        check_scores(&format!("{name} ({backend})"), &mut cross, &reference);
    }
}

fn check_scores(name: &str, cross: &mut ctxd_models::cross::CrossEncoder, reference: &CrossReference) {
    use ctxd_models::embedder::Embedder;
    let pairs: Vec<String> = reference
        .queries
        .iter()
        .flat_map(|q| reference.texts.iter().map(move |t| ctxd_models::cross::pair_text(q, t)))
        .collect();
    let got: Vec<f32> = cross.embed(&pairs).unwrap().into_iter().map(|s| s[0]).collect();
    let worst = got.iter().zip(&reference.scores).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    eprintln!("{name}: largest score difference to transformers over {} pairs: {worst:.2e}", pairs.len());
    assert!(worst <= 1e-4, "{name}: a score {worst} from the reference");
    let spread = reference.scores.iter().fold(f32::MIN, |m, &s| m.max(s))
        - reference.scores.iter().fold(f32::MAX, |m, &s| m.min(s));
    assert!(spread > 1e-2, "{name}: the reference scores are all alike ({spread}): the fixture tests nothing");
}

#[test]
fn a_bert_cross_encoder_scores_like_transformers() {
    check_cross("bert");
}

#[test]
fn an_xlm_roberta_cross_encoder_scores_like_transformers() {
    check_cross("xlm_roberta");
}

#[test]
fn a_modernbert_cross_encoder_scores_like_transformers() {
    check_cross("modernbert");
}
