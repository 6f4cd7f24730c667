//! Fencing: a writer writes to an index in a bucket only while it knows its writer lease is
//! still its own.
//!
//! The lease ([`crate::lease`]) keeps one writer per index as long as every writer runs: its
//! renewal loop stops the process before the lease could expire. A writer that is *paused*
//! — a long GC or allocation stall, `SIGSTOP`, a frozen VM, a node that loses its network and
//! gets it back — runs no loop: when it resumes, its pipeline may commit before the loop
//! notices that the lease expired and a successor took it over, and two writers then commit to
//! one index, the failure a lease exists to prevent. So every write of this process to a
//! leased index first **confirms** the lease ([`confirm`], called by the write gate's
//! [`crate::write_gate::turn`] and before each table write inside a turn, and by the side
//! tables' writers):
//!
//! * **Proof by age.** The last renewal that landed wrote `expires = now + TTL` (wall clock).
//!   When less than a third of the TTL has passed since that body was made, the lease is still
//!   this process's for at least two thirds of the TTL: nobody can have taken it, and the
//!   write goes ahead without a request. The age is read from `CLOCK_BOOTTIME`, a monotonic
//!   clock that also counts time the machine spent suspended (`CLOCK_MONOTONIC` does not): a
//!   wall clock stepped by NTP, or a VM frozen and thawed, never makes an old proof look new.
//! * **Otherwise a renewal first**: a conditional put of the lease object with `If-Match` on
//!   the ETag this process wrote last. It lands only when nobody replaced or deleted the lease
//!   since; refused, the lease is read, and unless its body still names this holder (an
//!   earlier try of the same renewal that landed unanswered), the lease is **lost**: the write
//!   is refused with [`IndexError::LeaseLost`], nothing is committed, and [`WriterLease::lost`]
//!   fires, on which `ctxd serve` and `ctxd index` exit at once (code 75) without draining.
//!   A renewal that fails for another reason (the bucket unreachable) refuses the write too,
//!   and once two thirds of the TTL have passed without a proof the lease counts as lost.
//!
//! **The window that remains**: one table write. A check passes with at least two thirds of
//! the TTL left; a writer paused *inside* the write that follows (after its check, before
//! Lance's manifest put) for longer than that can still land that one write after a successor
//! took over. Lance's own commit is a put-if-absent of the next manifest version, so the two
//! writers' commits never overwrite each other: the successor's commit of the same version
//! wins and the stale one is retried by Lance on top of it (a rebase, as for any concurrent
//! commit) — one write, made from state read before the pause. Local indexes need no fence:
//! their lease is a `flock` that a paused process keeps, so no successor can start.
//!
//! [`WriterLease::lost`]: crate::lease::WriterLease::lost

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use tokio::sync::watch;

use crate::error::IndexError;

/// The lease object's contents.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct LeaseBody {
    pub(crate) holder: String,
    pub(crate) expires_unix_ms: u64,
    pub(crate) ttl_ms: u64,
}

impl LeaseBody {
    /// A body for `holder`, expiring `ttl_ms` from now by this host's wall clock.
    pub(crate) fn payload(holder: &str, ttl_ms: u64) -> PutPayload {
        let b = LeaseBody { holder: holder.to_string(), expires_unix_ms: now_ms() + ttl_ms, ttl_ms };
        PutPayload::from(serde_json::to_vec(&b).expect("lease body serializes"))
    }
}

/// Wall-clock milliseconds since the epoch (what lease bodies carry: hosts compare them).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Time since boot, suspended time included (`CLOCK_BOOTTIME`): how old a proof is.
pub(crate) fn boot_clock() -> Duration {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec this function owns.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut t) } != 0 {
        // Not on this kernel: the monotonic clock (it misses only suspended time).
        // SAFETY: as above.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) };
    }
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The last renewal of the lease that landed: its ETag and when its body was made.
struct Proof {
    e_tag: String,
    made_at: Duration,
}

/// What one renewal found.
pub(crate) enum Renewal {
    Renewed,
    /// Another writer holds the lease now (or it was deleted); the reason, for the user.
    Lost(String),
    /// The request failed; the lease may still be ours.
    Failed(object_store::Error),
}

