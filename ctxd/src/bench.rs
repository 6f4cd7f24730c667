//! `ctxd bench`: throughput figures on a real folder (default: the CoSQA corpus).
//!
//! Prints, for this machine:
//! * chunking — files/s, MB/s and chunks/s of load + chunk (tree-sitter and the real tokenizer);
//! * embedding — chunks/s and tokens/s of the model on the first `--embed-chunks` chunks;
//! * end to end — files/s of `ctxd index` into a fresh temporary index.
//!
//! `--integrity DIR...` instead re-parses every chunk that is a whole definition (kinds
//! without `_part`) with its language's grammar and prints the share without ERROR nodes, per
//! language: do chunk boundaries fall where the code's own structure does?

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use ctxd_models::resolve::DEFAULT_MODEL;
use ctxd_pipeline::pipeline::Pipeline;
use ctxd_stages::chunk::{ChunkConfig, Chunker};
use ctxd_stages::embed::embedding_text;
use ctxd_stages::load::{load, LoadConfig, LoadOutcome};
use ctxd_stages::state::FileState;
use ctxd_stages::watch::Scanner;

use crate::model_args::ModelArgs;
use crate::open::{build_config, start_model};

pub async fn run(
    corpus: &Path,
    embed_chunks: usize,
    skip_e2e: bool,
    export: Option<&Path>,
    model: &ModelArgs,
) -> Result<()> {
    if !corpus.is_dir() {
        anyhow::bail!("corpus {} is not a directory", corpus.display());
    }
    let spec = model.model.clone().unwrap_or_else(|| DEFAULT_MODEL.to_string());
    let (service, counter) = start_model(&spec, model).await?;
    println!(
        "ctxd bench on {} (model {}, {} cores, embedder: {})",
        corpus.display(),
        service.model_id(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        service.backend()
    );

    // Chunking: load + chunk every file on this thread.
    let started = Instant::now();
    let Chunked { files, bytes, chunks } = chunk_corpus(corpus, counter);
    let secs = started.elapsed().as_secs_f64();
    println!(
        "chunk:  {} files, {:.1} MB, {} chunks in {:.2}s = {:.0} files/s, {:.2} MB/s, {:.0} chunks/s",
        files,
        bytes as f64 / 1e6,
        chunks.len(),
        secs,
        files as f64 / secs,
        bytes as f64 / 1e6 / secs,
        chunks.len() as f64 / secs
    );

    // Embedding: a warm-up batch, then the sample.
    let sample: Vec<(String, u32)> = chunks
        .iter()
        .take(embed_chunks)
        .map(|(p, c)| (embedding_text(p, c, service.model_id()).0, c.token_count))
        .collect();
    if !sample.is_empty() {
        service.embed_bulk(sample.iter().take(8).map(|s| s.0.clone()).collect()).await?;
        let tokens: u64 = sample.iter().map(|s| s.1 as u64).sum();
        let started = Instant::now();
        let vectors = service.embed_bulk(sample.iter().map(|s| s.0.clone()).collect()).await?;
        let secs = started.elapsed().as_secs_f64();
        println!(
            "embed:  {} chunks, {} tokens (mean {:.0}) in {:.2}s = {:.1} chunks/s, {:.0} tokens/s",
            sample.len(),
            tokens,
            tokens as f64 / sample.len() as f64,
            secs,
            sample.len() as f64 / secs,
            tokens as f64 / secs
        );
        if let Some(dir) = export {
            write_export(dir, &sample, &vectors, secs, tokens, service.backend())?;
        }
    }
    drop(service);

    if !skip_e2e {
        let tmp = tempfile::tempdir().context("creating a temporary index directory")?;
        let cfg = build_config(None, Some(corpus), Some(&tmp.path().join("db")), model)?;
        let pipeline = Pipeline::open(cfg).await?;
        let (_kill, shutdown) = tokio::sync::watch::channel(false);
        let summary = pipeline.run(false, shutdown)?.join().await?;
        println!(
            "index:  {} files, {} chunks, {} commits in {:.1}s = {:.1} files/s, {:.1} chunks/s end to end",
            summary.files_indexed,
            summary.chunks_written,
            summary.commits,
            summary.seconds,
            summary.files_indexed as f64 / summary.seconds,
            summary.chunks_written as f64 / summary.seconds
        );
    }
    Ok(())
}

/// A corpus loaded and chunked: files read, their bytes, and (path, chunk) pairs.
pub(crate) struct Chunked {
    pub files: usize,
    pub bytes: usize,
    pub chunks: Vec<(String, ctxd_index::record::Chunk)>,
}

/// Loads and chunks every file under `corpus` on this thread, as indexing does.
pub(crate) fn chunk_corpus(corpus: &Path, counter: ctxd_models::tokens::TokenCounter) -> Chunked {
    let chunker = Chunker::with_tokenizer(counter, ChunkConfig::default());
    let scanner = Scanner::new(corpus, vec![]);
    let mut files = Vec::new();
    scanner.scan(|f| {
        files.push(f);
        true
    });
    let state = FileState::default();
    let (mut bytes, mut chunks) = (0usize, Vec::new());
    for f in &files {
        if let Ok(LoadOutcome::Loaded(l)) = load(f, &state, &LoadConfig::default()) {
            bytes += l.text.len();
            let c = chunker.chunk_file(&l);
            chunks.extend(c.chunks.into_iter().map(|ch| (c.rel.clone(), ch)));
        }
    }
    Chunked { files: files.len(), bytes, chunks }
}

/// Writes texts, vectors and timing for an outside comparison.
fn write_export(
    dir: &Path,
    sample: &[(String, u32)],
    vectors: &[Vec<f32>],
    secs: f64,
    tokens: u64,
    backend: &str,
) -> Result<()> {
    use std::io::Write;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut texts = std::io::BufWriter::new(std::fs::File::create(dir.join("texts.jsonl"))?);
    for (text, _) in sample {
        writeln!(texts, "{}", serde_json::to_string(text)?)?;
    }
    texts.flush()?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(dir.join("ctxd-vectors.jsonl"))?);
    for v in vectors {
        writeln!(out, "{}", serde_json::to_string(v)?)?;
    }
    out.flush()?;
    let timing = serde_json::json!({
        "chunks": sample.len(),
        "tokens": tokens,
        "seconds": secs,
        "backend": backend,
        "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
    });
    std::fs::write(dir.join("ctxd-timing.json"), serde_json::to_string_pretty(&timing)?)?;
    println!("export: {}", dir.display());
    Ok(())
}

