//! The validation step: the raw layer ([`super::raw`]) → a [`Config`], every problem collected
//! into one [`ConfigErrors`] instead of stopping at the first.
//!
//! [`build`] fills the defaults in with the keys as written and reports each unknown key,
//! wrong type and missing required key with its path and where it was set (the file's line,
//! or the `CTXD_*` variable that set it); a key with a problem keeps its default. `check.rs`
//! then checks the values (ranges, addresses, keys that must agree with each other).

use crate::error::Problem;

use crate::raw::{
    Field, Key, RawAggregate, RawAggregateSource, RawChunk, RawConfig, RawIndex, RawModel, RawPipeline, RawServer,
    RawSource, RawSources, RawStageTuning, Unknown,
};
use std::path::PathBuf;

use crate::named::{glob_problem, name_problem, NamedSource};
use crate::server::AggregateSourceConfig;
use crate::settings::{Config, SourceConfig, StageTuning};

/// Collects the problems of one configuration while building it.
struct Checker<'a> {
    /// The file's text (problems name the line of their key).
    text: &'a str,
    /// Keys set by environment variables, with the variable's name.
    from_env: &'a [(Vec<String>, String)],
    problems: Vec<Problem>,
}

impl Checker<'_> {
    /// Reports `message` about the key at `path`, placed where it was set.
    fn problem(&mut self, path: &[&str], message: String) {
        let place = match self.from_env.iter().find(|(p, _)| p.iter().eq(path)) {
            Some((_, var)) => var.clone(),
            None => match key_line(self.text, path) {
                Some(n) => format!("line {n}"),
                None => "here".to_string(),
            },
        };
        self.problems.push(Problem { place: Some(place), key: path.join("."), message });
    }

    /// The value of `section.key`, if it is written with the right type.
    fn value<T>(&mut self, section: &[&str], key: &str, field: Key<T>) -> Option<T> {
        match field? {
            Field::Ok(v) => Some(v),
            Field::Bad(message) => {
                self.problem(&[section, &[key]].concat(), message);
                None
            }
        }
    }

    /// Overwrites `slot` (a default) with `section.key` when it is written with the right type.
    fn set<T>(&mut self, slot: &mut T, section: &[&str], key: &str, field: Key<T>) {
        if let Some(v) = self.value(section, key, field) {
            *slot = v;
        }
    }

    /// Reports every key of `section` the schema does not know.
    fn unknown(&mut self, section: &[&str], unknown: Unknown) {
        for key in unknown.keys() {
            self.problem(
                &[section, &[key.as_str()]].concat(),
                "unknown key (configs/ctxd.toml lists every key)".into(),
            );
        }
    }

    /// A required key: reported at its table when it is missing.
    fn required<T>(&mut self, table: &[&str], key: &str, field: Key<T>) -> Option<T> {
        if field.is_none() {
            self.problem(table, format!("missing field `{key}`"));
        }
        self.value(table, key, field)
    }
}

/// The configuration the raw layer describes (defaults for keys not written or written
/// wrong), and every problem found on the way. `text` is the file (for line numbers),
/// `from_env` the keys set by environment variables.
pub(crate) fn build(raw: RawConfig, text: &str, from_env: &[(Vec<String>, String)]) -> (Config, Vec<Problem>) {
    let mut c = Checker { text, from_env, problems: Vec::new() };
    let mut cfg = Config::default();
    c.unknown(&[], raw.unknown);
    match c.value(&[], "source", raw.source) {
        Some(RawSources::One(s)) => source(&mut c, &mut cfg, *s),
        Some(RawSources::Many(entries)) => named_sources(&mut c, &mut cfg, entries),
        None => {}
    }
    if let Some(s) = c.value(&[], "index", raw.index) {
        index(&mut c, &mut cfg, s);
    }
    if let Some(s) = c.value(&[], "model", raw.model) {
        model(&mut c, &mut cfg, s);
    }
    if let Some(s) = c.value(&[], "chunk", raw.chunk) {
        chunk(&mut c, &mut cfg, s);
    }
    if let Some(s) = c.value(&[], "pipeline", raw.pipeline) {
        pipeline(&mut c, &mut cfg, s);
    }
    if let Some(s) = c.value(&[], "server", raw.server) {
        server(&mut c, &mut cfg, s);
    }
    if let Some(s) = c.value(&[], "aggregate", raw.aggregate) {
        aggregate(&mut c, &mut cfg, s);
    }
    if let Some(s) = c.value(&[], "rerank", raw.rerank) {
        let p = &["rerank"][..];
        c.set(&mut cfg.rerank.model, p, "model", s.model);
        c.unknown(p, s.unknown);
    }
    if let Some(s) = c.value(&[], "locate", raw.locate) {
        let p = &["locate"][..];
        c.set(&mut cfg.locate.model, p, "model", s.model);
        c.unknown(p, s.unknown);
    }
    (cfg, c.problems)
}

