//! The backend of the process-wide LanceDB **index cache**: LanceDB's own weighted cache
//! (quick_cache, byte budget [`crate::connection::CacheLimits::index_bytes`]) plus one rule it
//! lacks — an entry nobody has read for [`IDLE`] while at least [`NEWER`] other entries came in
//! is dropped.
//!
//! Why: every full-text segment an index version uses is cached as a handful of entries, and
//! some of them hold the segment's `part_N_invert.lance` open. A writer under edits folds new
//! rows into new segments and merges old ones every few seconds, so the segments of older
//! versions are never read again, yet a byte budget evicts them only once it is full — tens of
//! thousands of small entries later. In the 30-minute soak (`benches/soak.py`) the writer's open
//! files rose 202 → 354 that way, every one a superseded segment. Entries still in use are read
//! by every query and stay; superseded ones go a few minutes after their last read.
//!
//! Why both conditions: wall time alone would empty the cache of an idle daemon, and the first
//! question after a coffee break would reload every index. An idle daemon inserts nothing, so
//! [`NEWER`] is never reached and nothing expires; the first question after the break inserts a
//! few entries at most (the segments committed meanwhile), far fewer than [`NEWER`], so it does
//! not sweep away what it is about to read either. Only a cache that keeps taking new entries —
//! a writer folding segments, queries over many versions — sheds its idle ones.
//!
//! The price: on a busy daemon (new entries coming in) an entry read less often than every
//! [`IDLE`] — a posting list of a rare term in a large index — is loaded again at its next read
//! even when the byte budget had room for it (from the page cache, usually: milliseconds).
//!
//! The sweep walks the cache at most every [`SWEEP_EVERY`], on an insert. Codec memory
//! priorities (entries LanceDB's own backend can pin) are ignored: no index type of the pinned
//! LanceDB version sets one.
//!
//! Measured (`benches/soak.py --minutes 10`, release): the writer's open files 112 at most in
//! the first five minutes and 81 in the next (47–55 at the end), where the build before held
//! 202 and 250; its index cache 8–13 MB instead of the full 64 MB; 0 errors, p99 unchanged.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::Future;
use lance::cache::{CacheBackend, CacheCodec, CacheEntry, InternalCacheKey};

/// How long an entry must have gone unread before it can expire.
pub const IDLE: Duration = Duration::from_secs(120);
/// How many entries must have been inserted since an entry's last read before it can expire.
pub const NEWER: u64 = 1024;
/// The least time between two sweeps of the cache.
pub const SWEEP_EVERY: Duration = Duration::from_secs(10);

/// When an entry was last read: seconds since the cache was made, and the insert count then.
#[derive(Debug, Default)]
struct LastRead {
    secs: AtomicU64,
    inserts: AtomicU64,
}

#[derive(Clone)]
struct Held {
    entry: CacheEntry,
    size_bytes: usize,
    read: Arc<LastRead>,
}

#[derive(Clone)]
struct Weigh;

impl quick_cache::Weighter<InternalCacheKey, Held> for Weigh {
    fn weight(&self, _key: &InternalCacheKey, held: &Held) -> u64 {
        (std::mem::size_of::<InternalCacheKey>() + held.size_bytes).max(1) as u64
    }
}

/// The index cache's backend: a byte budget, and idle entries dropped while new ones come in.
pub struct ExpiringCache {
    cache: quick_cache::sync::Cache<InternalCacheKey, Held, Weigh>,
    capacity: usize,
    started: Instant,
    inserts: AtomicU64,
    last_sweep_secs: AtomicU64,
    idle: Duration,
    newer: u64,
}

impl std::fmt::Debug for ExpiringCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExpiringCache").field("entries", &self.cache.len()).field("capacity", &self.capacity).finish()
    }
}

impl ExpiringCache {
    /// A cache of `capacity` bytes with the default expiry ([`IDLE`], [`NEWER`]).
    pub fn new(capacity: usize) -> Self {
        Self::with_expiry(capacity, IDLE, NEWER)
    }

    /// A cache of `capacity` bytes whose entries expire once unread for `idle` while `newer`
    /// entries were inserted.
    pub fn with_expiry(capacity: usize, idle: Duration, newer: u64) -> Self {
        // One shard (as LanceDB's index cache): a few large, unequal entries share one budget.
        let items = (capacity / (64 << 10)).clamp(32, 1_000_000);
        let options = quick_cache::OptionsBuilder::new()
            .estimated_items_capacity(items)
            .weight_capacity(capacity as u64)
            .shards(1)
            .build()
            .expect("quick_cache options: items and weight capacity are both set");
        Self {
            cache: quick_cache::sync::Cache::with_options(options, Weigh, Default::default(), Default::default()),
            capacity,
            started: Instant::now(),
            inserts: AtomicU64::new(0),
            last_sweep_secs: AtomicU64::new(0),
            idle,
            newer,
        }
    }

