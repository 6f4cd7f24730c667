//! Ref overlays: a git source's second ref stored as the files it does not share with the first.
//!
//! A git source indexes several refs (`refs = ["main", "release/*"]`); most files are the same
//! blob on all of them. Its first ref (the **base**, `proj@main`) is stored whole; every other
//! ref (`proj@release~1.0`) stores rows only for the files whose blob differs from the base's
//! (or that the base lacks), and records here which of the base's files it does **not** share
//! — its *shadowed* paths: changed on the ref, or absent from it. A read of the ref's view is
//! then its own rows plus the base's rows of every path it does not shadow, shown under the
//! ref's name (`proj@main/src/a.py` reads as `proj@release~1.0/src/a.py`), so two refs that
//! share most files cost little more than one: no row, vector or full-text posting is stored
//! twice.
//!
//! The `ref_overlays` table holds the overlay records of each view, by chunks-table version:
//!
//! | column | type | meaning |
//! |---|---|---|
//! | view | utf8 | the ref's view (`proj@release~1.0`) |
//! | base | utf8 | the view it reads through (`proj@main`; empty: from then on stored whole) |
//! | shadowed | utf8 | the base's paths (relative, `src/tax.py`) the view does not share, one per line |
//! | at_version | uint64 | the chunks table's version it takes effect at |
//! | chunks_table | utf8 | that chunks table (a re-embedding switches tables; records carry over) |
//! | seq | uint64 | the order records were written in (the newest answers the latest reads) |
//!
//! A view without a record is stored whole (a base, a folder, a work tree, or a ref that shares
//! too little to be worth an overlay). The writer records a view's overlay after the files of
//! the same change are committed ([`replace`]); a read of the latest version takes each view's
//! newest record, a read of a past version (`as_of`) the newest recorded at or before it.
//! Readers load the table through an [`OverlayCache`] (one per [`Index`](crate::store::Index)
//! handle, shared by the views made from it and by the writer that holds it), read again when a
//! read asks for a chunks version newer than the one the cached overlays were read for, and at
//! most a second after the last read otherwise: a view never reads a version's files through an
//! overlay older than their interim record (a ref's own copy of a file never shows beside the
//! base's new one), and a final record shows within about a second. Maintenance drops records
//! no kept version needs ([`prune`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arrow_array::{RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use futures::TryStreamExt;
use lancedb::query::ExecutableQuery;

use crate::columns::str_col;
use crate::connection::connect;
use crate::error::IndexError;
use crate::sql::sql_str;

/// Name of the table inside the database directory.
pub const OVERLAYS_TABLE: &str = "ref_overlays";

/// How long a loaded set of overlays answers before the table is read again.
const RECHECK: Duration = Duration::from_secs(1);

/// One view read through a base view.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Overlay {
    /// The base view (`proj@main`).
    pub base: String,
    /// The base's paths (relative to the view) this view does not share.
    pub shadowed: BTreeSet<String>,
}

/// One record of a view: from version `at` of chunks table `table` on, it reads through
/// `overlay` (`None`: it is stored whole, or gone). `seq` orders the records as written.
#[derive(Debug, Clone)]
pub struct Record {
    pub seq: u64,
    pub table: String,
    pub at: u64,
    pub overlay: Option<Arc<Overlay>>,
}

/// Which version of the chunks table a record takes effect at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effective {
    /// The version now (the change's files are committed).
    Now,
    /// The next version: the change's files are on their way (an interim record).
    NextCommit,
}

/// Every overlay record of an index, by view (oldest first), and the version of the table they
/// were read at (0: no table).
#[derive(Debug, Clone, Default)]
pub struct Overlays {
    pub views: HashMap<String, Vec<Record>>,
    pub version: u64,
}

impl Overlays {
    /// The overlay of `view` as of version `as_of.0` of chunks table `as_of.1` (`None`: the
    /// latest record).
    pub fn get(&self, view: &str, as_of: Option<(u64, &str)>) -> Option<&Arc<Overlay>> {
        self.record(view, as_of)?.overlay.as_ref()
    }