/// `[source]`: one source, unnamed (paths as they are) unless it has a `name`.
fn source(c: &mut Checker, cfg: &mut Config, mut raw: RawSource) {
    let p = &["source"][..];
    let name = c.value(p, "name", raw.name.take());
    let (git, refs) = git_keys(c, p, &mut raw);
    shared_source_keys(c, &mut cfg.source, p, raw);
    if git.is_some() && name.is_none() {
        c.problem(
            &[p, &["name"]].concat(),
            "a git source needs a `name` (its files are stored under <name>@<ref>/)".into(),
        );
    }
    if let Some(name) = name {
        if let Some(why) = name_problem(&name) {
            c.problem(&[p, &["name"]].concat(), why);
        }
        let one = cfg.sources().remove(0);
        cfg.named = vec![NamedSource { name, git, refs, ..one }];
    }
}

/// `git` and `refs` of a source (refs default to `HEAD`; the first one, the default view, must
/// name one ref: no glob).
fn git_keys(c: &mut Checker, p: &[&str], raw: &mut RawSource) -> (Option<PathBuf>, Vec<String>) {
    let git = c.value(p, "git", raw.git.take());
    let refs = c.value(p, "refs", raw.refs.take());
    match (&git, refs) {
        (None, Some(_)) => {
            c.problem(&[p, &["refs"]].concat(), "refs is for git sources: add `git = \"<repository>\"`".into());
            (None, Vec::new())
        }
        (None, None) => (None, Vec::new()),
        (Some(_), None) => (git, vec!["HEAD".into()]),
        (Some(_), Some(refs)) => {
            if refs.is_empty() || refs[0].contains('*') || refs.iter().any(|r| r.trim().is_empty() || r.contains('~')) {
                c.problem(
                    &[p, &["refs"]].concat(),
                    "refs must list branches, tags or commits (`*` globs allowed after the first, which names the \
                     default view)"
                        .into(),
                );
            }
            (git, refs)
        }
    }
}

/// `[[source]]`: each entry needs a `name` (unique) and a `root`; the pipeline-wide keys must
/// agree between entries.
fn named_sources(c: &mut Checker, cfg: &mut Config, entries: Vec<RawSource>) {
    let p = &["source"][..];
    // A pipeline-wide key written in some entries must have one value in all of them.
    let (defaults, mut shared, mut conflict) = (SourceConfig::default(), SourceConfig::default(), false);
    for mut raw in entries {
        let name = c.required(p, "name", raw.name.take());
        let (git, refs) = git_keys(c, p, &mut raw);
        let root = if git.is_some() {
            c.value(p, "root", raw.root.take()).or(Some(PathBuf::new()))
        } else {
            c.required(p, "root", raw.root.take())
        };
        let mut one = SourceConfig::default();
        shared_source_keys(c, &mut one, p, raw);
        macro_rules! agree {
            ($($k:ident),*) => {$(
                if one.$k != defaults.$k {
                    conflict |= shared.$k != defaults.$k && shared.$k != one.$k;
                    shared.$k = one.$k;
                }
            )*};
        }
        agree!(debounce_ms, max_file_bytes, stream_threshold_bytes, stream_block_bytes, embed);
        let (Some(name), Some(root)) = (name, root) else { continue };
        if let Some(why) = name_problem(&name) {
            c.problem(&[p, &["name"]].concat(), why);
        } else if cfg.named.iter().any(|s| s.name == name) {
            c.problem(&[p, &["name"]].concat(), format!("source name '{name}' is used twice"));
        }
        cfg.named.push(NamedSource {
            name,
            root,
            include: one.include,
            exclude: one.exclude,
            mirror_dir: one.mirror_dir,
            poll_interval_secs: one.poll_interval_secs,
            sqs_queue: one.sqs_queue,
            reconcile_interval_secs: one.reconcile_interval_secs,
            git,
            refs,
        });
    }
    if conflict {
        c.problem(
            p,
            "debounce_ms, max_file_bytes, stream_threshold_bytes, stream_block_bytes and embed tune the whole \
             pipeline: write them the same in every [[source]] (or in one only)"
                .into(),
        );
    }
    cfg.source = SourceConfig { root: cfg.source.root.clone(), include: Vec::new(), exclude: Vec::new(), ..shared };
}