    fn now_secs(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    /// Marks `held` read now and hands out its entry.
    fn read(&self, held: Held) -> CacheEntry {
        held.read.secs.store(self.now_secs(), Ordering::Relaxed);
        held.read.inserts.store(self.inserts.load(Ordering::Relaxed), Ordering::Relaxed);
        held.entry
    }

    /// Counts an insert and makes its record, read as of now.
    fn admit(&self, entry: CacheEntry, size_bytes: usize) -> Held {
        let inserts = self.inserts.fetch_add(1, Ordering::Relaxed) + 1;
        let read = LastRead { secs: AtomicU64::new(self.now_secs()), inserts: AtomicU64::new(inserts) };
        Held { entry, size_bytes, read: Arc::new(read) }
    }

    /// At most every [`SWEEP_EVERY`], after an insert: drops the expired entries.
    fn maybe_sweep(&self) {
        let (now, last) = (self.now_secs(), self.last_sweep_secs.load(Ordering::Relaxed));
        if now.saturating_sub(last) >= SWEEP_EVERY.as_secs()
            && self.last_sweep_secs.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
        {
            self.sweep();
        }
    }

    /// Drops every entry unread for `idle` while `newer` entries came in; returns how many.
    pub fn sweep(&self) -> usize {
        let (now, inserts) = (self.now_secs(), self.inserts.load(Ordering::Relaxed));
        let expired: Vec<InternalCacheKey> = self
            .cache
            .iter()
            .filter(|(_, held)| {
                now.saturating_sub(held.read.secs.load(Ordering::Relaxed)) >= self.idle.as_secs()
                    && inserts.saturating_sub(held.read.inserts.load(Ordering::Relaxed)) >= self.newer
            })
            .map(|(key, _)| key)
            .collect();
        for key in &expired {
            self.cache.remove(key);
        }
        if !expired.is_empty() {
            metrics::counter!(crate::metrics::INDEX_CACHE_EXPIRED_TOTAL).increment(expired.len() as u64);
        }
        expired.len()
    }
}

#[async_trait::async_trait]
impl CacheBackend for ExpiringCache {
    async fn get_resident(&self, key: &InternalCacheKey) -> Option<CacheEntry> {
        self.cache.get(key).map(|held| self.read(held))
    }

    async fn peek_resident(&self, key: &InternalCacheKey) -> bool {
        self.cache.contains_key(key)
    }

    async fn get(&self, key: &InternalCacheKey, _codec: Option<CacheCodec>) -> Option<CacheEntry> {
        self.cache.get(key).map(|held| self.read(held))
    }

    async fn insert(&self, key: &InternalCacheKey, entry: CacheEntry, size_bytes: usize, _codec: Option<CacheCodec>) {
        self.cache.insert(*key, self.admit(entry, size_bytes));
        self.maybe_sweep();
    }

    async fn get_or_insert<'a>(
        &self,
        key: &InternalCacheKey,
        loader: Pin<Box<dyn Future<Output = lance::Result<(CacheEntry, usize)>> + Send + 'a>>,
        _codec: Option<CacheCodec>,
    ) -> lance::Result<(CacheEntry, bool)> {
        // Concurrent misses of one key share one load (the guard); a failed load lets the next try.
        match self.cache.get_value_or_guard_async(key).await {
            Ok(held) => Ok((self.read(held), true)),
            Err(guard) => {
                let (entry, size_bytes) = loader.await?;
                // A guard outlived by a clear() refuses the entry: it is simply not cached.
                let _ = guard.insert(self.admit(entry.clone(), size_bytes));
                self.maybe_sweep();
                Ok((entry, false))
            }
        }
    }

    async fn clear(&self) {
        self.cache.clear();
    }

    async fn num_entries(&self) -> usize {
        self.cache.len()
    }

    async fn size_bytes(&self) -> usize {
        self.cache.weight() as usize
    }

    fn approx_num_entries(&self) -> usize {
        self.cache.len()
    }

    fn approx_size_bytes(&self) -> usize {
        self.cache.weight() as usize
    }

