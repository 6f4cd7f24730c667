//! The answer cache: search answers kept per index version, so a repeated query (agents and
//! IDE plug-ins ask the same things again and again, a team's readers more so) costs a lookup
//! instead of an embedding, a hybrid search and a rescoring pass.
//!
//! A key is the [`Epoch`] a request is pinned to (table, model, version, overlays) plus the
//! request itself. When the index moves to a new version (a commit, a reader switching, an
//! overlay record) the answers of the old one become a **generation** of their own and the new
//! version starts empty: a fresh answer is never served for another version.
//!
//! Answers computed while queries waited for a slot (rescoring shrunk, see [`crate::pressure`])
//! are kept too, marked: under load a repeated question then costs nothing (keeping only
//! full-depth answers left the cache empty exactly when it mattered: `benches/load.py`), but
//! once nothing waits such an answer is computed again at full depth and replaced. (An answer
//! computed under load whose candidates' rescoring scores were all kept — the same question
//! asked at an earlier version, say — is a full one: [`crate::rerank`] then rescores the full
//! depth without a forward pass, so after a commit a repeated question costs one search.)
//!
//! **Stale answers while busy.** While the writer ingests, every commit starts a new version,
//! so without more a repeated question was computed again after each commit — under load
//! exactly the queries that made the queue (measured: repeated questions p99 49 ms idle, 1.03 s
//! while ingesting). So while queries wait for a slot (and only then), a question not yet
//! answered at the latest version is answered from the newest older generation of the same
//! table and model that stopped being the latest at most `stale_after` ago
//! ([`AnswerCache::with_stale_answers`]; `[server] stale_answer_ms`, 0: never) — only before
//! the request queues ([`AnswerCache::peek`]): a request that got a slot computes the latest
//! answer ([`AnswerCache::get`]), and so does any request while nothing waits. Such an answer
//! says so: `stale_ms` in the response is how long ago its version was superseded. Freshness
//! under load is then bounded like a reader's lag (`ctxd_index_reader_lag_seconds`): an answer
//! is never older than the newest commit by more than `stale_after`; an idle process answers
//! every question at the latest version. Model switches never serve across models.
//!
//! **Answers carried across commits** (on by default). An answer also keeps which files it
//! answers with (its results' paths). When the index moves on and the process's change log
//! ([`ctxd_index::changes`]) says which files the commits in between changed, every answer of
//! the old version none of whose files changed is **carried** to the new one: its results are
//! those files' chunks at the new version too. What a carried answer cannot know is whether a
//! changed file would now rank among them, so it says so — `carried_ms` in the response is how
//! long ago the version it was computed at was superseded — and its question is computed again
//! in the background (`ctxd_serve::admission`), replacing it with the latest answer; a request
//! holding a slot ([`AnswerCache::get`]) computes it too. An answer with fewer than `k` results
//! is not carried (a changed file that matches joins it for sure). Where the log cannot tell (a
//! reader process, a write this process did not log such as a vector-index build, ref overlays
//! moving) nothing is carried: the new version starts empty as before
//! (`ctxd_query_answer_cache_uncarried_total` counts those versions). While an agent edits a
//! few files, the questions about other files stay a lookup (measured: `benches/load.py`,
//! BENCHMARKS.md#while-the-writer-edits-answers-carried-across-commits).
//!
//! **One computation per question.** Several requests asking the same question at the same
//! epoch while its answer is being computed (common right after a commit, when every client's
//! next repeated question misses) do not each queue for a slot: the first one computes
//! ([`AnswerCache::lead`] gives it a [`Lead`]), the others wait for it without a slot and take
//! its answer from the cache (or compute it themselves if it failed). Exact, no staleness.
//! `ctxd_query_answer_cache_joined_total`.
//!
//! Bounded: at most [`ANSWER_CACHE_ENTRIES`] answers in all generations together (the oldest
//! generation's oldest answers dropped first; in the current generation an answer is spared
//! once for each time it was served since it was kept or last spared, up to [`MAX_SPARES`] —
//! a counting CLOCK — so a run of one-off questions, even one longer than the cache, does not
//! push out the ones asked again and again), at most [`MAX_GENERATIONS`] older generations,
//! each dropped once it is past `stale_after`. Counted: `ctxd_query_answer_cache_hits_total`,
//! `_stale_hits_total`, `_joined_total`, `_misses_total`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::metrics as m;
use crate::search::SearchResponse;

