//! The query adapter each view of the index may use ([`ctxd_index::adapters`]), read from its
//! table and decoded once per view, then kept current off the query path: a request that finds
//! its view's adapter older than [`RECHECK`] is answered with it and starts one background read,
//! so a localization neither opens two tables nor decodes 384 × 384 weights (≈ 10–20 ms in a
//! debug build); it pays the product alone. A fit stored by `ctxd adapt` or a daemon's background
//! job is in use a few seconds later; until then the previous one answers. An adapter stored in a
//! form this build cannot read is left unused with a warning (`ctxd adapt` writes it again).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxd_index::store::Index;
use ctxd_models::adapter::QueryAdapter;
use ctxd_search::error::SearchError;
use tokio::sync::Mutex;

/// How long a view's adapter is used before its table is read again (in the background).
pub const RECHECK: Duration = Duration::from_secs(2);
/// Views whose adapters are kept (the oldest read is dropped first).
const SLOTS: usize = 8;

/// A view's cached adapter (`None`: the view has none).
struct Slot {
    key: String,
    read_at: Instant,
    adapter: Option<Arc<QueryAdapter>>,
    /// A background read is under way.
    reading: bool,
}

/// Adapters read per view (the latest, a tagged snapshot, a source scope).
#[derive(Clone, Default)]
pub struct AdapterCache {
    slots: Arc<Mutex<Vec<Slot>>>,
}

impl AdapterCache {
    /// The adapter `index`'s view may use: read now the first time, then the cached one, read
    /// again in the background once older than [`RECHECK`].
    pub async fn get(&self, index: &Arc<Index>) -> Result<Option<Arc<QueryAdapter>>, SearchError> {
        // The table names the model: after a switch, the new model's view reads its own adapter.
        let key = format!("{}/{}{}@{:?}", index.uri(), index.table_name(), index.scope_key(), index.pinned());
        {
            let mut slots = self.slots.lock().await;
            if let Some(slot) = slots.iter_mut().find(|s| s.key == key) {
                if slot.read_at.elapsed() >= RECHECK && !slot.reading {
                    slot.reading = true;
                    let (cache, index, key) = (self.clone(), index.clone(), key.clone());
                    tokio::spawn(async move {
                        match read(&index).await {
                            Ok(adapter) => cache.put(key, adapter, false).await,
                            Err(e) => {
                                tracing::warn!("reading the query adapter of {} again: {e}", index.uri());
                                cache.put(key, None, true).await;
                            }
                        }
                    });
                }
                return Ok(slot.adapter.clone());
            }
        }
        let adapter = read(index).await?;
        self.put(key, adapter.clone(), false).await;
        Ok(adapter)
    }

    /// Stores a view's adapter as read now; a failed background read keeps the old one and
    /// retries after [`RECHECK`].
    async fn put(&self, key: String, adapter: Option<Arc<QueryAdapter>>, failed: bool) {
        let mut slots = self.slots.lock().await;
        if failed {
            if let Some(slot) = slots.iter_mut().find(|s| s.key == key) {
                (slot.read_at, slot.reading) = (Instant::now(), false);
            }
            return;
        }
        slots.retain(|s| s.key != key);
        slots.push(Slot { key, read_at: Instant::now(), adapter, reading: false });
        if slots.len() > SLOTS {
            slots.remove(0);
        }
    }
}

/// The stored adapter of `index`'s view, decoded; `None` when it has none or it does not fit.
async fn read(index: &Index) -> Result<Option<Arc<QueryAdapter>>, SearchError> {
    let Some(row) = index.history().query_adapter().await? else { return Ok(None) };
    match QueryAdapter::from_bytes(&row.weights, row.dim as usize) {
        Ok(a) if a.dim() == index.dim() => Ok(Some(Arc::new(a))),
        Ok(_) => Ok(None),
        Err(e) => {
            tracing::warn!("{}: {e}", index.uri());
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxd_index::adapters::{store, StoredAdapter};
    use ctxd_index::history::{replace, FileCommit};

    #[tokio::test]
    async fn a_view_s_adapter_is_read_once_then_kept_current_in_the_background() {
        let dir = tempfile::tempdir().unwrap();
        let uri = dir.path().join("db").to_string_lossy().to_string();
        let index = Arc::new(Index::open_or_create(&uri, "m", 2).await.unwrap());
        let cache = AdapterCache::default();
        let first_read = Instant::now();
        assert!(cache.get(&index).await.unwrap().is_none(), "no history, no adapter");
        let commit =
            FileCommit { path: "a.py".into(), commit: "c1".into(), time: 1, author: "x".into(), summary: "s".into() };
        replace(&uri, "", &[commit]).await.unwrap();
        let mut row = StoredAdapter {
            model: "m".into(),
            dim: 2,
            history_version: index.history().history_version().await.unwrap(),
            newest: 1,
            weights: QueryAdapter::identity(2).to_bytes(),
            report: "{}".into(),
        };
        store(&uri, &row).await.unwrap();
        // The cached "none" answers until it is read again, in the background (on a slow machine
        // the writes above may have outlasted RECHECK already).
        if first_read.elapsed() < RECHECK {
            assert!(cache.get(&index).await.unwrap().is_none(), "the entry read first answers");
        }
        tokio::time::sleep(RECHECK).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while cache.get(&index).await.unwrap().is_none() {
            assert!(Instant::now() < deadline, "the background read never replaced the entry");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A fit that was not kept: the adapter goes out of use the same way.
        row.weights.clear();
        store(&uri, &row).await.unwrap();
        tokio::time::sleep(RECHECK).await;
        while cache.get(&index).await.unwrap().is_some() {
            assert!(Instant::now() < deadline + Duration::from_secs(30), "the unused fit was never read");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