    /// The record of `view` in force at `as_of` (see [`Overlays::get`]): the newest of that
    /// table at or before the version, else one carried over from the table before it (a
    /// re-embedding switched tables; its rows mirror the old table's).
    fn record(&self, view: &str, as_of: Option<(u64, &str)>) -> Option<&Record> {
        let records = self.views.get(view)?;
        let Some((version, table)) = as_of else { return records.last() };
        let first_here = records.iter().filter(|r| r.table == table).map(|r| r.seq).min();
        records.iter().rev().find(|r| match r.table == table {
            true => r.at <= version,
            false => first_here.is_none_or(|f| r.seq < f),
        })
    }
}

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("view", DataType::Utf8, false),
        Field::new("base", DataType::Utf8, false),
        Field::new("shadowed", DataType::Utf8, false),
        Field::new("at_version", DataType::UInt64, false),
        Field::new("chunks_table", DataType::Utf8, false),
        Field::new("seq", DataType::UInt64, false),
    ]))
}

/// Records the overlay of `view` from the active chunks table's current (or next) version on
/// (`None`: the view is stored whole, or gone). Earlier records stay for `as_of` reads.
pub async fn replace(
    cache: &OverlayCache,
    uri: &str,
    view: &str,
    overlay: Option<&Overlay>,
    from: Effective,
) -> Result<(), IndexError> {
    let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
    // One write at a time per handle (two git sources record theirs concurrently; the first
    // creates the table).
    let _one = cache.writing.lock().await;
    crate::fence::confirm(uri).await?;
    let conn = connect(uri).await?;
    let names = conn.table_names().execute().await.map_err(lance)?;
    let recorded = read(&conn, &names, uri).await?;
    if overlay.is_none() && recorded.get(view, None).is_none() {
        return Ok(()); // nothing recorded, or already stored whole
    }
    let seq = recorded.views.values().flatten().map(|r| r.seq + 1).max().unwrap_or(1);
    let chunks = crate::active::current_table(uri).await?;
    let now = match names.contains(&chunks) {
        true => conn.open_table(&chunks).execute().await.map_err(lance)?.version().await.map_err(lance)?,
        false => 0,
    };
    let at = now + u64::from(from == Effective::NextCommit);
    let (base, shadowed) = match overlay {
        Some(o) => (o.base.clone(), o.shadowed.iter().map(String::as_str).collect::<Vec<_>>().join("\n")),
        None => (String::new(), String::new()),
    };
    let batch = RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(vec![view])),
            Arc::new(StringArray::from(vec![base])),
            Arc::new(StringArray::from(vec![shadowed])),
            Arc::new(arrow_array::UInt64Array::from(vec![at])),
            Arc::new(StringArray::from(vec![chunks.as_str()])),
            Arc::new(arrow_array::UInt64Array::from(vec![seq])),
        ],
    )?;
    let table =
        crate::connection::open_or_create_table(&conn, &names, OVERLAYS_TABLE, schema()).await.map_err(lance)?;
    // One commit: a reader never sees the view without its record.
    table.add(batch).execute().await.map_err(lance)?;
    cache.forget(uri);
    Ok(())
}

/// Records the views that start with `prefix` (`proj@`) but are not in `keep` (refs no longer
/// indexed) as stored whole from now on.
pub async fn retain(cache: &OverlayCache, uri: &str, prefix: &str, keep: &[String]) -> Result<(), IndexError> {
    let all = load(uri).await?;
    let stale: Vec<&String> =
        all.views.keys().filter(|v| v.starts_with(prefix) && !keep.contains(v) && all.get(v, None).is_some()).collect();
    for view in stale {
        replace(cache, uri, view, None, Effective::Now).await?;
    }
    Ok(())
}