/// Answers kept at most (all generations together).
pub const ANSWER_CACHE_ENTRIES: usize = 2048;
/// Times an answer served again and again is passed over by eviction before it goes (each
/// serve earns one, up to this): it outlives this many cache-fulls of one-off questions asked
/// in between (with one, as in a plain CLOCK, a run of one-off questions longer than the cache
/// pushed out every hot one: the load bench's distinct run between its two repeated runs).
pub const MAX_SPARES: u8 = 3;
/// Largest `k` whose answers are kept (bounds an entry's size).
pub const ANSWER_CACHE_MAX_K: usize = 50;
/// Older generations kept at most (each also only while it is within `stale_after`).
pub const MAX_GENERATIONS: usize = 16;

/// What a request is pinned to: the chunks table and model (answers are never served across
/// them), and the table's version and the overlays' version (answers of another are stale).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Epoch {
    /// The database URI (the change log is per database and table).
    pub database: String,
    pub table: String,
    pub model: String,
    pub version: u64,
    pub overlays: u64,
}

impl Epoch {
    fn same_lineage(&self, other: &Epoch) -> bool {
        self.database == other.database && self.table == other.table && self.model == other.model
    }

    /// True when `self` is later than `other` of the same lineage.
    fn after(&self, other: &Epoch) -> bool {
        (self.version, self.overlays) > (other.version, other.overlays)
    }
}

/// A kept answer: the response, whether it was computed with the full rescoring depth,
/// how many times eviction passes it over (see [`Generation::evict_one`]), the
/// files it answers with, and, once carried to a later version, when the version it was
/// computed at was superseded.
#[derive(Clone)]
struct Kept {
    answer: Arc<SearchResponse>,
    full: bool,
    spares: u8,
    /// [`ctxd_index::changes::path_key`]s of the files it answers with, sorted (`None`: not
    /// known, never carried).
    read: Option<Arc<[u64]>>,
    carried: Option<Instant>,
}

/// The files an answer answers with, as [`AnswerCache::put`] takes them: its results' paths
/// (`None` there: not known — the answer is never carried across commits).
pub fn read_keys<'a>(paths: impl IntoIterator<Item = &'a str>) -> Arc<[u64]> {
    let mut keys: Vec<u64> = paths.into_iter().map(ctxd_index::changes::path_key).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.into()
}

/// The answers of one epoch.
#[derive(Default)]
struct Generation {
    epoch: Epoch,
    answers: HashMap<String, Kept>,
    /// Keys, oldest first.
    order: VecDeque<String>,
    /// When a later epoch was first seen (older generations only).
    superseded: Option<Instant>,
}

impl Generation {
    /// Drops one answer, the oldest first — except that, in the current generation, an answer
    /// with spares left (one per serve, at most [`MAX_SPARES`]) is passed over, moved to the back
    /// with one spare fewer (a counting CLOCK), so a stream of one-off questions does not push
    /// out the ones asked again and again. False when empty.
    fn evict_one(&mut self, spare_served: bool) -> bool {
        // Every pass over the order takes a spare from each answer it passes over, so one of
        // at most MAX_SPARES + 1 passes evicts.
        for _ in 0..=(MAX_SPARES as usize + 1) * self.order.len() {
            let Some(key) = self.order.pop_front() else { return false };
            match self.answers.get_mut(&key) {
                Some(kept) if spare_served && kept.spares > 0 => {
                    kept.spares -= 1;
                    self.order.push_back(key);
                }
                Some(_) => {
                    self.answers.remove(&key);
                    return true;
                }
                None => {}
            }
        }
        false
    }
}

