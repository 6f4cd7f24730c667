//! Fitting an index's query adapter on its own git history (`ctxd adapt`, the end of a
//! `ctxd index` run that recorded history, and a daemon's background job, [`crate::adapt_job`]):
//! the project's commit messages, embedded as queries, are mapped toward the files they changed,
//! so the vector signal of localization reads an issue in the project's own words ("the
//! reporter", "tri-state", "the CLI").
//!
//! The examples are what the index already holds: each commit of the recorded history
//! (`ctxd_index::history`, the last `[index] history_commits` commits of each view) with its
//! first message line and the indexed files it changed, the files' vectors the unit mean of their
//! stored chunk vectors ([`ctxd_index::vectors::Vectors::file_vectors`]). Left out: merges' and
//! other summaries under [`MIN_SUMMARY_CHARS`] characters, commits that changed no indexed file or
//! over [`MAX_FILES`] of them. The fit and its judgement are [`ctxd_models::adapter::select`]
//! (the newest commits held out; kept only when it ranks their files better than the base).
//! The result — kept or not, with its figures — is stored with the history version it was fitted
//! on ([`ctxd_index::adapters`]), so a query of an older snapshot never uses it. Nothing is
//! re-embedded: the documents keep their vectors.
//!
//! A [`Pace`] bounds the work's share of the wall-clock time: after each step (reading the
//! vectors, one batch of messages through the model's bulk lane, the fit) it rests until the
//! steps so far took at most that share, and it stops between steps — storing nothing — when
//! its stop signal turns true. `ctxd adapt` runs unpaced.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::time::{Duration, Instant};

use ctxd_index::adapters::{store, StoredAdapter};
use ctxd_index::history::History;
use ctxd_index::store::Index;
use ctxd_models::adapter::{select, AdapterError, Example, QueryAdapter, Selection, CANDIDATES};
use ctxd_models::service::EmbedService;
use tokio::sync::watch;

use crate::error::PipelineError;

/// Shortest first message line a commit needs to teach anything.
pub const MIN_SUMMARY_CHARS: usize = 15;
/// Most indexed files a commit may change and still count (a wide refactor says little).
pub const MAX_FILES: usize = 20;
/// Summaries embedded per model call (one step of a paced fit).
const BATCH: usize = 64;

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
    /// Milliseconds of work (reading, embedding, fitting) and of wall-clock time, rests included.
    pub busy_ms: u64,
    pub wall_ms: u64,
    /// The seed of the shuffled control, when this was it (see [`adapt`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shuffled: Option<u64>,
}

/// How much of the wall-clock time a fit may use, and when it must stop (see the module docs).
pub struct Pace {
    share: f64,
    stop: Option<watch::Receiver<bool>>,
    started: Instant,
    busy: Duration,
}

impl Pace {
    /// No rests, no stop signal (`ctxd adapt`, the end of `ctxd index`).
    pub fn unpaced() -> Self {
        Self { share: 1.0, stop: None, started: Instant::now(), busy: Duration::ZERO }
    }

    /// At most `share` (clamped to 0.01–1) of the time, stopping when `stop` turns true.
    pub fn new(share: f64, stop: watch::Receiver<bool>) -> Self {
        Self { share: share.clamp(0.01, 1.0), stop: Some(stop), started: Instant::now(), busy: Duration::ZERO }
    }

    /// The rest that brings work `busy` done in `wall` down to `share` of the time.
    fn rest(busy: Duration, wall: Duration, share: f64) -> Duration {
        busy.div_f64(share).saturating_sub(wall)
    }

    /// Work done so far.
    pub fn busy(&self) -> Duration {
        self.busy
    }

    fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(|s| *s.borrow())
    }

    /// Runs one step, counts its time as work, then rests; `None` when told to stop (before the
    /// step or during the rest).
    async fn step<T, F: Future<Output = T>>(&mut self, work: F) -> Option<T> {
        if self.stopped() {
            return None;
        }
        let at = Instant::now();
        let out = work.await;
        self.busy += at.elapsed();
        let rest = Self::rest(self.busy, self.started.elapsed(), self.share);
        if !rest.is_zero() {
            match self.stop.as_mut() {
                Some(stop) => {
                    tokio::select! {
                        _ = tokio::time::sleep(rest) => {}
                        _ = stop.wait_for(|s| *s) => return None,
                    }
                }
                None => tokio::time::sleep(rest).await,
            }
        }
        (!self.stopped()).then_some(out)
    }
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

/// What the fit learns from: the file vectors (row-major) and each usable commit's summary with
/// the rows of the files it changed.
struct Material {
    history_commits: usize,
    newest: i64,
    files: usize,
    vectors: Vec<f32>,
    summaries: Vec<String>,
    changed: Vec<Vec<usize>>,
}