/// Drops the records no read can use any more: those written before the one in force at
/// version `oldest` of chunks table `table`, the oldest version kept (maintenance, after its
/// cleanup; the active table is the only one read).
pub async fn prune(cache: &OverlayCache, uri: &str, oldest: u64, table: &str) -> Result<(), IndexError> {
    crate::fence::confirm(uri).await?;
    let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
    let conn = connect(uri).await?;
    let names = conn.table_names().execute().await.map_err(lance)?;
    let all = read(&conn, &names, uri).await?;
    let stale: Vec<(&String, u64)> = all
        .views
        .iter()
        .filter_map(|(view, records)| {
            let floor = all.record(view, Some((oldest, table)))?.seq;
            records.iter().any(|r| r.seq < floor).then_some((view, floor))
        })
        .collect();
    if stale.is_empty() {
        return Ok(());
    }
    let t = conn.open_table(OVERLAYS_TABLE).execute().await.map_err(lance)?;
    for (view, floor) in stale {
        t.delete(&format!("view = {} AND seq < {floor}", sql_str(view))).await.map_err(lance)?;
    }
    cache.forget(uri);
    Ok(())
}

/// Every overlay of the database at `uri`, read now (none when the table does not exist).
pub async fn load(uri: &str) -> Result<Overlays, IndexError> {
    let conn = connect(uri).await?;
    let names =
        conn.table_names().execute().await.map_err(|source| IndexError::Lance { uri: uri.to_string(), source })?;
    read(&conn, &names, uri).await
}

/// [`load`] through an open connection whose tables are `names`.
async fn read(conn: &lancedb::Connection, names: &[String], uri: &str) -> Result<Overlays, IndexError> {
    let lance = |source| IndexError::Lance { uri: uri.to_string(), source };
    let mut out = Overlays::default();
    if !names.iter().any(|n| n == OVERLAYS_TABLE) {
        return Ok(out);
    }
    let table = conn.open_table(OVERLAYS_TABLE).execute().await.map_err(lance)?;
    out.version = table.version().await.map_err(lance)?;
    let batches: Vec<RecordBatch> = table.query().execute().await.map_err(lance)?.try_collect().await.map_err(lance)?;
    for b in &batches {
        let (views, bases, shadowed) =
            (str_col(b, "view", uri)?, str_col(b, "base", uri)?, str_col(b, "shadowed", uri)?);
        let ats = crate::columns::typed_col::<arrow_array::UInt64Array>(b, "at_version", uri)?;
        let seqs = crate::columns::typed_col::<arrow_array::UInt64Array>(b, "seq", uri)?;
        let tables = str_col(b, "chunks_table", uri)?;
        for i in 0..b.num_rows() {
            let shadowed = shadowed.value(i).lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
            let overlay =
                (!bases.value(i).is_empty()).then(|| Arc::new(Overlay { base: bases.value(i).to_string(), shadowed }));
            let record = Record { seq: seqs.value(i), table: tables.value(i).to_string(), at: ats.value(i), overlay };
            out.views.entry(views.value(i).to_string()).or_default().push(record);
        }
    }
    for records in out.views.values_mut() {
        records.sort_by_key(|r| r.seq);
    }
    Ok(out)
}

/// One database's overlays as last read: when, and the chunks-table version (of which table)
/// the read was made for. Every interim record of a version is written before that version's
/// commit, so a read made after a caller saw version `v` holds what `v` needs.
#[derive(Clone)]
struct Loaded {
    at: Instant,
    covers: (String, u64),
    overlays: Arc<Overlays>,
}

impl Loaded {
    /// Whether these overlays may answer a read of version `reads.1` of chunks table `reads.0`.
    fn covers(&self, reads: (&str, u64)) -> bool {
        self.covers.0 == reads.0 && self.covers.1 >= reads.1
    }
}

/// The overlays read per database, each re-read at most every [`RECHECK`] and whenever a
/// read asks for a newer chunks version than they were read for; and the lock that lets one
/// overlay write at a time through this handle.
#[derive(Default)]
pub struct OverlayCache {
    entries: Mutex<HashMap<String, Loaded>>,
    /// One read at a time: while one query reads them again, the others answer with the
    /// previous ones (when those cover what they read).
    reading: tokio::sync::Mutex<()>,
    writing: tokio::sync::Mutex<()>,
}