/// Carries the answers of `old` that read no file changed since into `new` (a later version of
/// the same lineage; see the module docs). Nothing when the overlays moved or the change log
/// cannot tell.
fn carry(old: &Generation, new: &mut Generation) {
    let (from, to) = (&old.epoch, &new.epoch);
    if old.answers.is_empty() || from.overlays != to.overlays {
        return;
    }
    let Some(changed) = ctxd_index::changes::changed_between(&to.database, &to.table, from.version, to.version) else {
        metrics::counter!(m::ANSWER_CACHE_UNCARRIED_TOTAL).increment(1);
        tracing::debug!(
            from = from.version,
            to = to.version,
            "the change log cannot tell what changed: no answer carried"
        );
        return;
    };
    let now = Instant::now();
    for key in &old.order {
        let Some(kept) = old.answers.get(key) else { continue };
        let Some(read) = &kept.read else { continue };
        if read.iter().any(|k| changed.contains(k)) {
            continue;
        }
        let carried = Kept { carried: kept.carried.or(Some(now)), ..kept.clone() };
        new.answers.insert(key.clone(), carried);
        new.order.push_back(key.clone());
    }
    metrics::counter!(m::ANSWER_CACHE_CARRIED_TOTAL).increment(new.answers.len() as u64);
}

#[derive(Default)]
struct Entries {
    current: Generation,
    /// Superseded generations of the current lineage, newest first.
    older: VecDeque<Generation>,
}

impl Entries {
    /// Makes `epoch` the current one if it is later (or of another lineage): the current
    /// generation becomes the newest older one. False when `epoch` is older than the current.
    fn advance(&mut self, epoch: &Epoch, stale_after: Duration) -> bool {
        if self.current.epoch == *epoch {
            return true;
        }
        let lineage = self.current.epoch.same_lineage(epoch);
        if lineage && !epoch.after(&self.current.epoch) {
            return false;
        }
        let mut new = Generation { epoch: epoch.clone(), ..Default::default() };
        if lineage {
            carry(&self.current, &mut new);
        }
        let mut old = std::mem::replace(&mut self.current, new);
        if !lineage || stale_after.is_zero() {
            self.older.clear();
        } else if !old.answers.is_empty() {
            old.superseded = Some(Instant::now());
            self.older.push_front(old);
        }
        self.expire(stale_after);
        true
    }

    /// Drops older generations past `stale_after`, and beyond [`MAX_GENERATIONS`].
    fn expire(&mut self, stale_after: Duration) {
        self.older.truncate(MAX_GENERATIONS);
        while self.older.back().is_some_and(|g| g.superseded.is_none_or(|t| t.elapsed() > stale_after)) {
            self.older.pop_back();
        }
    }

    fn len(&self) -> usize {
        self.current.answers.len() + self.older.iter().map(|g| g.answers.len()).sum::<usize>()
    }

    /// Drops answers beyond [`ANSWER_CACHE_ENTRIES`]: the oldest generation's first.
    fn bound(&mut self) {
        while self.len() > ANSWER_CACHE_ENTRIES {
            let evicted = match self.older.back_mut() {
                Some(oldest) => oldest.evict_one(false),
                None => self.current.evict_one(true),
            };
            if self.older.back().is_some_and(|g| g.answers.is_empty()) {
                self.older.pop_back();
            } else if !evicted {
                break;
            }
        }
    }
}

/// Which answers besides those computed at the asked epoch a lookup may serve.
#[derive(Clone, Copy)]
struct Serve {
    /// A superseded version's, within `stale_after`.
    stale: bool,
    /// A carried one.
    carried: bool,
}

/// Questions being computed now: epoch and request → a receiver closed when the computation
/// ends (its [`Lead`] dropped). An entry is only added where none is and only removed by its
/// own lead, so a lead always removes its own.
type InFlight = Arc<Mutex<HashMap<String, tokio::sync::watch::Receiver<()>>>>;

/// Search answers of the current index version, and of the last few while busy (clones share
/// them).
#[derive(Clone, Default)]
pub struct AnswerCache {
    entries: Arc<Mutex<Entries>>,
    in_flight: InFlight,
    /// How long after its version was superseded an answer may still be served while busy.
    stale_after: Duration,
}

