//! Test pieces shared by the re-embedding and migration tests: a stand-in model and rows.

use ctxd_index::{record::Chunk, schema::ChunkRow};
use ctxd_models::{embedder::Embedder, error::ModelError};

/// A stand-in model (the job's logic is under test here; the end-to-end test uses two real
/// checkpoints): dimension 6, the vector counts letters by `text.len() % 6` and is
/// normalized, so each text's vector is fixed and rows can be checked.
pub(crate) struct Letters;

impl Embedder for Letters {
    fn model_id(&self) -> &str {
        "test/letters"
    }
    fn dim(&self) -> usize {
        6
    }
    fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
        Ok(texts.iter().map(|t| t.bytes().map(u32::from).collect()).collect())
    }
    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        Ok(ids.iter().map(|t| letters(t.len())).collect())
    }
    /// No token states: its rows are stored without late-interaction codes.
    fn has_token_states(&self) -> bool {
        false
    }
}

pub(crate) fn letters(len: usize) -> Vec<f32> {
    let mut v = [0.1f32; 6];
    v[len % 6] = 1.0;
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

pub(crate) fn row(i: usize, model: &str) -> ChunkRow {
    let content = format!("fn item_{i}() {{ {} }}", "x".repeat(i % 7));
    ChunkRow {
        chunk: Chunk {
            chunk_id: format!("c{i:03}"),
            path: format!("src/f{}.rs", i / 4),
            language: "rust".into(),
            symbol: Some(format!("item_{i}")),
            kind: Some("function".into()),
            start_line: 1,
            end_line: 1,
            content,
            content_hash: format!("h{i}"),
            token_count: 4,
            source: String::new(),
            git_ref: String::new(),
        },
        embed_key: format!("k{i}-{model}"),
        file_hash: format!("fh{}", i / 4),
        vector: vec![0.5; 4],
        model: model.into(),
        late: Vec::new(),
    }
}

/// Length of the text the job embeds for `row(i, _)`.
pub(crate) fn text_len(i: usize) -> usize {
    let r = row(i, "");
    ctxd_models::chunk_text(&r.path, r.symbol.as_deref(), &r.content).len()
}