/// The keys of `[source]` and of each `[[source]]` but `name`.
fn shared_source_keys(c: &mut Checker, out: &mut SourceConfig, p: &[&str], raw: RawSource) {
    c.set(&mut out.root, p, "root", raw.root);
    for (key, field, list) in [("include", raw.include, &mut out.include), ("exclude", raw.exclude, &mut out.exclude)] {
        if let Some(globs) = c.value(p, key, field) {
            for g in &globs {
                if let Some(why) = glob_problem(g) {
                    c.problem(&[p, &[key]].concat(), why);
                }
            }
            *list = globs;
        }
    }
    c.set(&mut out.poll_interval_secs, p, "poll_interval_secs", raw.poll_interval_secs);
    out.sqs_queue = c.value(p, "sqs_queue", raw.sqs_queue).or(out.sqs_queue.take());
    c.set(&mut out.reconcile_interval_secs, p, "reconcile_interval_secs", raw.reconcile_interval_secs);
    out.mirror_dir = c.value(p, "mirror_dir", raw.mirror_dir).or(out.mirror_dir.take());
    c.set(&mut out.debounce_ms, p, "debounce_ms", raw.debounce_ms);
    c.set(&mut out.max_file_bytes, p, "max_file_bytes", raw.max_file_bytes);
    c.set(&mut out.stream_threshold_bytes, p, "stream_threshold_bytes", raw.stream_threshold_bytes);
    c.set(&mut out.stream_block_bytes, p, "stream_block_bytes", raw.stream_block_bytes);
    c.set(&mut out.embed, p, "embed", raw.embed);
    c.unknown(p, raw.unknown);
}

fn index(c: &mut Checker, cfg: &mut Config, raw: RawIndex) {
    let (p, out) = (&["index"][..], &mut cfg.index);
    c.set(&mut out.db, p, "db", raw.db);
    c.set(&mut out.optimize_every_commits, p, "optimize_every_commits", raw.optimize_every_commits);
    c.set(&mut out.optimize_every_rows, p, "optimize_every_rows", raw.optimize_every_rows);
    c.set(&mut out.maintenance_interval_secs, p, "maintenance_interval_secs", raw.maintenance_interval_secs);
    c.set(&mut out.retain_versions_secs, p, "retain_versions_secs", raw.retain_versions_secs);
    c.set(&mut out.vector_index_min_rows, p, "vector_index_min_rows", raw.vector_index_min_rows);
    c.set(&mut out.index_cache_mb, p, "index_cache_mb", raw.index_cache_mb);
    c.set(&mut out.metadata_cache_mb, p, "metadata_cache_mb", raw.metadata_cache_mb);
    c.set(&mut out.history_commits, p, "history_commits", raw.history_commits);
    c.set(&mut out.adapt, p, "adapt", raw.adapt);
    c.set(&mut out.adapt_cpu_percent, p, "adapt_cpu_percent", raw.adapt_cpu_percent);
    c.set(&mut out.adapt_interval_secs, p, "adapt_interval_secs", raw.adapt_interval_secs);
    c.set(&mut out.lease_ttl_secs, p, "lease_ttl_secs", raw.lease_ttl_secs);
    c.unknown(p, raw.unknown);
}

