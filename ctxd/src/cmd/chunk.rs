//! `ctxd chunk`: files in, chunks out — what the index stores and the model embeds for each file,
//! without an index and without the model's weights (only its tokenizer, which sets the chunk
//! budget). Each stdin line is a JSON object `{"path", "text"}`: a path as the index stores it
//! (relative to the source's root, `/`-separated; its extension picks the language) and the
//! file's text (a leading byte-order mark is dropped, as the loader drops it). Each stdout line
//! answers one input line, in order (blank input lines are skipped):
//! `{"path", "language", "chunks": [{"start_line", "end_line", "symbol", "kind", "definition",
//! "token_count", "content", "text"}]}`. `text` is exactly the chunk's text the model embeds
//! ([`ctxd_models::chunk_text`]: a header line — `<path> <symbol>`, or the path alone for a chunk
//! without a symbol — then the content; a model whose card has a document prompt reads that
//! prompt before it), and `definition` says whether the symbol table counts the chunk's kind as a
//! definition ([`ctxd_index::symbols::is_definition`]). The language comes from the path's
//! extension; the loader's sniffing of extensionless files is not done here.
//!
//! The budget is the config's `[chunk]` (`--config`, `CTXD_*`), fitted to the model's window, as
//! `ctxd index` fits it, so a line's chunks are the ones an index of that file holds. The text is
//! chunked as source text: PDF, notebook and HTML extraction are the loader's, not done here.
//! `train/mine_pairs.py` renders its training pairs with it; a malformed line is an error naming
//! its number.

use std::io::{BufRead, Write};
use std::path::Path;

use anyhow::{Context, Result};
use ctxd_stages::chunk::Chunker;
use ctxd_stages::load::LoadedFile;
use serde::Deserialize;
use serde_json::json;

use crate::model_args::ModelArgs;
use crate::open::build_config;

/// One stdin line.
#[derive(Deserialize)]
struct FileIn {
    path: String,
    text: String,
}

/// The chunker `ctxd index` would run with this config and model.
fn chunker(config: Option<&Path>, model: &ModelArgs) -> Result<Chunker> {
    let cfg = build_config(config, None, None, model)?;
    let spec = cfg.model.name.clone();
    let (counter, _, _) =
        ctxd_models::tokenizer_only(&spec).with_context(|| format!("loading the tokenizer of model {spec}"))?;
    let (budget, _) = ctxd_pipeline::daemon::chunk_budget(&cfg.chunk, counter.window());
    Ok(Chunker::with_tokenizer(counter, budget))
}

/// The answer line of one file.
fn chunk_line(chunker: &Chunker, file: FileIn) -> serde_json::Value {
    let language = ctxd_stages::lang::detect(&file.path);
    let loaded = LoadedFile {
        rel: file.path,
        language,
        text: match file.text.strip_prefix('\u{feff}') {
            Some(rest) => rest.to_string(),
            None => file.text,
        },
        file_hash: String::new(),
        lossy: false,
        sections: None,
        stream: None,
    };
    let chunked = chunker.chunk_file(&loaded);
    let chunks: Vec<_> = chunked
        .chunks
        .iter()
        .map(|c| {
            let kind = c.kind.as_deref().unwrap_or("");
            json!({
                "start_line": c.start_line,
                "end_line": c.end_line,
                "symbol": c.symbol,
                "kind": c.kind,
                "definition": ctxd_index::symbols::is_definition(kind),
                "token_count": c.token_count,
                "content": c.content,
                "text": ctxd_models::chunk_text(&c.path, c.symbol.as_deref(), &c.content),
            })
        })
        .collect();
    json!({"path": loaded.rel, "language": language, "chunks": chunks})
}

/// Reads files from stdin and writes their chunks to stdout, a line each, flushed per line (a
/// caller may write one file and read its answer before writing the next).
pub fn run(config: Option<&Path>, model: &ModelArgs) -> Result<()> {
    let chunker = chunker(config, model)?;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.context("reading stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        let file: FileIn = serde_json::from_str(&line)
            .with_context(|| format!("stdin line {}: not a JSON object {{\"path\", \"text\"}}", n + 1))?;
        serde_json::to_writer(&mut out, &chunk_line(&chunker, file))?;
        out.write_all(b"\n")?;
        out.flush()?;
    }
    Ok(())
}