/// The text a whole-definition chunk is re-parsed as: dedented, and wrapped where the language
/// does not allow the definition at the top level (methods of Java-like languages, JS/TS class
/// methods, PHP's opening tag).
fn reparse_source(language: &str, kind: &str, content: &str) -> String {
    let indent =
        content.lines().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    let body: String =
        content.lines().map(|l| l.get(indent..).unwrap_or(l.trim_start())).collect::<Vec<_>>().join("\n");
    let member = matches!(kind, "method" | "property");
    match language {
        "php" if member => format!("<?php\nclass W {{\n{body}\n}}\n"),
        "php" => format!("<?php\n{body}\n"),
        "java" | "csharp" | "javascript" | "typescript" | "tsx" if member => format!("class W {{\n{body}\n}}\n"),
        _ => body,
    }
}

/// `ctxd bench --integrity DIR...`.
pub fn integrity(dirs: &[std::path::PathBuf], max_files: usize, model: &ModelArgs) -> Result<()> {
    use std::collections::BTreeMap;
    let spec = model.model.clone().unwrap_or_else(|| DEFAULT_MODEL.to_string());
    let files = ctxd_models::resolve::resolve_model(&spec)?;
    let counter = ctxd_models::tokens::TokenCounter::from_model(&files)?;
    let chunker = Chunker::with_tokenizer(counter, ChunkConfig::default());
    // language → (whole definitions, parsed cleanly, parts, files)
    let mut stats: BTreeMap<&'static str, (usize, usize, usize, usize)> = BTreeMap::new();
    let started = Instant::now();
    for dir in dirs {
        let scanner = Scanner::new(dir, vec![]);
        let mut found = Vec::new();
        scanner.scan(|f| {
            if ctxd_stages::chunk::grammar(ctxd_stages::lang::detect(&f.rel)).is_some() {
                found.push(f);
            }
            found.len() < max_files
        });
        let state = FileState::default();
        for f in &found {
            let Ok(LoadOutcome::Loaded(l)) = load(f, &state, &LoadConfig::default()) else { continue };
            let Some(grammar) = ctxd_stages::chunk::grammar(l.language) else { continue };
            let mut parser = tree_sitter::Parser::new();
            parser.set_language(&grammar).context("loading a grammar")?;
            // Only files that parse cleanly as a whole: a chunk cannot be better than its file.
            match parser.parse(&l.text, None) {
                Some(tree) if !tree.root_node().has_error() => {}
                _ => continue,
            }
            let entry = stats.entry(l.language).or_default();
            entry.3 += 1;
            for c in chunker.chunk_file(&l).chunks {
                let Some(kind) = c.kind.as_deref() else { continue };
                if kind.ends_with("_part") {
                    entry.2 += 1;
                    continue;
                }
                if kind == "module" || kind == "section" {
                    continue;
                }
                entry.0 += 1;
                // Merged sibling definitions are methods when their symbols have a parent.
                let kinds: &[&str] = if kind == "definitions" { &["function", "method"] } else { &[kind] };
                let clean = kinds.iter().any(|k| {
                    let src = reparse_source(l.language, k, &c.content);
                    parser.parse(&src, None).is_some_and(|t| !t.root_node().has_error())
                });
                if clean {
                    entry.1 += 1;
                }
            }
        }
    }
    println!("{:<12} {:>7} {:>12} {:>10} {:>9}", "language", "files", "definitions", "clean", "parts");
    let (mut all, mut ok) = (0, 0);
    for (lang, (defs, clean, parts, nfiles)) in &stats {
        all += defs;
        ok += clean;
        let share = if *defs > 0 { 100.0 * *clean as f64 / *defs as f64 } else { 100.0 };
        println!("{lang:<12} {nfiles:>7} {defs:>12} {share:>9.2}% {parts:>9}");
    }
    let share = if all > 0 { 100.0 * ok as f64 / all as f64 } else { 100.0 };
    println!("{:<12} {:>7} {all:>12} {share:>9.2}%   ({:.1}s)", "all", "", started.elapsed().as_secs_f64());
    Ok(())
}
