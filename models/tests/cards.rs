//! Model folders in every form sentence-transformers writes or has written load and embed alike.
//!
//! The default model (all-MiniLM-L6-v2) is installed in the 2.x–5.x form: `1_Pooling/config.json`
//! with `pooling_mode_mean_tokens: true`, the window as `max_seq_length: 256` in
//! `sentence_bert_config.json`. `fixtures/st6-minilm/` holds the small files sentence-transformers
//! 6.2.0 wrote when it saved that same model (`SentenceTransformer(dir).save(out)`, as
//! `train/train_encoder.py` saves the model it trains): `{"embedding_dimension": 384,
//! "pooling_mode": "mean", ...}`, a `sentence_bert_config.json` without `max_seq_length`, the
//! window as the tokenizer's `model_max_length`, module types under
//! `sentence_transformers.sentence_transformer.modules`. The test puts them beside the installed
//! model's weights and tokenizer and holds every CPU backend's vectors of that folder to the 5.x
//! folder's.

use std::path::{Path, PathBuf};

mod common;

use ctxd_models::{embedder::Embedder, Pooling};
use ctxd_models::{loaded::LoadedModel, resolve::DEFAULT_MODEL, BertEmbedder, FastBert, Precision};

/// Texts short and long: the last is over the 256-token window, so the window is exercised.
fn texts() -> Vec<String> {
    vec![
        "def read_config(path): return toml.load(open(path))".into(),
        "how do I parse a TOML file in python".into(),
        "fn main() { let v: Vec<u32> = (0..10).collect(); println!(\"{v:?}\"); }".into(),
        "retry the request with exponential back-off ".repeat(60),
    ]
}

/// The model folder `from` as sentence-transformers 6.2.0 saved it: its weights and tokenizer
/// linked or copied, the 6.x files from the fixture.
fn as_saved_by_6x(from: &Path, to: &Path) {
    let fixture = common::manifest_dir().join("tests/fixtures/st6-minilm");
    for file in [
        "modules.json",
        "sentence_bert_config.json",
        "config_sentence_transformers.json",
        "tokenizer_config.json",
        "1_Pooling/config.json",
    ] {
        std::fs::create_dir_all(to.join(file).parent().unwrap()).unwrap();
        std::fs::copy(fixture.join(file), to.join(file)).unwrap();
    }
    for file in ["config.json", "tokenizer.json", "vocab.txt", "special_tokens_map.json", "model.safetensors"] {
        let (src, dst) = (from.join(file), to.join(file));
        if src.is_file() {
            std::fs::remove_file(&dst).ok();
            if std::fs::hard_link(&src, &dst).is_err() {
                std::fs::copy(&src, &dst).unwrap();
            }
        }
    }
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter().zip(b).flat_map(|(x, y)| x.iter().zip(y).map(|(p, q)| (p - q).abs())).fold(0.0, f32::max)
}

#[test]
fn a_folder_saved_by_sentence_transformers_6_embeds_as_the_5x_folder() {
    let old = LoadedModel::resolve(DEFAULT_MODEL).expect("default model installed (scripts/fetch-model.sh)");
    let dir: PathBuf = std::env::temp_dir().join(format!("ctxd-card-6x-{}", std::process::id()));
    as_saved_by_6x(&old.files().dir, &dir);
    let pooling = std::fs::read_to_string(dir.join("1_Pooling/config.json")).unwrap();
    assert!(pooling.contains("\"pooling_mode\": \"mean\"") && !pooling.contains("mean_tokens"), "{pooling}");
    let st = std::fs::read_to_string(dir.join("sentence_bert_config.json")).unwrap();
    assert!(!st.contains("max_seq_length"), "the 6.x file names no window: {st}");
    let new = LoadedModel::resolve(dir.to_str().unwrap()).expect("a 6.x folder loads");
    assert_eq!(new.card().pooling, Pooling::Mean);
    assert_eq!((new.card().query_prompt.clone(), new.card().document_prompt.clone()), (None, None));
    assert_eq!(new.max_seq_len(), old.max_seq_len(), "the window comes from tokenizer_config.json");
    assert_eq!(new.max_seq_len(), 256);
    let texts = texts();
    let want = BertEmbedder::load(&old, candle_core::Device::Cpu).unwrap().embed(&texts).unwrap();
    let got = BertEmbedder::load(&new, candle_core::Device::Cpu).unwrap().embed(&texts).unwrap();
    assert!(max_diff(&want, &got) < 1e-6, "candle: {}", max_diff(&want, &got));
    let mut fast = FastBert::load(&new, Some(Precision::F32), 2).expect("onednn installed (scripts/fetch-onednn.sh)");
    let got = fast.embed(&texts).unwrap();
    assert!(max_diff(&want, &got) < 1e-3, "fast path: {}", max_diff(&want, &got));
    std::fs::remove_dir_all(&dir).ok();
}
