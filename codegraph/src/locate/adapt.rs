//! Fitting an index's query adapter on its own git history (`ctxd adapt`, and the end of a
//! `ctxd index` run that recorded history): the project's commit messages, embedded as queries,
//! are mapped toward the files they changed, so the vector signal of localization reads an
//! issue in the project's own words ("the reporter", "tri-state", "the CLI").
//!
//! The examples are what the index already holds: each commit of the recorded history
//! (`ctxd_index::history`, the last `[index] history_commits` commits of each view) with its
//! first message line and the indexed files it changed, the files' vectors the unit mean of their
//! stored chunk vectors ([`ctxd_index::store::Index::file_vectors`]). Left out: merges' and
//! other summaries under [`MIN_SUMMARY_CHARS`] characters, commits that changed no indexed file or
//! over [`MAX_FILES`] of them. The fit and its judgement are [`ctxd_models::adapter::select`]
//! (the newest commits held out; kept only when it ranks their files better than the base).
//! The result — kept or not, with its figures — is stored for the history version it was fitted
//! on ([`ctxd_index::adapters`]), so a query of another snapshot never uses it. Nothing is
//! re-embedded: the documents keep their vectors.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use ctxd_index::adapters::{store, StoredAdapter};
use ctxd_index::history::History;
use ctxd_index::store::Index;
use ctxd_models::adapter::{select, Example, Selection};
use ctxd_models::service::EmbedService;
use ctxd_search::error::SearchError;

/// Shortest first message line a commit needs to teach anything.
pub const MIN_SUMMARY_CHARS: usize = 15;
/// Most indexed files a commit may change and still count (a wide refactor says little).
pub const MAX_FILES: usize = 20;
/// Summaries embedded per model call.
const BATCH: usize = 256;

/// What [`adapt`] did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct AdaptOutcome {
    /// Commits in the recorded history; those usable as examples are `selection.commits`.
    pub history_commits: usize,
    /// Indexed files with a vector.
    pub files: usize,
    /// The fit's judgement (`fit` is `None` when no adapter is used).
    pub selection: Selection,
    /// The history version it was fitted on (`0`: the index has no history, nothing stored).
    pub history_version: u64,
    /// Milliseconds spent embedding the commit messages.
    pub embed_ms: u64,
}

/// One commit of the history as an example: time, summary, the paths it changed.
struct Commit<'a> {
    time: i64,
    key: &'a str,
    summary: &'a str,
    paths: &'a [String],
}

/// The history's commits, newest first (ties by key, so the order is fixed).
fn commits(h: &History) -> Vec<Commit<'_>> {
    let mut seen: BTreeMap<&str, Commit<'_>> = BTreeMap::new();
    for rows in h.by_path.values() {
        for r in rows {
            if let Some((key, paths)) = h.by_commit.get_key_value(&History::commit_key(&r.path, &r.commit)) {
                seen.entry(key.as_str()).or_insert(Commit { time: r.time, key, summary: &r.summary, paths });
            }
        }
    }
    let mut out: Vec<Commit<'_>> = seen.into_values().collect();
    out.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| a.key.cmp(b.key)));
    out
}

/// Whether a commit's summary is worth learning from.
fn teaches(summary: &str) -> bool {
    summary.chars().count() >= MIN_SUMMARY_CHARS && !summary.starts_with("Merge ")
}

/// Fits, judges and stores `index`'s query adapter (see the module docs).
pub async fn adapt(index: &Index, embed: &EmbedService) -> Result<AdaptOutcome, SearchError> {
    let version = index.history_version().await?;
    let h = index.file_history().await?;
    let vectors = index.file_vectors().await?;
    let dim = index.dim();
    let mut paths: Vec<&String> = vectors.keys().collect();
    paths.sort();
    let ids: HashMap<&str, usize> = paths.iter().enumerate().map(|(i, p)| (p.as_str(), i)).collect();
    let files: Vec<f32> = paths.iter().flat_map(|p| vectors[*p].iter().copied()).collect();
    let all = commits(&h);
    let mut summaries = Vec::new();
    let mut changed = Vec::new();
    for c in &all {
        let mut f: Vec<usize> = c.paths.iter().filter_map(|p| ids.get(p.as_str()).copied()).collect();
        f.sort_unstable();
        f.dedup();
        if teaches(c.summary) && !f.is_empty() && f.len() <= MAX_FILES {
            summaries.push(c.summary.to_string());
            changed.push(f);
        }
    }
    let started = Instant::now();
    let mut queries = Vec::with_capacity(summaries.len());
    for batch in summaries.chunks(BATCH) {
        queries.extend(embed.embed_queries_bulk(batch.to_vec()).await?);
    }
    let embed_ms = started.elapsed().as_millis() as u64;
    let examples: Vec<Example> =
        queries.into_iter().zip(changed).map(|(query, files)| Example { query, files }).collect();
    let (kept, selection) = select(&examples, &files, dim).map_err(|e| SearchError::RankModel(e.to_string()))?;
    let outcome =
        AdaptOutcome { history_commits: all.len(), files: paths.len(), selection, history_version: version, embed_ms };
    if version > 0 {
        let row = StoredAdapter {
            model: index.model_id().to_string(),
            dim: dim as u32,
            history_version: version,
            newest: h.newest,
            weights: kept.map(|a| a.to_bytes()).unwrap_or_default(),
            report: serde_json::to_string(&outcome.selection).unwrap_or_default(),
        };
        store(index.uri(), &row).await?;
    }
    Ok(outcome)
}
