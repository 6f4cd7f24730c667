//! `ctxd embed`: texts on stdin, vectors on stdout — how a user (or a test) checks a model, an
//! embedding endpoint or a GPU against another. Each stdin line is a text (with `--jsonl`, a
//! JSON string, so texts may hold newlines); each stdout line is that text's vector as a JSON
//! array, in input order. The vectors are the ones the index stores for a document of that
//! text: the configured model (`--model`, `--device`, `--precision`, `--endpoint`…), after the
//! model card's document prompt, pooled as the card says and unit length. `--query` embeds them
//! as queries, after the card's query prompt (`--query-prefix` / `--document-prefix` replace the
//! card's; the default model has neither). The start-up line (what runs the model, how it pools
//! and prompts, and why) goes to stderr.

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
    let runtime = args.runtime()?;
    let loaded = loaded.with_prefixes(runtime.query_prefix.as_deref(), runtime.document_prefix.as_deref());
    let mut picked = runtime.load(&loaded).with_context(|| format!("starting model {spec}"))?;
    let card = loaded.card().clone();
    let prompt = if query { &card.query_prompt } else { &card.document_prompt };
    let kind = if query { "queries" } else { "documents" };
    match prompt {
        Some(p) => eprintln!("embed: {}; as {kind}, after the prompt {p:?}", picked.summary()),
        None => eprintln!("embed: {}; as {kind} (the model has no {kind} prompt)", picked.summary()),
    }
    let mut texts = Vec::new();
    for (n, line) in std::io::stdin().lock().lines().enumerate() {
        let line = line.context("reading stdin")?;
        let text = if jsonl {
            serde_json::from_str::<String>(&line)
                .with_context(|| format!("stdin line {}: not a JSON string (--jsonl)", n + 1))?
        } else {
            line
        };
        texts.push(if query { card.query_text(&text) } else { card.document_text(&text) });
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
