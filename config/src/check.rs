//! The checks of a built [`Config`]'s values (ranges, addresses, one mirror per git source,
//! aggregate sources), every problem collected with the keys it names; run after the file is
//! read (`config::validate`) and again after command-line overrides ([`Config::validate`]).

use crate::error::{ConfigErrors, Problem};
use crate::named::NamedSource;
use crate::server::{MAX_RERANK_DEPTH, MAX_STALE_ANSWER_MS};
use crate::settings::Config;

/// Checks of the values; every problem is reported (the message names its keys).
pub(crate) fn check(cfg: &Config) -> Result<(), ConfigErrors> {
    let mut errs = Problems::default();
    check_pipeline_and_sources(cfg, &mut errs);
    check_chunk_and_model(cfg, &mut errs);
    check_server(cfg, &mut errs);
    check_aggregate(cfg, &mut errs);
    if errs.0.is_empty() {
        Ok(())
    } else {
        Err(ConfigErrors(errs.0))
    }
}

/// The problems found so far.
#[derive(Default)]
struct Problems(Vec<Problem>);

impl Problems {
    fn add(&mut self, key: &str, message: String) {
        self.0.push(Problem { place: None, key: key.into(), message });
    }
}

/// `[pipeline]` stage sizes, the background fit's share and the sources' keys (one mirror per
/// git source).
fn check_pipeline_and_sources(cfg: &Config, errs: &mut Problems) {
    let p = &cfg.pipeline;
    if !(1..=100).contains(&cfg.index.adapt_cpu_percent) {
        let message = format!("index.adapt_cpu_percent must be between 1 and 100, not {}", cfg.index.adapt_cpu_percent);
        errs.add("index.adapt_cpu_percent", message);
    }
    for (name, t) in [("load", p.load), ("chunk", p.chunk), ("embed", p.embed), ("upsert", p.upsert)] {
        if t.capacity == 0 {
            errs.add(&format!("pipeline.{name}.capacity"), format!("pipeline.{name}.capacity must be at least 1"));
        }
        if t.workers == 0 {
            errs.add(&format!("pipeline.{name}.workers"), format!("pipeline.{name}.workers must be at least 1"));
        }
    }
    if !(0..=19).contains(&p.writer_nice) {
        let message = format!(
            "pipeline.writer_nice must be between 0 (the writer at the queries' priority) and 19, not {}",
            p.writer_nice
        );
        errs.add("pipeline.writer_nice", message);
    }
    let src = &cfg.source;
    if src.stream_block_bytes < 4096 || src.stream_block_bytes > 1 << 30 {
        errs.add("source.stream_block_bytes", "source.stream_block_bytes must be between 4096 and 1073741824".into());
    }
    if src.is_object_store() && src.poll_interval_secs == 0 {
        errs.add("source.poll_interval_secs", "source.poll_interval_secs must be at least 1".into());
    }
    // A git source deletes the blobs of its mirror that its refs no longer hold: one mirror
    // per source (paths as resolved, so `m` and `./m` are the same folder).
    let git: Vec<&NamedSource> = cfg.named.iter().filter(|s| s.git.is_some()).collect();
    for (i, s) in git.iter().enumerate() {
        let mirror = s.mirror();
        let norm = |p: &std::path::Path| {
            p.components().filter(|c| !matches!(c, std::path::Component::CurDir)).collect::<std::path::PathBuf>()
        };
        if let Some(other) = cfg.named.iter().find(|o| o.name != s.name && norm(&o.mirror()) == norm(&mirror)) {
            if git[..i].iter().all(|g| g.name != other.name) {
                errs.add(
                    "source.mirror_dir",
                    format!(
                        "source '{}' has the mirror_dir of source '{}': give each source its own",
                        s.name, other.name
                    ),
                );
            }
        }
    }
    for s in cfg.named.iter().filter(|s| s.is_object_store() && s.poll_interval_secs == 0) {
        errs.add("source.poll_interval_secs", format!("source '{}': poll_interval_secs must be at least 1", s.name));
    }
    for s in cfg.sources() {
        let which = if s.name.is_empty() { "source".to_string() } else { format!("source '{}'", s.name) };
        if s.sqs_queue.as_deref().is_some_and(|q| !q.starts_with("https://") && !q.starts_with("http://")) {
            errs.add(
                "source.sqs_queue",
                format!("{which}: sqs_queue is the queue's URL (https://sqs.<region>.amazonaws.com/<account>/<name>)"),
            );
        }
        if s.reconcile_interval_secs == 0 {
            errs.add("source.reconcile_interval_secs", format!("{which}: reconcile_interval_secs must be at least 1"));
        }
    }
}