async fn material(index: &Index) -> Result<Material, PipelineError> {
    let h = index.history().file_history().await?;
    let vectors = index.vectors().file_vectors().await?;
    let mut paths: Vec<&String> = vectors.keys().collect();
    paths.sort();
    let ids: HashMap<&str, usize> = paths.iter().enumerate().map(|(i, p)| (p.as_str(), i)).collect();
    let all = commits(&h);
    let (mut summaries, mut changed) = (Vec::new(), Vec::new());
    for c in &all {
        let mut f: Vec<usize> = c.paths.iter().filter_map(|p| ids.get(p.as_str()).copied()).collect();
        f.sort_unstable();
        f.dedup();
        if teaches(c.summary) && !f.is_empty() && f.len() <= MAX_FILES {
            summaries.push(c.summary.to_string());
            changed.push(f);
        }
    }
    Ok(Material {
        history_commits: all.len(),
        newest: h.newest,
        files: paths.len(),
        vectors: paths.iter().flat_map(|p| vectors[*p].iter().copied()).collect(),
        summaries,
        changed,
    })
}

/// Fits, judges and stores `index`'s query adapter (see the module docs) at `pace`; `None`
/// when the pace's stop signal came first (nothing stored). With `shuffled`, the control: the
/// commits' changed files are shuffled among them (that seed) before the same fit and judgement,
/// and the fit is stored whatever its judgement — a measurement of what the history teaches
/// beyond which files change often, never a default.
pub async fn adapt(
    index: &Index,
    embed: &EmbedService,
    pace: &mut Pace,
    shuffled: Option<u64>,
) -> Result<Option<AdaptOutcome>, PipelineError> {
    let Some(m) = pace.step(material(index)).await else { return Ok(None) };
    let mut m = m?;
    // Read after the history: it holds nothing newer than this version, so a view of an older
    // history (which the stored row's version keeps it from) never gets commits after its own.
    let version = index.history().history_version().await?;
    if let Some(seed) = shuffled {
        shuffle(&mut m.changed, seed);
    }
    let mut queries = Vec::with_capacity(m.summaries.len());
    let mut embed_ms = 0;
    for batch in m.summaries.chunks(BATCH) {
        let timed = async {
            let at = Instant::now();
            (embed.embed_queries_bulk(batch.to_vec()).await, at.elapsed())
        };
        let Some((vectors, took)) = pace.step(timed).await else { return Ok(None) };
        queries.extend(vectors?);
        embed_ms += took.as_millis() as u64;
    }
    let examples: Vec<Example> =
        queries.into_iter().zip(m.changed).map(|(query, files)| Example { query, files }).collect();
    let (dim, vectors) = (index.dim(), m.vectors);
    let fit = tokio::task::spawn_blocking(move || fit(&examples, &vectors, dim, shuffled.is_some()));
    let Some(fitted) = pace.step(fit).await else { return Ok(None) };
    let db = || index.uri().to_string();
    let fitted = fitted.map_err(|e| PipelineError::AdaptPanicked { db: db(), message: e.to_string() })?;
    let (kept, selection) = fitted.map_err(|source| PipelineError::Adapt { db: db(), source })?;
    let mut outcome = AdaptOutcome {
        history_commits: m.history_commits,
        files: m.files,
        selection,
        history_version: version,
        embed_ms,
        busy_ms: 0,
        wall_ms: 0,
        shuffled,
    };
    if version > 0 {
        let row = StoredAdapter {
            model: index.model_id().to_string(),
            dim: dim as u32,
            history_version: version,
            newest: m.newest,
            weights: kept.map(|a| a.to_bytes()).unwrap_or_default(),
            report: report(&outcome.selection, shuffled),
        };
        store(index.uri(), &row).await?;
    }
    (outcome.busy_ms, outcome.wall_ms) = (pace.busy.as_millis() as u64, pace.started.elapsed().as_millis() as u64);
    Ok(Some(outcome))
}

/// The stored report: the judgement, and `"control": "shuffled"` on the control, so a daemon
/// replaces it with a real fit ([`is_control`]).
fn report(selection: &Selection, shuffled: Option<u64>) -> String {
    let mut json = serde_json::to_value(selection).unwrap_or_default();
    if let (Some(_), Some(o)) = (shuffled, json.as_object_mut()) {
        o.insert("control".into(), "shuffled".into());
    }
    json.to_string()
}