/// A held lease object in a bucket: renewed by the lease's loop, confirmed before each write.
pub(crate) struct ObjectLease {
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) key: StorePath,
    pub(crate) holder: String,
    /// `s3://bucket/key`, for messages.
    pub(crate) lock: String,
    pub(crate) ttl_ms: u64,
    proof: tokio::sync::Mutex<Proof>,
    lost: watch::Sender<Option<String>>,
}

impl ObjectLease {
    /// The lease just taken with `e_tag`, its body made at `made_at` ([`boot_clock`]).
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        key: StorePath,
        holder: &str,
        lock: &str,
        ttl_ms: u64,
        (e_tag, made_at): (String, Duration),
    ) -> Arc<Self> {
        let (lost, _) = watch::channel(None);
        Arc::new(Self {
            store,
            key,
            holder: holder.to_string(),
            lock: lock.to_string(),
            ttl_ms,
            proof: tokio::sync::Mutex::new(Proof { e_tag, made_at }),
            lost,
        })
    }

    /// Fires with the reason once the lease is lost.
    pub(crate) fn lost(&self) -> watch::Receiver<Option<String>> {
        self.lost.subscribe()
    }

    /// The ETag this process wrote last.
    pub(crate) async fn e_tag(&self) -> String {
        self.proof.lock().await.e_tag.clone()
    }

    /// Records the loss (once) so that the holder stops.
    pub(crate) fn lose(&self, why: String) {
        self.lost.send_if_modified(|l| {
            let first = l.is_none();
            if first {
                *l = Some(why);
            }
            first
        });
    }

    /// After a failed renewal: once `age` (of the last proof) reaches two thirds of the TTL,
    /// the lease counts as lost, before it could expire, so that no second writer overlaps.
    pub(crate) fn lose_if_unrenewed(&self, age: Duration, e: &object_store::Error) -> bool {
        let old = age.as_millis() as u64 >= self.ttl_ms * 2 / 3;
        if old {
            self.lose(format!(
                "the writer lease {} could not be renewed for {} s (last error: {e}); stopping before it expires \
                 so that no second writer overlaps",
                self.lock,
                age.as_secs()
            ));
        }
        old
    }

    /// How long ago the body of the last renewal that landed was made.
    pub(crate) async fn age(&self) -> Duration {
        boot_clock().saturating_sub(self.proof.lock().await.made_at)
    }

    /// Renews the lease now (the loop's call).
    pub(crate) async fn renew(&self) -> Renewal {
        let mut proof = self.proof.lock().await;
        self.renew_locked(&mut proof).await
    }

    async fn renew_locked(&self, proof: &mut Proof) -> Renewal {
        let made = boot_clock();
        let mode = PutMode::Update(UpdateVersion { e_tag: Some(proof.e_tag.clone()), version: None });
        let payload = LeaseBody::payload(&self.holder, self.ttl_ms);
        match self.store.put_opts(&self.key, payload, PutOptions { mode, ..Default::default() }).await {
            Ok(r) => {
                *proof = Proof { e_tag: r.e_tag.unwrap_or_default(), made_at: made };
                metrics::counter!(crate::metrics::LEASE_RENEWALS_TOTAL).increment(1);
                Renewal::Renewed
            }
            // Refused: another writer replaced the lease — or an earlier try of this renewal
            // landed without an answer (a reset mid-answer: object_store's retry then meets the
            // new ETag). The body says which. Such a landed try proves nothing about when it was
            // made, so the proof keeps its age and the next check renews again.
            Err(object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. }) => {
                match own_lease(&self.store, &self.key, &self.holder).await {
                    Ok(Some(e_tag)) => {
                        tracing::warn!(lease = %self.lock, "a renewal of the writer lease landed unanswered; kept");
                        proof.e_tag = e_tag;
                        Renewal::Renewed
                    }
                    Ok(None) => Renewal::Lost(format!("the writer lease {} was taken by another writer", self.lock)),
                    Err(e) => self.failed(e),
                }
            }
            Err(e) => self.failed(e),
        }
    }

    /// A renewal that got no answer (counted; the lease may still be ours).
    fn failed(&self, e: object_store::Error) -> Renewal {
        metrics::counter!(crate::metrics::LEASE_RENEW_FAILURES_TOTAL).increment(1);
        Renewal::Failed(e)
    }

    /// Succeeds only while the lease is provably this process's (see the module docs); every
    /// refusal is counted.
    pub(crate) async fn confirm(&self, uri: &str) -> Result<(), IndexError> {
        let confirmed = self.prove(uri).await;
        if confirmed.is_err() {
            metrics::counter!(crate::metrics::LEASE_FENCED_WRITES_TOTAL).increment(1);
        }
        confirmed
    }

    async fn prove(&self, uri: &str) -> Result<(), IndexError> {
        let mut proof = self.proof.lock().await;
        let lost = |why: String| IndexError::LeaseLost { uri: uri.to_string(), lock: self.lock.clone(), why };
        if let Some(why) = self.lost.borrow().clone() {
            return Err(lost(why));
        }
        let fresh = Duration::from_millis(self.ttl_ms / 3);
        // Twice at most: a landed-unanswered renewal keeps the old proof, the next one refreshes it.
        for _ in 0..2 {
            if boot_clock().saturating_sub(proof.made_at) < fresh {
                return Ok(());
            }
            match self.renew_locked(&mut proof).await {
                Renewal::Renewed => {}
                Renewal::Lost(why) => {
                    self.lose(why.clone());
                    return Err(lost(why));
                }
                Renewal::Failed(e) => {
                    self.lose_if_unrenewed(boot_clock().saturating_sub(proof.made_at), &e);
                    return Err(IndexError::Lease {
                        uri: uri.to_string(),
                        message: format!(
                            "confirming the lease {} before a write failed ({e}); nothing was written — check that \
                             the bucket is reachable (the write is tried again later)",
                            self.lock
                        ),
                    });
                }
            }
        }
        Err(IndexError::Lease {
            uri: uri.to_string(),
            message: format!("the lease {} could not be confirmed before a write; nothing was written", self.lock),
        })
    }
}