fn model(c: &mut Checker, cfg: &mut Config, raw: RawModel) {
    let (p, out) = (&["model"][..], &mut cfg.model);
    c.set(&mut out.name, p, "name", raw.name);
    c.set(&mut out.max_batch_tokens, p, "max_batch_tokens", raw.max_batch_tokens);
    c.set(&mut out.max_batch_texts, p, "max_batch_texts", raw.max_batch_texts);
    c.set(&mut out.indexing_share_percent, p, "indexing_share_percent", raw.indexing_share_percent);
    let waiting = raw.indexing_share_waiting_percent;
    c.set(&mut out.indexing_share_waiting_percent, p, "indexing_share_waiting_percent", waiting);
    c.set(&mut out.device, p, "device", raw.device);
    c.set(&mut out.precision, p, "precision", raw.precision);
    c.set(&mut out.backend, p, "backend", raw.backend);
    c.set(&mut out.threads, p, "threads", raw.threads);
    c.set(&mut out.endpoint, p, "endpoint", raw.endpoint);
    c.set(&mut out.endpoint_kind, p, "endpoint_kind", raw.endpoint_kind);
    c.set(&mut out.endpoint_batch, p, "endpoint_batch", raw.endpoint_batch);
    c.set(&mut out.endpoint_in_flight, p, "endpoint_in_flight", raw.endpoint_in_flight);
    c.set(&mut out.endpoint_timeout_secs, p, "endpoint_timeout_secs", raw.endpoint_timeout_secs);
    c.set(&mut out.endpoint_token_env, p, "endpoint_token_env", raw.endpoint_token_env);
    if let Some(prefix) = c.value(p, "query_prefix", raw.query_prefix) {
        out.query_prefix = Some(prefix);
    }
    if let Some(prefix) = c.value(p, "document_prefix", raw.document_prefix) {
        out.document_prefix = Some(prefix);
    }
    c.unknown(p, raw.unknown);
}

fn chunk(c: &mut Checker, cfg: &mut Config, raw: RawChunk) {
    let (p, out) = (&["chunk"][..], &mut cfg.chunk);
    c.set(&mut out.max_tokens, p, "max_tokens", raw.max_tokens);
    c.set(&mut out.overlap_tokens, p, "overlap_tokens", raw.overlap_tokens);
    c.set(&mut out.min_tokens, p, "min_tokens", raw.min_tokens);
    c.set(&mut out.merge_tokens, p, "merge_tokens", raw.merge_tokens);
    c.unknown(p, raw.unknown);
}

/// A stage's `{capacity, workers}`: once written, both keys are required (no per-key defaults).
fn stage(c: &mut Checker, out: &mut StageTuning, name: &str, raw: Key<RawStageTuning>) {
    let Some(raw) = c.value(&["pipeline"], name, raw) else { return };
    let p = &["pipeline", name][..];
    if let Some(v) = c.required(p, "capacity", raw.capacity) {
        out.capacity = v;
    }
    if let Some(v) = c.required(p, "workers", raw.workers) {
        out.workers = v;
    }
    c.unknown(p, raw.unknown);
}

fn pipeline(c: &mut Checker, cfg: &mut Config, raw: RawPipeline) {
    let (p, out) = (&["pipeline"][..], &mut cfg.pipeline);
    stage(c, &mut out.load, "load", raw.load);
    stage(c, &mut out.chunk, "chunk", raw.chunk);
    stage(c, &mut out.embed, "embed", raw.embed);
    stage(c, &mut out.upsert, "upsert", raw.upsert);
    c.set(&mut out.embed_batch_tokens, p, "embed_batch_tokens", raw.embed_batch_tokens);
    c.set(&mut out.embed_batch_wait_ms, p, "embed_batch_wait_ms", raw.embed_batch_wait_ms);
    c.set(&mut out.commit_max_rows, p, "commit_max_rows", raw.commit_max_rows);
    c.set(&mut out.commit_interval_ms, p, "commit_interval_ms", raw.commit_interval_ms);
    c.set(&mut out.drain_timeout_secs, p, "drain_timeout_secs", raw.drain_timeout_secs);
    c.set(&mut out.writer_nice, p, "writer_nice", raw.writer_nice);
    c.unknown(p, raw.unknown);
}