impl OverlayCache {
    /// Drops the cached overlays of `uri` (after they were written through this cache).
    pub fn forget(&self, uri: &str) {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).remove(uri);
    }

    fn cached(&self, uri: &str) -> Option<Loaded> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).get(uri).cloned()
    }

    /// The overlays of `uri` for a read of version `reads.1` of chunks table `reads.0`: the
    /// cached ones when they were read for that version or a later one and about a second
    /// ago at most (while one query reads them again, the others answer with the previous
    /// ones); else read now. A reader that sees a ref's files committed therefore never reads
    /// them through an overlay older than their interim record.
    pub async fn current(&self, uri: &str, reads: (&str, u64)) -> Result<Arc<Overlays>, IndexError> {
        let _reading = match (self.cached(uri), self.reading.try_lock()) {
            (Some(c), _) if c.covers(reads) && c.at.elapsed() < RECHECK => return Ok(c.overlays),
            (Some(c), Err(_)) if c.covers(reads) => return Ok(c.overlays),
            (_, Ok(guard)) => guard,
            (_, Err(_)) => {
                let guard = self.reading.lock().await;
                // Another query may have read them for this version meanwhile.
                if let Some(c) = self.cached(uri).filter(|c| c.covers(reads) && c.at.elapsed() < RECHECK) {
                    return Ok(c.overlays);
                }
                guard
            }
        };
        let loaded = match load(uri).await {
            Ok(o) => Arc::new(o),
            Err(e) => match self.cached(uri) {
                // Keep answering with the last overlays read (a bucket's hiccup); retried next time.
                Some(c) => {
                    tracing::warn!(
                        "reading the ref overlays of {uri} failed ({e}); reading through the last ones read"
                    );
                    return Ok(c.overlays);
                }
                None => return Err(e),
            },
        };
        let entry = Loaded { at: Instant::now(), covers: (reads.0.to_string(), reads.1), overlays: loaded.clone() };
        self.entries.lock().unwrap_or_else(|p| p.into_inner()).insert(uri.to_string(), entry);
        Ok(loaded)
    }
}

/// The overlays a scoped view reads through: `(view, overlay)` for each of its names that is one.
#[derive(Debug, Clone, Default)]
pub struct Lens {
    views: Vec<(String, Arc<Overlay>)>,
    /// The overlays table's version they were read at (part of cache keys).
    pub version: u64,
}

impl Lens {
    /// The overlays of the scope's `names` among `all`, at a version of a chunks table (`None`:
    /// the latest).
    pub fn of(names: &[String], all: &Overlays, as_of: Option<(u64, &str)>) -> Self {
        let views = names.iter().filter_map(|n| all.get(n, as_of).map(|o| (n.clone(), o.clone()))).collect();
        Self { views, version: all.version }
    }

    pub fn is_empty(&self) -> bool {
        self.views.is_empty()
    }

    /// LanceDB filter terms for the base rows the overlays read (each a superset: `NOT IN`
    /// of the shadowed paths, `LIKE` of the base; checked exactly by [`Lens::show`]).
    pub fn filter_terms(&self) -> Vec<String> {
        self.views
            .iter()
            .map(|(_, o)| {
                // (`%` would widen the pattern past the base; `_` keeps it a superset.)
                let like = format!("path LIKE {}", sql_str(&format!("{}/%", o.base.replace('%', "_"))));
                if o.shadowed.is_empty() {
                    return like;
                }
                let stored: Vec<String> = o.shadowed.iter().map(|p| format!("{}/{p}", o.base)).collect();
                format!("({like} AND NOT ({}))", crate::sql::in_list("path", &stored))
            })
            .collect()
    }