/// The ETag of the lease at `key` when its body names `holder` (this process wrote it last),
/// `None` when it is gone or another writer's.
pub(crate) async fn own_lease(
    store: &Arc<dyn ObjectStore>,
    key: &StorePath,
    holder: &str,
) -> Result<Option<String>, object_store::Error> {
    let found = match store.get(key).await {
        Err(object_store::Error::NotFound { .. }) => return Ok(None),
        found => found?,
    };
    let e_tag = found.meta.e_tag.clone().unwrap_or_default();
    let bytes = found.bytes().await?;
    Ok(serde_json::from_slice::<LeaseBody>(&bytes).ok().filter(|b| b.holder == holder).map(|_| e_tag))
}

/// The leases this process holds on indexes in buckets, by index URI.
static FENCES: LazyLock<Mutex<HashMap<String, Arc<ObjectLease>>>> = LazyLock::new(Default::default);

fn key_of(uri: &str) -> String {
    uri.trim_end_matches('/').to_string()
}

/// Every write of this process to `uri` confirms `lease` first, until [`unregister`].
pub(crate) fn register(uri: &str, lease: Arc<ObjectLease>) {
    FENCES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(key_of(uri), lease);
}

/// Writes to `uri` no longer confirm `lease` (it was released; a newer lease of this process
/// on the same index stays).
pub(crate) fn unregister(uri: &str, lease: &Arc<ObjectLease>) {
    let mut fences = FENCES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if fences.get(&key_of(uri)).is_some_and(|held| Arc::ptr_eq(held, lease)) {
        fences.remove(&key_of(uri));
    }
}

