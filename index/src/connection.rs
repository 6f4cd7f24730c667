//! How the index connects to LanceDB: one connection setup for the whole process — a single Lance
//! `Session` (the object-store registry and the two caches every opened table shares) — and
//! opening or creating a table.
//!
//! LanceDB's default session caches up to 6 GiB of index data (IVF partitions, full-text
//! posting lists) and 1 GiB of metadata (manifests, fragment and file footers) — *per
//! connection*, and ctxd opens several connections (the writer, readers, `as_of` snapshots).
//! A daemon that streams a 1 GB log commits hundreds of versions and fragments; with the
//! default budget their metadata is never evicted and the heap grows with the file. Here the
//! budgets are bounded ([`CacheLimits`], `[index] index_cache_mb` / `metadata_cache_mb`) and
//! one session is shared, so the bound is per process.
//!
//! Measured (release, `--no-embed`, a 1 GB log streamed in 342 commits): with 512 MiB/64 MiB
//! the heap's floor rose from 70 to 140 MB over the file (the full-text segments and manifests
//! of every part stayed cached); with 1 MiB/1 MiB it stayed at 75–85 MB. The defaults (64 MiB
//! and 32 MiB) bound that growth while keeping a mid-size repository's indexes cached for
//! queries; a big deployment raises them (`configs/high-memory.toml`).
//!
//! The index cache drops entries nobody has read for minutes while newer ones come in
//! ([`crate::index_cache`]): the full-text segments of superseded versions, which would
//! otherwise each keep a file open until the byte budget is full.
//!
//! The limits are read when the first connection is opened: call [`set_cache_limits`]
//! before opening any index (later calls return `false` and change nothing).
//!
//! Lance decodes and scores on a CPU pool of its own, shared by every table of the process,
//! which starts a thread whenever all of its threads are busy and keeps each thread it starts
//! for the life of the process. A thread inherits its creator's scheduling priority, so a pool
//! thread first started by a lower-priority writer thread (`ctxd-pipeline`'s `writer_threads`)
//! would stay at that priority for the queries too: [`start_cpu_threads`] starts all of them
//! from the calling thread first.

use std::sync::{Arc, OnceLock};

use lance::session::Session;
use lance_io::object_store::ObjectStoreRegistry;

/// Byte budgets of the process-wide LanceDB caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheLimits {
    /// Opened index structures (vector partitions, full-text posting lists).
    pub index_bytes: usize,
    /// Manifests, fragment metadata, file footers.
    pub metadata_bytes: usize,
}

impl Default for CacheLimits {
    fn default() -> Self {
        Self { index_bytes: 64 << 20, metadata_bytes: 32 << 20 }
    }
}

static LIMITS: OnceLock<CacheLimits> = OnceLock::new();
static SESSION: OnceLock<Arc<Session>> = OnceLock::new();

/// Sets the cache budgets of the process (first call wins; `false` if already set or a
/// connection was already opened with the defaults).
pub fn set_cache_limits(limits: CacheLimits) -> bool {
    SESSION.get().is_none() && LIMITS.set(limits).is_ok()
}

/// The shared session every connection is opened with.
pub(crate) fn session() -> Arc<Session> {
    SESSION
        .get_or_init(|| {
            let limits = *LIMITS.get_or_init(CacheLimits::default);
            let index_cache = Arc::new(crate::index_cache::ExpiringCache::new(limits.index_bytes));
            Arc::new(Session::with_index_cache_backend(
                index_cache,
                limits.metadata_bytes,
                Arc::new(ObjectStoreRegistry::default()),
            ))
        })
        .clone()
}

/// Entries and bytes of one of the process-wide LanceDB caches, and its lookups since the
/// process started: a miss reads the entry from the table's files and decodes it again.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUse {
    pub entries: usize,
    pub bytes: usize,
    pub hits: u64,
    pub misses: u64,
}

impl From<lance_core::cache::CacheStats> for CacheUse {
    fn from(s: lance_core::cache::CacheStats) -> Self {
        Self { entries: s.num_entries, bytes: s.size_bytes, hits: s.hits, misses: s.misses }
    }
}