/// Whether `index`'s adapter is to be fitted again on its history at `version` (> 0): none is
/// stored, the shuffled control is (`ctxd adapt --shuffled`), or the history's newest commit is
/// not the one the stored fit saw. A new table version with the same newest commit (the
/// maintenance pass compacting the history table) is no reason. The one rule of the end of
/// `ctxd index` and of a daemon's background job.
pub async fn due(index: &Index, version: u64) -> Result<bool, PipelineError> {
    let stored = match index.history().stored_adapter().await? {
        Some(s) if !is_control(&s.report) => s,
        _ => return Ok(true),
    };
    if stored.history_version == version {
        return Ok(false);
    }
    Ok(index.history().file_history().await?.newest != stored.newest)
}

/// Whether a stored report is the shuffled control's (see [`adapt`]).
pub fn is_control(report: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(report).is_ok_and(|v| v.get("control").is_some())
}

/// [`select`]'s fit and judgement; with `forced` (the shuffled control) a fit refused by the
/// judgement is made anyway on every commit.
fn fit(
    examples: &[Example],
    vectors: &[f32],
    dim: usize,
    forced: bool,
) -> Result<(Option<QueryAdapter>, Selection), AdapterError> {
    let (kept, selection) = select(examples, vectors, dim)?;
    if kept.is_some() || !forced || selection.held_out == 0 {
        return Ok((kept, selection));
    }
    let all: Vec<&Example> = examples.iter().collect();
    Ok((Some(QueryAdapter::fit(&all, vectors, dim, CANDIDATES[0])?), selection))
}

/// Shuffles the examples' file sets among them (Fisher–Yates, a fixed generator from `seed`).
fn shuffle(changed: &mut [Vec<usize>], seed: u64) {
    let mut state = seed;
    for i in (1..changed.len()).rev() {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        changed.swap(i, ((state >> 33) % (i as u64 + 1)) as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_control_shuffles_file_sets_among_commits_the_same_way_for_a_seed() {
        let sets: Vec<Vec<usize>> = (0..50).map(|i| vec![i]).collect();
        let (mut a, mut b, mut c) = (sets.clone(), sets.clone(), sets.clone());
        shuffle(&mut a, 1);
        shuffle(&mut b, 1);
        shuffle(&mut c, 2);
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.iter().zip(&sets).filter(|(x, y)| x == y).count() < 10, "most commits get another's files");
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, sets, "a permutation: every file set once");
    }

    #[test]
    fn a_rest_brings_the_work_down_to_its_share() {
        let s = Duration::from_secs;
        // 1 s of work in 1 s at a quarter share: 3 s more.
        assert_eq!(Pace::rest(s(1), s(1), 0.25), s(3));
        // Already under the share (1 s of work in 10 s): no rest.
        assert_eq!(Pace::rest(s(1), s(10), 0.25), Duration::ZERO);
        assert_eq!(Pace::rest(s(2), s(2), 1.0), Duration::ZERO);
    }

    #[tokio::test]
    async fn paced_steps_keep_to_their_share_and_stop_when_told() {
        let (tx, rx) = watch::channel(false);
        let mut pace = Pace::new(0.5, rx);
        for _ in 0..3 {
            let step = pace.step(async { std::thread::sleep(Duration::from_millis(40)) }).await;
            assert!(step.is_some());
        }
        let (busy, wall) = (pace.busy, pace.started.elapsed());
        assert!(busy >= Duration::from_millis(120), "{busy:?}");
        assert!(busy.as_secs_f64() <= 0.5 * wall.as_secs_f64() + 0.01, "busy {busy:?} of {wall:?}");
        // Told to stop during a step: its result is dropped, and the next step does not run.
        assert!(pace.step(async { tx.send(true).unwrap() }).await.is_none());
        assert!(pace.step(async { unreachable!("a stopped pace runs no step") }).await.is_none());
        // A long rest (1 % share) ends at the stop signal.
        let (tx, rx) = watch::channel(false);
        let mut slow = Pace::new(0.01, rx);
        let stopper = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            tx.send(true).unwrap();
        });
        let at = Instant::now();
        assert!(slow.step(async { std::thread::sleep(Duration::from_millis(40)) }).await.is_none());
        assert!(at.elapsed() < Duration::from_secs(3), "the 4 s rest ended at the stop signal");
        stopper.await.unwrap();
    }

    #[test]
    fn the_control_is_marked_in_its_report() {
        let s = Selection { commits: 40, held_out: 10, base_mrr: 0.2, adapted_mrr: 0.1, fit: None, fit_ms: 1 };
        assert!(is_control(&report(&s, Some(1))));
        assert!(!is_control(&report(&s, None)));
        assert!(!is_control(""));
    }
}