fn server(c: &mut Checker, cfg: &mut Config, raw: RawServer) {
    let (p, out) = (&["server"][..], &mut cfg.server);
    c.set(&mut out.listen, p, "listen", raw.listen);
    c.set(&mut out.flight_listen, p, "flight_listen", raw.flight_listen);
    out.auth_token_file = c.value(p, "auth_token_file", raw.auth_token_file).or(out.auth_token_file.take());
    out.source_tokens_file = c.value(p, "source_tokens_file", raw.source_tokens_file).or(out.source_tokens_file.take());
    out.webhook_secret_file =
        c.value(p, "webhook_secret_file", raw.webhook_secret_file).or(out.webhook_secret_file.take());
    c.set(&mut out.rerank_depth, p, "rerank_depth", raw.rerank_depth);
    c.set(&mut out.session_ttl_secs, p, "session_ttl_secs", raw.session_ttl_secs);
    c.set(&mut out.max_sessions, p, "max_sessions", raw.max_sessions);
    c.set(&mut out.session_memory_mb, p, "session_memory_mb", raw.session_memory_mb);
    c.set(&mut out.reader_poll_ms, p, "reader_poll_ms", raw.reader_poll_ms);
    c.set(&mut out.max_concurrent_queries, p, "max_concurrent_queries", raw.max_concurrent_queries);
    c.set(&mut out.max_queued_queries, p, "max_queued_queries", raw.max_queued_queries);
    c.set(&mut out.queue_timeout_ms, p, "queue_timeout_ms", raw.queue_timeout_ms);
    c.set(&mut out.stale_answer_ms, p, "stale_answer_ms", raw.stale_answer_ms);
    c.set(&mut out.mcp_tools, p, "mcp_tools", raw.mcp_tools);
    c.set(&mut out.ui, p, "ui", raw.ui);
    c.unknown(p, raw.unknown);
}

fn aggregate(c: &mut Checker, cfg: &mut Config, raw: RawAggregate) {
    let (p, out) = (&["aggregate"][..], &mut cfg.aggregate);
    if let Some(sources) = c.value(p, "sources", raw.sources) {
        out.sources = sources.into_iter().filter_map(|s| aggregate_source(c, s)).collect();
    }
    c.set(&mut out.cache_entries, p, "cache_entries", raw.cache_entries);
    c.unknown(p, raw.unknown);
}

/// One `[[aggregate.sources]]`; `None` without a usable `name` and `kind`.
fn aggregate_source(c: &mut Checker, raw: RawAggregateSource) -> Option<AggregateSourceConfig> {
    // Keys inside an array of tables are named by the array's path (the line tells which).
    let p = &["aggregate", "sources"][..];
    let name = c.required(p, "name", raw.name);
    let kind = c.required(p, "kind", raw.kind);
    let url = c.value(p, "url", raw.url);
    let priority = c.value(p, "priority", raw.priority).unwrap_or(AggregateSourceConfig::DEFAULT_PRIORITY);
    let timeout_ms = c.value(p, "timeout_ms", raw.timeout_ms).unwrap_or(AggregateSourceConfig::DEFAULT_TIMEOUT_MS);
    let token_env = c.value(p, "token_env", raw.token_env);
    c.unknown(p, raw.unknown);
    Some(AggregateSourceConfig { name: name?, kind: kind?, url, priority, timeout_ms, token_env })
}

/// The 1-based line of `path`'s key in `text`: its own `[section]` / `[[section]]` header, a
/// `key =` line under its parent's header, or an inline table on a line of that section;
/// `None` when not found.
fn key_line(text: &str, path: &[&str]) -> Option<usize> {
    let (key, parents) = path.split_last()?;
    let is_key = |line: &str, k: &str| {
        let l = line.trim_start();
        l.strip_prefix(k).is_some_and(|r| r.trim_start().starts_with('='))
    };
    let mut section: Vec<&str> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            section = t.trim_matches(|c| c == '[' || c == ']').split('.').map(str::trim).collect();
            if section == path || (parents.is_empty() && section.first() == Some(key)) {
                return Some(i + 1);
            }
            continue;
        }
        if section == parents && is_key(line, key) {
            return Some(i + 1);
        }
        // `load = { capacity = 1, x = 2 }` inside `[pipeline]`.
        if parents.len() == section.len() + 1
            && parents.starts_with(&section)
            && is_key(line, parents[parents.len() - 1])
            && line.contains(key)
        {
            return Some(i + 1);
        }
    }
    None
}