/// What the two LanceDB caches hold now and how their lookups went (`None` before any index was
/// opened), exported as [`crate::metrics::INDEX_CACHE_BYTES`] / [`crate::metrics::INDEX_CACHE_ENTRIES`]
/// and [`crate::metrics::INDEX_CACHE_HITS_TOTAL`] / [`crate::metrics::INDEX_CACHE_MISSES_TOTAL`]
/// (label `cache`: `index` or `metadata`). Called every few seconds by the binary's metrics
/// upkeep: how much of the process's memory is these caches filling up to their budgets, and
/// whether a budget is too small for what the queries read (misses that keep coming).
pub async fn cache_use() -> Option<[(&'static str, CacheUse); 2]> {
    let session = SESSION.get()?;
    let used = [
        ("index", CacheUse::from(session.index_cache_stats().await)),
        ("metadata", CacheUse::from(session.metadata_cache_stats().await)),
    ];
    for (cache, u) in used {
        metrics::gauge!(crate::metrics::INDEX_CACHE_BYTES, "cache" => cache).set(u.bytes as f64);
        metrics::gauge!(crate::metrics::INDEX_CACHE_ENTRIES, "cache" => cache).set(u.entries as f64);
        metrics::counter!(crate::metrics::INDEX_CACHE_HITS_TOTAL, "cache" => cache).absolute(u.hits);
        metrics::counter!(crate::metrics::INDEX_CACHE_MISSES_TOTAL, "cache" => cache).absolute(u.misses);
    }
    Some(used)
}

/// `uri` as LanceDB must be given it: a local path made absolute (LanceDB reads a bare relative
/// name such as `db` as a LanceDB Cloud database, `db://…`), anything with a scheme unchanged.
fn local_uri(uri: &str) -> String {
    if uri.contains("://") {
        return uri.to_string();
    }
    std::path::absolute(uri).map(|p| p.to_string_lossy().into_owned()).unwrap_or_else(|_| uri.to_string())
}

/// Starts every thread of Lance's CPU pool now, from the calling thread (so at its priority):
/// as many tasks as the pool has threads, each waiting until all have started. Returns the
/// number of threads; a second call starts none (the pool keeps them).
pub fn start_cpu_threads() -> usize {
    static STARTED: OnceLock<usize> = OnceLock::new();
    *STARTED.get_or_init(|| {
        let n = lance_core::utils::tokio::get_num_compute_intensive_cpus();
        let all_started = Arc::new(std::sync::Barrier::new(n));
        for _ in 0..n {
            let all_started = all_started.clone();
            // The pool starts a thread at the call when none is idle; nothing waits on the task.
            drop(lance_core::utils::tokio::spawn_cpu(move || {
                all_started.wait();
                Ok::<(), std::io::Error>(())
            }));
        }
        n
    })
}

/// A connection to the database at `uri`, opened with the shared session.
pub(crate) async fn connect(uri: &str) -> Result<lancedb::Connection, crate::error::IndexError> {
    lancedb::connect(&local_uri(uri))
        .session(session())
        .execute()
        .await
        .map_err(|source| crate::error::IndexError::Lance { uri: uri.to_string(), source })
}

/// The table `name` of the database at `uri`, or `None` when it was never created (the small
/// side tables — switches, file history — exist only once something was recorded).
pub(crate) async fn open_if_exists(uri: &str, name: &str) -> Result<Option<lancedb::Table>, crate::error::IndexError> {
    let conn = connect(uri).await?;
    let lance = |source| crate::error::IndexError::Lance { uri: uri.to_string(), source };
    if !conn.table_names().execute().await.map_err(lance)?.iter().any(|n| n == name) {
        return Ok(None);
    }
    conn.open_table(name).execute().await.map(Some).map_err(lance)
}

/// Replaces the rows of side table `name` that `filter` selects with `batch` (the table is created
/// with `batch` when missing; an empty `batch` only deletes).
pub(crate) async fn replace_where(
    uri: &str,
    name: &str,
    filter: &str,
    batch: arrow_array::RecordBatch,
) -> Result<(), crate::error::IndexError> {
    let lance = |source| crate::error::IndexError::Lance { uri: uri.to_string(), source };
    let conn = connect(uri).await?;
    if !conn.table_names().execute().await.map_err(lance)?.iter().any(|n| n == name) {
        conn.create_table(name, batch).execute().await.map_err(lance)?;
        return Ok(());
    }
    let table = conn.open_table(name).execute().await.map_err(lance)?;
    table.delete(filter).await.map_err(lance)?;
    if batch.num_rows() > 0 {
        table.add(batch).execute().await.map_err(lance)?;
    }
    Ok(())
}

/// Side table `name` of the database at `uri`: created empty with `schema` when missing and
/// `create`, else `None` when it does not exist ([`open_if_exists`]: reads and clears create
/// nothing).
pub(crate) async fn side_table(
    uri: &str,
    name: &str,
    schema: arrow_schema::SchemaRef,
    create: bool,
) -> Result<Option<lancedb::Table>, crate::error::IndexError> {
    if !create {
        return open_if_exists(uri, name).await;
    }
    let conn = connect(uri).await?;
    let lance = |source| crate::error::IndexError::Lance { uri: uri.to_string(), source };
    let names = conn.table_names().execute().await.map_err(lance)?;
    open_or_create_table(&conn, &names, name, schema).await.map(Some).map_err(lance)
}

/// Opens table `name` of `conn` (whose tables are `names`), creating it empty with `schema`
/// when missing; if another writer creates it in the meantime, that one is opened.
pub(crate) async fn open_or_create_table(
    conn: &lancedb::Connection,
    names: &[String],
    name: &str,
    schema: arrow_schema::SchemaRef,
) -> Result<lancedb::Table, lancedb::Error> {
    if !names.iter().any(|n| n == name) {
        if let Ok(t) = conn.create_empty_table(name, schema).execute().await {
            return Ok(t);
        }
    }
    // Listed, or created by another writer first: a writer creating it right now (parallel
    // re-embedding shards on S3) makes it listed before its first version is readable, so the
    // open is retried for a few seconds.
    let mut opened = conn.open_table(name).execute().await;
    for wait_ms in [100, 300, 1000, 2000] {
        if opened.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(wait_ms)).await;
        opened = conn.open_table(name).execute().await;
    }
    opened
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_local_databases() {
        let db = local_uri("db");
        assert!(db.starts_with('/') && db.ends_with("/db"), "{db}");
        assert_eq!(local_uri("/var/lib/ctxd/db"), "/var/lib/ctxd/db");
        assert_eq!(local_uri("s3://bucket/index"), "s3://bucket/index");
    }

    #[test]
    fn one_session_per_process_and_limits_fixed_once_it_exists() {
        let a = session();
        let b = session();
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!set_cache_limits(CacheLimits { index_bytes: 1, metadata_bytes: 1 }));
    }

    #[test]
    fn lance_cpu_threads_start_from_the_caller_once() {
        let n = start_cpu_threads();
        assert!(n >= 1, "Lance's pool has at least one thread");
        assert_eq!(start_cpu_threads(), n, "the second call starts nothing new");
    }

    #[tokio::test]
    async fn cache_use_reports_what_an_opened_table_cached() {
        let _ = session();
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let conn = connect(&uri).await.unwrap();
        let schema = Arc::new(arrow_schema::Schema::new(vec![arrow_schema::Field::new(
            "n",
            arrow_schema::DataType::Int32,
            false,
        )]));
        let table = open_or_create_table(&conn, &[], "t", schema).await.unwrap();
        table.count_rows(None).await.unwrap();
        let [(index, _), (metadata, used)] = cache_use().await.expect("a session exists once opened");
        assert_eq!((index, metadata), ("index", "metadata"));
        assert!(used.entries > 0 && used.bytes > 0, "the opened table's manifest is cached: {used:?}");
        // Opened again, some of the same version's metadata comes from the cache (a table just
        // created was cached by its writer, without a lookup: no hit or miss counted until now).
        open_or_create_table(&conn, &[], "t", table.schema().await.unwrap())
            .await
            .unwrap()
            .count_rows(None)
            .await
            .unwrap();
        let [_, (_, again)] = cache_use().await.unwrap();
        assert!(again.hits > used.hits, "the second open found metadata cached: {used:?} then {again:?}");
    }
}