impl AnswerCache {
    /// An empty cache serving answers of a superseded version up to `stale_after` after it was
    /// superseded, while queries wait for a slot (zero: never; see the module docs).
    pub fn with_stale_answers(stale_after: Duration) -> Self {
        Self { stale_after, ..Default::default() }
    }

    /// The answer kept for `request` at `epoch`, counting a hit (not a miss: a caller that then
    /// computes the answer counts it through [`AnswerCache::get`]). While `loaded` (queries wait
    /// for a slot) an answer computed with shrunk rescoring counts, and so does one of an older
    /// epoch within `stale_after` (its `stale_ms` set).
    pub fn peek(&self, epoch: &Epoch, request: &str, loaded: bool) -> Option<SearchResponse> {
        self.find(epoch, request, loaded, Serve { stale: loaded, carried: true })
    }

    /// The answer kept for `request` at `epoch` itself (never a stale or carried one: a request
    /// that got a slot computes the latest answer), counting a hit or a miss.
    pub fn get(&self, epoch: &Epoch, request: &str, loaded: bool) -> Option<SearchResponse> {
        let hit = self.find(epoch, request, loaded, Serve { stale: false, carried: false });
        if hit.is_none() {
            metrics::counter!(m::ANSWER_CACHE_MISSES_TOTAL).increment(1);
        }
        hit
    }

    fn find(&self, epoch: &Epoch, request: &str, loaded: bool, serve: Serve) -> Option<SearchResponse> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if !entries.advance(epoch, self.stale_after) {
            return None;
        }
        let usable = |k: &&mut Kept| (k.full || loaded) && (serve.carried || k.carried.is_none());
        if let Some(kept) = entries.current.answers.get_mut(request).filter(usable) {
            kept.spares = (kept.spares + 1).min(MAX_SPARES);
            let mut answer = (*kept.answer).clone();
            match kept.carried {
                Some(since) => {
                    metrics::counter!(m::ANSWER_CACHE_CARRIED_HITS_TOTAL).increment(1);
                    answer.carried_ms = Some(since.elapsed().as_millis() as u64);
                }
                None => metrics::counter!(m::ANSWER_CACHE_HITS_TOTAL).increment(1),
            }
            return Some(answer);
        }
        if !serve.stale || entries.older.is_empty() {
            return None;
        }
        entries.expire(self.stale_after);
        let (kept, since) = entries.older.iter().find_map(|g| Some((g.answers.get(request)?, g.superseded?)))?;
        metrics::counter!(m::ANSWER_CACHE_STALE_HITS_TOTAL).increment(1);
        let mut answer = (*kept.answer).clone();
        answer.stale_ms = Some(since.elapsed().as_millis() as u64);
        Some(answer)
    }

    /// Keeps `answer` for `request` at `epoch` (`full`: computed with the full rescoring
    /// depth; `read`: the files it answers with, [`read_keys`], `None` if not known). A later
    /// epoch starts a new generation first; an answer of an earlier epoch than the cache's is
    /// dropped.
    pub fn put(
        &self,
        epoch: &Epoch,
        request: String,
        answer: Arc<SearchResponse>,
        full: bool,
        read: Option<Arc<[u64]>>,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if !entries.advance(epoch, self.stale_after) {
            return;
        }
        let current = &mut entries.current;
        if current.answers.insert(request.clone(), Kept { answer, full, spares: 0, read, carried: None }).is_none() {
            current.order.push_back(request);
        }
        entries.bound();
        metrics::gauge!(m::ANSWER_CACHE_ANSWERS).set(entries.len() as f64);
    }

    /// Who computes `request` at `epoch`: `Some(lead)` when nobody else is (the caller computes
    /// it, keeps it with [`AnswerCache::put`], then drops the lead); `None` once another request
    /// that was computing it finished (look in the cache again: if that failed, or its answer
    /// is not usable now, ask again).
    pub async fn lead(&self, epoch: &Epoch, request: &str) -> Option<Lead> {
        let mut waiting = match self.try_lead(epoch, request) {
            Ok(lead) => return Some(lead),
            Err(waiting) => waiting,
        };
        metrics::counter!(m::ANSWER_CACHE_JOINED_TOTAL).increment(1);
        // Nothing is ever sent: `changed` returns when the lead's sender is dropped.
        let _ = waiting.changed().await;
        None
    }

    /// [`AnswerCache::lead`] without waiting: the lead, or (`Err`) what closes when the request
    /// computing it now finishes.
    pub fn try_lead(&self, epoch: &Epoch, request: &str) -> Result<Lead, tokio::sync::watch::Receiver<()>> {
        let key = format!("{epoch:?}\n{request}");
        let mut flights = self.in_flight.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(rx) = flights.get(&key) {
            return Err(rx.clone());
        }
        let (tx, rx) = tokio::sync::watch::channel(());
        flights.insert(key.clone(), rx);
        Ok(Lead { flights: self.in_flight.clone(), key, _done: tx })
    }

    /// True when an answer of `request` computed at `epoch` itself is kept (not a carried one;
    /// counts nothing).
    pub fn holds(&self, epoch: &Epoch, request: &str) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.current.epoch == *epoch && entries.current.answers.get(request).is_some_and(|k| k.carried.is_none())
    }

    /// Answers kept now (all generations).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// The right to compute one question (see [`AnswerCache::lead`]); dropping it lets the