/// Confirms the lease this process holds on `uri` before a write (nothing to do for an index
/// whose lease is a local lock, or that this process does not lease: readers never write, and
/// `ctxd reembed` writes tables of its own).
pub(crate) async fn confirm(uri: &str) -> Result<(), IndexError> {
    let lease = FENCES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key_of(uri)).cloned();
    match lease {
        Some(lease) => lease.confirm(uri).await,
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Index;
    use crate::writer::CommitBatch;

    const TTL_MS: u64 = 15_000;

    /// A lease of `holder` at `key` in `store`, written now; its proof made `age` ago.
    async fn held(store: &Arc<dyn ObjectStore>, key: &StorePath, holder: &str, age: Duration) -> Arc<ObjectLease> {
        let put = store.put(key, LeaseBody::payload(holder, TTL_MS)).await.unwrap();
        let proof = (put.e_tag.unwrap_or_default(), boot_clock().saturating_sub(age));
        ObjectLease::new(store.clone(), key.clone(), holder, "s3://b/idx/_ctxd/writer.lease", TTL_MS, proof)
    }

    fn in_memory() -> (Arc<dyn ObjectStore>, StorePath) {
        (Arc::new(object_store::memory::InMemory::new()), StorePath::from("idx/_ctxd/writer.lease"))
    }

    #[tokio::test]
    async fn a_lease_is_ours_only_while_its_body_names_this_holder() {
        let (store, key) = in_memory();
        assert_eq!(own_lease(&store, &key, "me").await.unwrap(), None, "no lease: not ours");
        let put = store.put(&key, LeaseBody::payload("me", TTL_MS)).await.unwrap();
        assert_eq!(own_lease(&store, &key, "me").await.unwrap(), put.e_tag, "our renewal that landed unanswered");
        store.put(&key, LeaseBody::payload("another writer", TTL_MS)).await.unwrap();
        assert_eq!(own_lease(&store, &key, "me").await.unwrap(), None, "replaced by another writer");
        store.put(&key, PutPayload::from_static(b"not json")).await.unwrap();
        assert_eq!(own_lease(&store, &key, "me").await.unwrap(), None, "unreadable: not ours");
    }

    #[tokio::test]
    async fn a_fresh_proof_needs_no_request_and_an_old_one_renews_first() {
        let (store, key) = in_memory();
        let lease = held(&store, &key, "me", Duration::ZERO).await;
        let first = lease.e_tag().await;
        // Fresh: confirmed without a request — even with the object gone, nothing is asked.
        store.delete(&key).await.unwrap();
        lease.confirm("s3://b/idx").await.expect("a proof under a third of the TTL old");
        // Old (half the TTL): a conditional put first, which lands on our own lease.
        let lease = held(&store, &key, "me", Duration::from_millis(TTL_MS / 2)).await;
        let before = lease.e_tag().await;
        lease.confirm("s3://b/idx").await.expect("our lease, renewed");
        assert_ne!(lease.e_tag().await, before, "the confirmation renewed the lease");
        assert!(lease.age().await < Duration::from_secs(1), "and its proof is new");
        assert_ne!(first, String::new());
    }

    #[tokio::test]
    async fn a_writer_whose_lease_was_taken_is_refused_and_told_to_stop() {
        let (store, key) = in_memory();
        // Paused past the TTL: its proof is older than the TTL, and a successor took the lease.
        let lease = held(&store, &key, "paused writer", Duration::from_millis(TTL_MS + 1000)).await;
        store.put(&key, LeaseBody::payload("successor", TTL_MS)).await.unwrap();
        let lost = lease.lost();
        let err = lease.confirm("s3://b/idx").await.expect_err("the lease is the successor's");
        assert!(matches!(err, IndexError::LeaseLost { .. }), "{err}");
        assert!(err.to_string().contains("taken by another writer"), "{err}");
        assert!(lost.borrow().is_some(), "the holder is told to stop");
        // The successor's lease is untouched, and every later write is refused at once.
        assert!(own_lease(&store, &key, "successor").await.unwrap().is_some());
        assert!(matches!(lease.confirm("s3://b/idx").await, Err(IndexError::LeaseLost { .. })));
    }

    #[tokio::test]
    async fn a_commit_to_a_fenced_index_is_refused_once_the_lease_is_lost() {
        let tmp = tempfile::tempdir().unwrap();
        let uri = tmp.path().join("db").to_string_lossy().into_owned();
        let index = Index::open_or_create(&uri, "m", 8).await.unwrap();
        let (store, key) = in_memory();
        let lease = held(&store, &key, "paused writer", Duration::from_millis(TTL_MS + 1000)).await;
        register(&format!("{uri}/"), lease.clone());
        let batch = |i| CommitBatch { rows: vec![crate::testing::row(i)], ..Default::default() };
        index.writes().commit(batch(1)).await.expect("the lease is still ours: renewed, then committed");
        let version = index.version().await.unwrap();
        // A successor takes over while this writer's proof ages past the TTL.
        store.put(&key, LeaseBody::payload("successor", TTL_MS)).await.unwrap();
        lease.proof.lock().await.made_at = boot_clock().saturating_sub(Duration::from_millis(TTL_MS + 1000));
        let err = index.writes().commit(batch(2)).await.expect_err("fenced");
        assert!(matches!(err, IndexError::LeaseLost { .. }), "{err}");
        assert_eq!(index.version().await.unwrap(), version, "nothing was committed");
        unregister(&uri, &lease);
        index.writes().commit(batch(3)).await.expect("unfenced again once the lease is released");
    }
}