    /// The path a base row of `path` shows as in the first overlay that reads it (`None`: no
    /// overlay of this lens reads it).
    pub fn show(&self, path: &str) -> Option<String> {
        self.views.iter().find_map(|(view, o)| {
            let rel = path.strip_prefix(o.base.as_str())?.strip_prefix('/')?;
            (!o.shadowed.contains(rel)).then(|| format!("{view}/{rel}"))
        })
    }

    /// Where the rows of `path` (a path of an overlay view) are stored besides under its own
    /// name: the base's path, when the view shares it.
    pub fn stored(&self, path: &str) -> Option<String> {
        self.views.iter().find_map(|(view, o)| {
            let rel = path.strip_prefix(view.as_str())?.strip_prefix('/')?;
            (!o.shadowed.contains(rel)).then(|| format!("{}/{rel}", o.base))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lens() -> Lens {
        let o = Overlay { base: "lib@main".into(), shadowed: ["src/tax.py".to_string(), "gone.md".into()].into() };
        let views = [(
            "lib@v2".to_string(),
            vec![Record { seq: 1, table: "chunks".into(), at: 1, overlay: Some(Arc::new(o)) }],
        )]
        .into_iter()
        .collect();
        Lens::of(&["lib@v2".into(), "docs".into()], &Overlays { views, version: 3 }, None)
    }

    #[test]
    fn base_rows_show_under_the_view_unless_shadowed() {
        let l = lens();
        assert_eq!(l.show("lib@main/src/a.py").as_deref(), Some("lib@v2/src/a.py"));
        assert_eq!(l.show("lib@main/src/tax.py"), None, "changed on v2: its own row answers");
        assert_eq!(l.show("lib@mainline/src/a.py"), None);
        assert_eq!(l.show("docs/a.md"), None);
        assert_eq!(l.stored("lib@v2/src/a.py").as_deref(), Some("lib@main/src/a.py"));
        assert_eq!(l.stored("lib@v2/src/tax.py"), None);
        assert_eq!(
            l.filter_terms(),
            ["(path LIKE 'lib@main/%' AND NOT (path IN ('lib@main/gone.md', 'lib@main/src/tax.py')))"]
        );
    }

    /// `lib@main` has a.py and b.py; `lib@v2` changed b.py and shares a.py.
    async fn two_refs(uri: &str) -> crate::store::Index {
        let index = crate::store::Index::open_or_create(uri, "m", 8).await.unwrap();
        index.name_sources(true);
        let mut rows = Vec::new();
        for (i, path, text) in
            [(0, "lib@main/a.py", "shared apple"), (1, "lib@main/b.py", "main banana"), (2, "lib@v2/b.py", "v2 banana")]
        {
            let mut r = crate::testing::row(i);
            (r.chunk.path, r.chunk.content, r.chunk.source) =
                (path.into(), text.into(), crate::record::source_of_path(path).into());
            rows.push(r);
        }
        index.writes().commit(crate::writer::CommitBatch { rows, ..Default::default() }).await.unwrap();
        index.maintenance().build_fts().await.unwrap();
        replace(
            &index.reads().overlay_cache(),
            uri,
            "lib@v2",
            Some(&Overlay { base: "lib@main".into(), shadowed: ["b.py".to_string()].into() }),
            Effective::Now,
        )
        .await
        .unwrap();
        index
    }

    #[tokio::test]
    async fn every_read_of_a_ref_sees_its_own_rows_and_the_bases_it_shares() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_str().unwrap();
        let index = two_refs(uri).await;
        let v2 = index.scoped(Some(crate::scope::SourceScope::new(["lib@v2"]))).await.unwrap();
        let mut files: Vec<String> = v2.reads().files().await.unwrap().into_iter().map(|f| f.0).collect();
        files.sort();
        assert_eq!(files, ["lib@v2/a.py", "lib@v2/b.py"]);
        assert_eq!(v2.reads().stats().await.unwrap().rows, 2, "main's b.py is not v2's");
        let found = v2.reads().fts_search("banana apple", 10).await.unwrap();
        let mut seen: Vec<(String, String, String)> =
            found.iter().map(|h| (h.path.clone(), h.git_ref.clone(), h.content.clone())).collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                ("lib@v2/a.py".to_string(), "v2".to_string(), "shared apple".to_string()),
                ("lib@v2/b.py".into(), "v2".into(), "v2 banana".into()),
            ]
        );
        let near = v2.reads().vector_search(&crate::testing::row(0).vector, 5).await.unwrap();
        assert_eq!(near[0].path, "lib@v2/a.py");
        assert!(near.iter().all(|h| h.path.starts_with("lib@v2/")), "{near:?}");
        // By path: the view's path, or the base's (a path from the whole index's vocabulary).
        let by_view = v2.reads().chunks_of("lib@v2/a.py").await.unwrap();
        assert_eq!((by_view.len(), by_view[0].path.as_str()), (1, "lib@v2/a.py"));
        let by_base = v2.reads().chunks_of_paths(&["lib@main/a.py".to_string()]).await.unwrap();
        assert_eq!(by_base["lib@main/a.py"][0].path, "lib@v2/a.py");
        assert!(v2.reads().chunks_of("lib@main/b.py").await.unwrap().is_empty(), "shadowed");
        assert_eq!(v2.vectors().chunk_vectors_of("lib@v2/a.py").await.unwrap().len(), 1);
        // Flight's scan shows the same rows under the view.
        use futures::StreamExt;
        let mut scanned = Vec::new();
        let mut stream = v2.reads().scan().await.unwrap();
        while let Some(b) = stream.next().await {
            let b = b.unwrap();
            let (p, src) = (str_col(&b, "path", uri).unwrap(), str_col(&b, crate::schema::SOURCE, uri).unwrap());
            scanned.extend((0..b.num_rows()).map(|i| format!("{} {}", p.value(i), src.value(i))));
        }
        scanned.sort();
        assert_eq!(scanned, ["lib@v2/a.py lib@v2", "lib@v2/b.py lib@v2"]);
        // The base reads as before; with both in scope, a shared row shows once, under the base.
        let main = index.scoped(Some(crate::scope::SourceScope::new(["lib@main"]))).await.unwrap();
        assert_eq!(main.reads().files().await.unwrap().len(), 2);
        let both = index.scoped(Some(crate::scope::SourceScope::new(["lib@main", "lib@v2"]))).await.unwrap();
        let mut all: Vec<String> = both.reads().files().await.unwrap().into_iter().map(|f| f.0).collect();
        all.sort();
        assert_eq!(all, ["lib@main/a.py", "lib@main/b.py", "lib@v2/b.py"]);
        assert_eq!(both.reads().chunks_of("lib@v2/a.py").await.unwrap()[0].path, "lib@v2/a.py");
        assert!(v2.scope_key().contains("overlays@"), "{}", v2.scope_key());
    }