/// requests waiting for the answer look in the cache.
pub struct Lead {
    flights: InFlight,
    key: String,
    _done: tokio::sync::watch::Sender<()>,
}

impl Drop for Lead {
    fn drop(&mut self) {
        self.flights.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(version: u64) -> Epoch {
        Epoch { database: "mem://answers".into(), table: "chunks".into(), model: "m".into(), version, overlays: 0 }
    }

    #[test]
    fn answers_are_kept_per_version_and_bounded() {
        let cache = AnswerCache::default();
        let answer = Arc::new(SearchResponse { version: Some(7), ..Default::default() });
        assert!(cache.get(&at(1), "q", false).is_none());
        cache.put(&at(1), "q".into(), answer.clone(), true, None);
        assert_eq!(cache.get(&at(1), "q", false).unwrap().version, Some(7));
        assert!(cache.get(&at(2), "q", true).is_none(), "another version: no answer (no stale answers by default)");
        cache.put(&at(2), "other".into(), answer.clone(), true, None);
        assert_eq!(cache.len(), 1, "a new version empties the cache");
        cache.put(&at(1), "late".into(), answer.clone(), true, None);
        assert!(cache.get(&at(2), "other", false).is_some(), "a late answer of an older version is dropped");
        assert_eq!(cache.len(), 1);
        // Computed under load: served while queries wait, computed again once idle.
        cache.put(&at(2), "shed".into(), answer.clone(), false, None);
        assert!(cache.peek(&at(2), "shed", true).is_some());
        assert!(cache.peek(&at(2), "shed", false).is_none());
        for i in 0..ANSWER_CACHE_ENTRIES + 10 {
            cache.put(&at(2), format!("q{i}"), answer.clone(), true, None);
        }
        assert_eq!(cache.len(), ANSWER_CACHE_ENTRIES);
        assert!(cache.get(&at(2), "q0", false).is_none(), "the oldest went first");
        assert!(cache.get(&at(2), &format!("q{}", ANSWER_CACHE_ENTRIES + 9), false).is_some());
    }

    #[test]
    fn superseded_answers_are_served_only_while_busy_and_only_for_a_while() {
        let cache = AnswerCache::with_stale_answers(Duration::from_millis(300));
        let answer = Arc::new(SearchResponse::default());
        cache.put(&at(1), "q".into(), answer.clone(), true, None);
        cache.put(&at(1), "r".into(), answer.clone(), true, None);
        // Version 2 is committed: idle, the question is computed again.
        assert!(cache.get(&at(2), "q", false).is_none());
        // Busy: version 1's answer, saying it is stale.
        let stale = cache.peek(&at(2), "q", true).expect("a stale answer while busy");
        assert!(stale.stale_ms.is_some_and(|ms| ms < 300), "{:?}", stale.stale_ms);
        // An answer of the latest version wins over the stale one, and is not marked.
        cache.put(&at(2), "q".into(), answer.clone(), true, None);
        assert_eq!(cache.get(&at(2), "q", true).unwrap().stale_ms, None);
        // Version 3: "r" still comes from version 1 (the newest generation that has it).
        assert!(cache.peek(&at(3), "r", true).is_some());
        // Another model's table: never across models.
        let other = Epoch { model: "m2".into(), ..at(4) };
        assert!(cache.peek(&other, "q", true).is_none());
        assert!(cache.peek(&at(5), "q", true).is_none(), "the other lineage replaced the old answers");
        // Past stale_after: gone.
        cache.put(&at(5), "q".into(), answer.clone(), true, None);
        assert!(cache.peek(&at(6), "q", true).is_some());
        assert!(cache.get(&at(6), "q", true).is_none(), "a request with a slot computes the latest answer");
        std::thread::sleep(Duration::from_millis(350));
        assert!(cache.peek(&at(6), "q", true).is_none(), "superseded more than stale_after ago");
        assert_eq!(cache.len(), 0);
    }

    #[tokio::test]
    async fn one_request_computes_a_question_the_others_wait_for_it() {
        let cache = AnswerCache::default();
        let lead = cache.lead(&at(1), "q").await.expect("nobody computes q yet");
        assert!(cache.lead(&at(1), "other").await.is_some(), "another question has its own lead");
        assert!(cache.lead(&at(2), "q").await.is_some(), "so has the same question at another version");
        let waiter = {
            let cache = cache.clone();
            tokio::spawn(async move { cache.lead(&at(1), "q").await.is_none() })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the second asker waits for the first");
        cache.put(&at(1), "q".into(), Arc::new(SearchResponse::default()), true, None);
        drop(lead);
        assert!(waiter.await.unwrap(), "it was told to look in the cache");
        assert!(cache.get(&at(1), "q", false).is_some());
        // A lead dropped without an answer (the search failed): the next asker leads.
        drop(cache.lead(&at(1), "r").await);
        assert!(cache.lead(&at(1), "r").await.is_some());
    }

    #[test]
    fn answers_whose_files_did_not_change_are_carried_and_say_so() {
        let db = "mem://answers-carry";
        let at =
            |version| Epoch { database: db.into(), table: "chunks".into(), model: "m".into(), version, overlays: 0 };
        let cache = AnswerCache::default();
        let answer = Arc::new(SearchResponse::default());
        cache.put(&at(1), "about a".into(), answer.clone(), true, Some(read_keys(["a.py", "b.py"])));
        cache.put(&at(1), "about c".into(), answer.clone(), true, Some(read_keys(["c.py", "a.py"])));
        cache.put(&at(1), "unknown".into(), answer.clone(), true, None);
        ctxd_index::changes::record(db, "chunks", 1, 2, ["c.py", "new.py"]);
        let carried = cache.peek(&at(2), "about a", false).expect("a.py and b.py did not change");
        assert!(carried.carried_ms.is_some(), "a carried answer says so");
        assert!(cache.peek(&at(2), "about c", false).is_none(), "c.py changed");
        assert!(cache.peek(&at(2), "unknown", false).is_none(), "what it read is not known");
        assert!(cache.get(&at(2), "about a", false).is_none(), "a request with a slot computes the latest answer");
        assert!(!cache.holds(&at(2), "about a"), "so its question is computed again in the background");
        // Carried on across a compaction, its age kept.
        ctxd_index::changes::record(db, "chunks", 2, 3, std::iter::empty());
        std::thread::sleep(Duration::from_millis(5));
        let again = cache.peek(&at(3), "about a", false).expect("a compaction changes no file");
        assert!(again.carried_ms > carried.carried_ms, "{:?} {:?}", again.carried_ms, carried.carried_ms);
        // The latest answer replaces it.
        cache.put(&at(3), "about a".into(), answer.clone(), true, Some(read_keys(["a.py"])));
        assert_eq!(cache.get(&at(3), "about a", false).unwrap().carried_ms, None);
        assert!(cache.holds(&at(3), "about a"));
        // A write nobody logged (3 → 5): nothing is carried.
        assert!(cache.peek(&at(5), "about a", false).is_none());
        // Ref overlays moved: neither.
        cache.put(&at(5), "about a".into(), answer.clone(), true, Some(read_keys(["a.py"])));
        ctxd_index::changes::record(db, "chunks", 5, 6, ["z.py"]);
        assert!(cache.peek(&Epoch { overlays: 1, ..at(6) }, "about a", false).is_none());
    }

    #[test]
    fn questions_asked_again_outlive_one_off_questions() {
        let cache = AnswerCache::default();
        let answer = Arc::new(SearchResponse::default());
        for i in 0..ANSWER_CACHE_ENTRIES {
            cache.put(&at(1), format!("q{i}"), answer.clone(), true, None);
        }
        assert!(cache.get(&at(1), "q0", false).is_some());
        // A stream of one-off questions: the one asked again stays, the others go in order.
        for i in 0..ANSWER_CACHE_ENTRIES - 1 {
            cache.put(&at(1), format!("once{i}"), answer.clone(), true, None);
        }
        assert!(cache.get(&at(1), "q0", false).is_some(), "served since kept: spared");
        assert!(cache.get(&at(1), "q1", false).is_none());
        assert_eq!(cache.len(), ANSWER_CACHE_ENTRIES);
        // Served again and again (q0 three times more now): it outlives two cache-fulls of one-off
        // questions (MAX_SPARES 3; a plain CLOCK: less than one); asked twice, one at most.
        for _ in 0..3 {
            assert!(cache.get(&at(1), "q0", false).is_some());
        }
        assert!(cache.get(&at(1), "once0", false).is_some());
        for i in 0..2 * ANSWER_CACHE_ENTRIES {
            cache.put(&at(1), format!("later{i}"), answer.clone(), true, None);
        }
        assert!(cache.get(&at(1), "q0", false).is_some(), "asked again and again: still kept");
        assert!(cache.get(&at(1), "once0", false).is_none(), "asked twice: gone after one cache-full");
        assert_eq!(cache.len(), ANSWER_CACHE_ENTRIES);
        // Every answer kept served as often as counted: the bound still holds, and what goes is
        // the newest answer, not served yet (as in a plain CLOCK when every bit is set).
        let keys: Vec<String> = (0..2 * ANSWER_CACHE_ENTRIES).map(|i| format!("later{i}")).collect();
        for key in &keys {
            for _ in 0..MAX_SPARES {
                cache.get(&at(1), key, false);
            }
        }
        cache.put(&at(1), "one more".into(), answer.clone(), true, None);
        assert_eq!(cache.len(), ANSWER_CACHE_ENTRIES, "one answer went, though every other one had spares");
        assert!(cache.get(&at(1), "one more", false).is_none());
        assert!(cache.get(&at(1), &keys[keys.len() - 1], false).is_some());
    }

    #[test]
    fn every_generation_together_stays_within_the_bound() {
        let cache = AnswerCache::with_stale_answers(Duration::from_secs(60));
        let answer = Arc::new(SearchResponse::default());
        for v in 1..=3 {
            for i in 0..ANSWER_CACHE_ENTRIES {
                cache.put(&at(v), format!("v{v}-{i}"), answer.clone(), true, None);
            }
            assert_eq!(cache.len(), ANSWER_CACHE_ENTRIES);
        }
        assert!(cache.get(&at(3), "v3-0", true).is_some(), "the current generation is kept whole");
        assert!(cache.peek(&at(3), "v2-0", true).is_none(), "older generations gave way");
        for v in 4..(5 + MAX_GENERATIONS as u64) {
            cache.put(&at(v), format!("only-{v}"), answer.clone(), true, None);
        }
        assert!(cache.peek(&at(100), "only-4", true).is_none(), "at most MAX_GENERATIONS older generations");
        assert!(cache.peek(&at(100), &format!("only-{}", 4 + MAX_GENERATIONS as u64), true).is_some());
    }
}