/// `[chunk]` sizes and `[model]` batching and runtime.
fn check_chunk_and_model(cfg: &Config, errs: &mut Problems) {
    let chunk = &cfg.chunk;
    if chunk.max_tokens < 16 {
        errs.add("chunk.max_tokens", "chunk.max_tokens must be at least 16".into());
    }
    if chunk.overlap_tokens >= chunk.max_tokens {
        errs.add("chunk.overlap_tokens", "chunk.overlap_tokens must be below chunk.max_tokens".into());
    }
    if chunk.merge_tokens > chunk.max_tokens {
        errs.add("chunk.merge_tokens", "chunk.merge_tokens must not exceed chunk.max_tokens".into());
    }
    for (key, share) in [
        ("indexing_share_percent", cfg.model.indexing_share_percent),
        ("indexing_share_waiting_percent", cfg.model.indexing_share_waiting_percent),
    ] {
        if !(1..=100).contains(&share) {
            let message =
                format!("model.{key} must be between 1 and 100 (100: indexing never yields to queries), not {share}");
            errs.add(&format!("model.{key}"), message);
        }
    }
    if cfg.model.max_batch_tokens == 0 || cfg.model.max_batch_texts == 0 {
        let message = "model.max_batch_tokens and model.max_batch_texts must be at least 1";
        errs.add("model.max_batch_tokens", message.into());
    }
    for e in cfg.model.runtime().validate() {
        errs.add("model", format!("model: {e}"));
    }
}

/// `[server]` addresses, sessions, the reader's poll, admission, rescoring and stale answers.
fn check_server(cfg: &Config, errs: &mut Problems) {
    let server = &cfg.server;
    if server.listen.parse::<std::net::SocketAddr>().is_err() {
        errs.add("server.listen", format!("server.listen '{}' is not an address like 127.0.0.1:7700", server.listen));
    }
    if !server.flight_listen.is_empty() && server.flight_listen.parse::<std::net::SocketAddr>().is_err() {
        let message = format!(
            "server.flight_listen '{}' is not an address like 127.0.0.1:7701 (or empty for none)",
            server.flight_listen
        );
        errs.add("server.flight_listen", message);
    }
    if server.session_ttl_secs == 0 || server.max_sessions == 0 || server.session_memory_mb == 0 {
        errs.add(
            "server.session_ttl_secs",
            "server.session_ttl_secs, server.max_sessions and server.session_memory_mb must be above 0".into(),
        );
    }
    if server.reader_poll_ms == 0 || cfg.index.lease_ttl_secs < 3 {
        let message = "server.reader_poll_ms must be above 0 and index.lease_ttl_secs at least 3";
        errs.add("server.reader_poll_ms", message.into());
    }
    if server.queue_timeout_ms == 0 {
        errs.add(
            "server.queue_timeout_ms",
            "server.queue_timeout_ms must be above 0 (max_queued_queries = 0 turns the queue off)".into(),
        );
    }
    if server.rerank_depth > MAX_RERANK_DEPTH {
        let message = format!("server.rerank_depth must be at most {MAX_RERANK_DEPTH} (0 turns rescoring off)");
        errs.add("server.rerank_depth", message);
    }
    if server.stale_answer_ms > MAX_STALE_ANSWER_MS {
        let message = format!(
            "server.stale_answer_ms must be at most {MAX_STALE_ANSWER_MS} (0: never answer from a superseded version)"
        );
        errs.add("server.stale_answer_ms", message);
    }
}

/// `[[aggregate.sources]]`: unique names, URLs where the kind needs one, limits (the kind itself
/// is parsed as the file is read).
fn check_aggregate(cfg: &Config, errs: &mut Problems) {
    let mut names = std::collections::HashSet::new();
    for (i, s) in cfg.aggregate.sources.iter().enumerate() {
        let key = |k: &str| format!("aggregate.sources[{i}].{k}");
        if !names.insert(s.name.as_str()) {
            errs.add(&key("name"), format!("aggregate.sources[{i}].name '{}' is used twice", s.name));
        }
        if s.kind.remote() && !s.url.as_deref().is_some_and(|u| u.starts_with("http://") || u.starts_with("https://")) {
            errs.add(&key("url"), format!("aggregate.sources[{i}].url must be an http(s) URL for kind '{}'", s.kind));
        }
        if s.priority == 0 || s.timeout_ms == 0 {
            errs.add(&key("priority"), format!("aggregate.sources[{i}].priority and timeout_ms must be at least 1"));
        }
    }
}
