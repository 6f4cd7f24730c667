//! `ctxd embed`: texts on stdin, vectors on stdout — how a user (or a test) checks a model, an
//! embedding endpoint or a GPU against another. Each stdin line is a text (with `--jsonl`, a
//! JSON string, so texts may hold newlines); each stdout line is that text's vector as a JSON
//! array, in input order. The vectors are the ones the index stores for a document of that
//! text: the configured model (`--model`, `--device`, `--precision`, `--endpoint`…), pooled and
//! unit length. `--query` embeds them as queries: the same for models without a query prompt
//! (the default model has none). The start-up line (what runs the model, and why) goes to stderr.

use std::io::{BufRead, Write};

use anyhow::{Context, Result};
use ctxd_models::loaded::LoadedModel;
use ctxd_models::resolve::DEFAULT_MODEL;

use crate::model_args::ModelArgs;

/// Texts embedded per model call.
const BATCH: usize = 64;

/// Reads stdin, writes the vectors.
pub fn run(args: &ModelArgs, query: bool, jsonl: bool) -> Result<()> {
    let spec = args.model.as_deref().unwrap_or(DEFAULT_MODEL);
    let loaded = LoadedModel::resolve(spec).with_context(|| format!("loading model {spec}"))?;
    let mut picked = args.runtime()?.load(&loaded).with_context(|| format!("starting model {spec}"))?;
    eprintln!("embed: {}{}", picked.summary(), if query { " (as queries: no query prompt)" } else { "" });
    let mut texts = Vec::new();
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.context("reading stdin")?;
        texts.push(if jsonl {
            serde_json::from_str::<String>(&line)
                .with_context(|| format!("stdin line {}: not a JSON string (--jsonl)", n + 1))?
        } else {
            line
        });
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for batch in texts.chunks(BATCH) {
        let vectors = picked.embedder.embed(batch).context("embedding")?;
        for v in vectors {
            serde_json::to_writer(&mut out, &v)?;
            out.write_all(b"\n")?;
        }
    }
    out.flush()?;
    Ok(())
}