    fn capacity_bytes(&self) -> Option<usize> {
        Some(self.capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u8) -> InternalCacheKey {
        InternalCacheKey::from_bytes([n; 16])
    }

    async fn load(cache: &ExpiringCache, n: u8) -> bool {
        let entry: CacheEntry = Arc::new(u64::from(n));
        let (got, cached) = cache.get_or_insert(&key(n), Box::pin(async move { Ok((entry, 8)) }), None).await.unwrap();
        assert_eq!(got.downcast_ref::<u64>(), Some(&u64::from(n)), "the entry of key {n}");
        cached
    }

    #[tokio::test]
    async fn an_idle_entry_expires_only_once_newer_entries_came_in() {
        // idle 0 s: only the insert count decides here.
        let cache = ExpiringCache::with_expiry(1 << 20, Duration::ZERO, 3);
        assert!(!load(&cache, 0).await, "first load misses");
        assert!(load(&cache, 0).await, "second is a hit");
        load(&cache, 1).await;
        load(&cache, 2).await;
        assert_eq!(cache.sweep(), 0, "two inserts since key 0 was read: kept");
        load(&cache, 3).await;
        // Key 0 was last read at insert 1; keys 1–3 came in since (inserts 2–4).
        assert_eq!(cache.sweep(), 1, "key 0 expired, the three newer ones kept");
        assert!(!cache.peek_resident(&key(0)).await);
        assert!(cache.peek_resident(&key(3)).await);
        assert!(!load(&cache, 0).await, "an expired entry is loaded again");
    }

    #[tokio::test]
    async fn reading_an_entry_keeps_it_and_an_idle_cache_keeps_everything() {
        let cache = ExpiringCache::with_expiry(1 << 20, Duration::ZERO, 2);
        for n in 0..4 {
            load(&cache, n).await;
            assert!(load(&cache, 0).await, "key 0 is read after every insert");
        }
        // Key 1 came in as insert 2 and was never read again; keys 2 and 3 are too recent.
        assert_eq!(cache.sweep(), 1, "key 1 expired");
        assert!(cache.peek_resident(&key(0)).await, "key 0, read after every insert, stays");
    }

    #[tokio::test]
    async fn wall_time_is_needed_too() {
        let cache = ExpiringCache::with_expiry(1 << 20, Duration::from_secs(3600), 1);
        for n in 0..8 {
            load(&cache, n).await;
        }
        assert_eq!(cache.sweep(), 0, "many inserts, but nothing unread for an hour");
        assert_eq!(cache.num_entries().await, 8);
    }

    /// Files this process holds open under `dir` whose name ends in `.lance`.
    fn open_lance_files_under(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        std::fs::read_dir("/proc/self/fd")
            .map(|fds| fds.flatten().filter_map(|fd| std::fs::read_link(fd.path()).ok()).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.starts_with(dir) && p.extension().is_some_and(|e| e == "lance"))
            .collect()
    }

    /// On a real LanceDB table: a full-text index replaced by a new one leaves the old one's
    /// segment files open while cached; the sweep drops those entries and the files close.
    #[tokio::test]
    async fn a_superseded_full_text_segment_is_dropped_and_its_files_closed() {
        use arrow_array::{RecordBatch, StringArray};
        use futures::TryStreamExt;
        use lancedb::index::{scalar::FullTextSearchQuery, Index};
        use lancedb::query::{ExecutableQuery, QueryBase};

        if std::fs::read_dir("/proc/self/fd").is_err() {
            eprintln!("skipped: /proc/self/fd cannot be read here, so open files cannot be counted");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let cache = Arc::new(ExpiringCache::with_expiry(64 << 20, Duration::ZERO, 1));
        let session = lance::session::Session::with_index_cache_backend(
            cache.clone(),
            8 << 20,
            Arc::new(lance_io::object_store::ObjectStoreRegistry::default()),
        );
        let conn = lancedb::connect(root.to_str().unwrap()).session(Arc::new(session)).execute().await.unwrap();
        let texts: Vec<String> =
            (0..200).map(|i| format!("row {i} speaks of topic{} and retry{}", i % 7, i % 3)).collect();
        let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "content",
            arrow_schema::DataType::Utf8,
            false,
        )]));
        let batch = RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(texts))]).unwrap();
        let table = conn.create_table("t", batch).execute().await.unwrap();
        let search = || async {
            let q = table.query().full_text_search(FullTextSearchQuery::new("topic3 retry1".to_string())).limit(5);
            let rows: usize =
                q.execute().await.unwrap().try_collect::<Vec<_>>().await.unwrap().iter().map(|b| b.num_rows()).sum();
            assert!(rows > 0, "the full-text query finds rows");
        };
        table.create_index(&["content"], Index::FTS(Default::default())).execute().await.unwrap();
        search().await;
        let first = open_lance_files_under(&root);
        assert!(!first.is_empty(), "the cached segment keeps its files open");
        // A new index over the same rows: the first segment is superseded, never read again.
        table.create_index(&["content"], Index::FTS(Default::default())).replace(true).execute().await.unwrap();
        search().await;
        let both = open_lance_files_under(&root);
        assert!(first.iter().all(|p| both.contains(p)), "before the sweep the old segment's files stay open");
        assert!(cache.sweep() > 0, "the old segment's entries expire");
        search().await;
        let after = open_lance_files_under(&root);
        assert!(first.iter().all(|p| !after.contains(p)), "the old segment's files are closed: {first:?} in {after:?}");
        assert!(!after.is_empty(), "the new segment, read again, is open");
    }

    #[tokio::test]
    async fn the_byte_budget_still_evicts() {
        let cache = ExpiringCache::new(1024);
        for n in 0..64 {
            load(&cache, n).await;
        }
        assert!(cache.size_bytes().await <= 1024, "weight {} over the budget", cache.size_bytes().await);
        assert!(cache.num_entries().await < 64);
    }
}