    #[tokio::test]
    async fn a_past_version_reads_the_overlay_recorded_then() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_str().unwrap();
        let index = two_refs(uri).await;
        let then = index.version().await.unwrap();
        // Later v2 stops sharing a.py too (its own copy would come in the same change).
        index
            .writes()
            .commit(crate::writer::CommitBatch { rows: vec![crate::testing::row(7)], ..Default::default() })
            .await
            .unwrap();
        let o = Overlay { base: "lib@main".into(), shadowed: ["a.py".to_string(), "b.py".into()].into() };
        replace(&index.reads().overlay_cache(), uri, "lib@v2", Some(&o), Effective::Now).await.unwrap();
        let scope = || Some(crate::scope::SourceScope::new(["lib@v2"]));
        let now: Vec<String> =
            index.scoped(scope()).await.unwrap().reads().files().await.unwrap().into_iter().map(|f| f.0).collect();
        assert_eq!(now, ["lib@v2/b.py"]);
        let past = index.snapshots().at(then).await.unwrap().scoped(scope()).await.unwrap();
        let mut files: Vec<String> = past.reads().files().await.unwrap().into_iter().map(|f| f.0).collect();
        files.sort();
        assert_eq!(files, ["lib@v2/a.py", "lib@v2/b.py"], "as of {then}");
        // Maintenance keeps the record a kept version needs, drops the older ones.
        prune(&index.reads().overlay_cache(), uri, then + 1, "chunks").await.unwrap();
        assert_eq!(load(uri).await.unwrap().views["lib@v2"].len(), 1);
    }

    #[tokio::test]
    async fn a_read_of_a_newer_version_never_gets_overlays_read_before_its_interim_record() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_str().unwrap();
        let index = two_refs(uri).await;
        let v = index.version().await.unwrap();
        // A reader's cache (another handle: the writer's writes do not reach it).
        let reader = OverlayCache::default();
        let shadowed = |o: &Overlays| o.get("lib@v2", None).unwrap().shadowed.iter().cloned().collect::<Vec<_>>();
        assert_eq!(shadowed(&reader.current(uri, ("chunks", v)).await.unwrap()), ["b.py"]);
        // The writer stops sharing a.py: the interim record, then the commit with v2's own copy.
        let o = Overlay { base: "lib@main".into(), shadowed: ["a.py".to_string(), "b.py".into()].into() };
        replace(&index.reads().overlay_cache(), uri, "lib@v2", Some(&o), Effective::NextCommit).await.unwrap();
        index
            .writes()
            .commit(crate::writer::CommitBatch { rows: vec![crate::testing::row(7)], ..Default::default() })
            .await
            .unwrap();
        let next = index.version().await.unwrap();
        assert!(next > v);
        // Within the second the cached overlays answer, a read of the new version reads again.
        assert_eq!(shadowed(&reader.current(uri, ("chunks", next)).await.unwrap()), ["a.py", "b.py"]);
        // So does a read of another chunks table (a re-embedding switched tables).
        assert!(reader.cached(uri).unwrap().covers(("chunks", next)));
        assert!(!reader.cached(uri).unwrap().covers(("chunks__other", 1)));
    }

    #[tokio::test]
    async fn replaced_per_view_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().to_str().unwrap();
        let cache = OverlayCache::default();
        assert!(cache.current(uri, ("chunks", 0)).await.unwrap().views.is_empty(), "no table: no overlays");
        let o = Overlay { base: "lib@main".into(), shadowed: ["a.py".to_string()].into() };
        replace(&cache, uri, "lib@v2", Some(&o), Effective::Now).await.unwrap();
        replace(
            &cache,
            uri,
            "lib@v3",
            Some(&Overlay { base: "lib@main".into(), shadowed: BTreeSet::new() }),
            Effective::Now,
        )
        .await
        .unwrap();
        let read = cache.current(uri, ("chunks", 0)).await.unwrap();
        assert_eq!(read.get("lib@v2", None).map(|o| o.as_ref()), Some(&o));
        assert!(read.get("lib@v3", None).unwrap().shadowed.is_empty());
        let changed = Overlay { base: "lib@main".into(), shadowed: ["a.py".to_string(), "b.py".into()].into() };
        replace(&cache, uri, "lib@v2", Some(&changed), Effective::Now).await.unwrap();
        let again = cache.current(uri, ("chunks", 0)).await.unwrap();
        assert_eq!(again.get("lib@v2", None).map(|o| o.as_ref()), Some(&changed), "the newest record answers");
        assert_eq!(again.get("lib@v2", Some((0, "chunks"))).map(|o| o.as_ref()), Some(&changed), "no table: version 0");
        assert_eq!(again.get("lib@v2", Some((0, "chunks__other"))).map(|o| o.as_ref()), Some(&changed), "carried over");
        assert!(again.version > read.version);
        replace(&cache, uri, "lib@v2", None, Effective::Now).await.unwrap();
        retain(&cache, uri, "lib@", &["lib@v4".to_string()]).await.unwrap();
        let read = cache.current(uri, ("chunks", 0)).await.unwrap();
        assert!(
            read.get("lib@v2", None).is_none() && read.get("lib@v3", None).is_none(),
            "retain: stored whole: {read:?}"
        );
    }
}
