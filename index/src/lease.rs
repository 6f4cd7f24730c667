//! The writer lease: at most one process writes an index at a time.
//!
//! LanceDB commits are atomic, but two processes that both run ctxd's pipeline on one index
//! (a daemon and a `ctxd index`, two writer pods) would each reconcile, delete and re-add
//! the other's files. Every writing process therefore holds the index's **writer lease**
//! for as long as it runs; a second one is refused with [`IndexError::Locked`], which names
//! the holder (its command, pid, host and start time) and the lock.
//!
//! * **Local index** (a directory): an exclusive `flock` on `<db>/.ctxd-writer.lock`. The
//!   kernel drops it when the process dies, even by `kill -9`, so a restarted daemon never
//!   waits. The file's text names the holder (it is rewritten by each new holder).
//! * **Index in a bucket** (`s3://bucket/prefix`): the object `<prefix>/_ctxd/writer.lease`,
//!   `{holder, expires_unix_ms, ttl_ms}`, written with S3 conditional puts: created with
//!   `If-None-Match: *`, renewed every third of its TTL with `If-Match: <its ETag>`. A
//!   contender finding a lease that has not expired is refused; one finding an expired lease
//!   (its holder died or lost the bucket) replaces it with `If-Match` on the ETag it read, so
//!   of two contenders exactly one wins. A holder that cannot renew (the bucket unreachable
//!   for two thirds of the TTL) or finds its lease replaced reports it through
//!   [`WriterLease::lost`] *before* the lease could have expired: the daemon then stops at
//!   once, so two writers never overlap. A renewal refused for a stale ETag reads the lease
//!   first: still under this process's holder name, it is an earlier try of the same renewal
//!   that landed without an answer (a connection reset mid-answer), and the holder keeps it.
//!   Expiry compares wall clocks of hosts: keep them in NTP sync (skew must stay well under
//!   the TTL). A holder that was paused (SIGSTOP, a frozen VM) runs no renewal: every write it
//!   makes confirms the lease first ([`crate::fence`]), so it commits nothing once a successor
//!   took over.
//!
//! What the lease covers: every process that runs the indexing pipeline on the index —
//! `ctxd serve` (roles `both` and `writer`), `ctxd index`, the MCP `check_index` refresh.
//! Not covered, because they write tables of their own: `ctxd reembed` (it fills
//! `chunks__<model>` and switches through the `active_model` table in one commit), and
//! readers (`ctxd serve --role reader`, `ctxd search`, …), which never write.

use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::path::Path as StorePath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion};
use tokio::sync::watch;

use crate::error::IndexError;
use crate::fence::{boot_clock, now_ms, LeaseBody, ObjectLease, Renewal};

/// Name of the lock file in a local index directory.
pub const LOCK_FILE: &str = ".ctxd-writer.lock";
/// Key of the lease object under an object-store index's prefix.
pub const LEASE_KEY: &str = "_ctxd/writer.lease";

/// This machine's name, as holders record it.
pub fn this_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_else(|_| "unknown host".into())
}

/// Who this process is, for the other writer's error message: `what (pid N on HOST, since T)`.
pub fn holder_name(what: &str) -> String {
    let since = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    format!("{what} (pid {} on {}, since {since})", std::process::id(), this_host())
}

/// The pid and host a [`holder_name`] names, when it is one.
pub fn holder_pid_host(holder: &str) -> Option<(u32, &str)> {
    let rest = holder.split("(pid ").nth(1)?;
    let (pid, rest) = rest.split_once(" on ")?;
    Some((pid.parse().ok()?, rest.split(", since ").next()?))
}

/// A held writer lease; released when dropped (a bucket lease is deleted by [`WriterLease::release`]).
pub struct WriterLease {
    lock: String,
    held: Held,
    lost: watch::Receiver<Option<String>>,
}

enum Held {
    /// The open, flock-ed lock file (closing it unlocks).
    /// `created`: the index directory, when taking the lock created it (removed again on drop
    /// if nothing but the lock file was written: a writer that failed early leaves no index).
    Local { _file: std::fs::File, created: Option<PathBuf> },
    /// The renewal task, and the lease it renews (which every write confirms first:
    /// [`crate::fence`]), registered as the fence of the index `uri`.
    Object { renew: tokio::task::JoinHandle<()>, lease: Arc<ObjectLease>, uri: String },
}

impl WriterLease {
    /// Takes the writer lease of the index at `uri` for `holder` (see [`holder_name`]); `ttl`
    /// is the expiry of a bucket lease (a local lock needs none).
    pub async fn acquire(uri: &str, holder: &str, ttl: Duration) -> Result<Self, IndexError> {
        match uri.split_once("://") {
            None => Self::local(uri, holder),
            Some(("file", path)) => Self::local(path, holder),
            Some(("s3", rest)) => Self::object(uri, rest, holder, ttl).await,
            Some((scheme, _)) => Err(lease_error(
                uri,
                format!("no writer lease for {scheme}:// indexes (s3:// and local directories have one); keep one writer by hand"),
            )),
        }
    }

    /// What is locked: the lock file or the lease object.
    pub fn lock(&self) -> &str {
        &self.lock
    }

    /// Fires with a reason when the lease was lost (replaced by another writer, or not
    /// renewed in time); the holder must stop writing at once. A local lock is never lost.
    pub fn lost(&self) -> watch::Receiver<Option<String>> {
        self.lost.clone()
    }

    /// Gives the lease back: a successor starts at once instead of waiting for the expiry.
    pub async fn release(mut self) {
        if let Held::Object { renew, lease, uri } = &mut self.held {
            // Stop the renewal and wait until it has: aborted in the middle of a renewal, its put
            // may still land, with an ETag we never heard of.
            renew.abort();
            let _ = (&mut *renew).await;
            crate::fence::unregister(uri, lease);
            // Only our own lease: a successor's (after a loss) is left alone. Ours carries the
            // ETag we last wrote, or our holder line (a renewal that landed as it was aborted).
            let ours = lease.e_tag().await;
            let Ok(found) = lease.store.get(&lease.key).await else { return };
            let same_etag = found.meta.e_tag.as_deref() == Some(ours.as_str());
            let same_holder = match found.bytes().await {
                Ok(bytes) => serde_json::from_slice::<LeaseBody>(&bytes).is_ok_and(|b| b.holder == lease.holder),
                Err(_) => false,
            };
            if same_etag || same_holder {
                if let Err(e) = lease.store.delete(&lease.key).await {
                    tracing::warn!(lease = %self.lock, "releasing the writer lease: {e}");
                }
            }
        }
    }

    fn local(dir: &str, holder: &str) -> Result<Self, IndexError> {
        let dir = PathBuf::from(dir);
        let path = dir.join(LOCK_FILE);
        let lock = path.display().to_string();
        let io = |e: std::io::Error| lease_error(&dir.display().to_string(), format!("lock file {lock}: {e}"));
        let created = (!dir.exists()).then(|| dir.clone());
        std::fs::create_dir_all(&dir).map_err(io)?;
        let mut file =
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        // SAFETY: flock on a descriptor this function owns; no memory is shared.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io(err));
            }
            let mut other = String::new();
            let _ = file.read_to_string(&mut other);
            let other = if other.trim().is_empty() { "another process".to_string() } else { other.trim().to_string() };
            return Err(IndexError::Locked {
                uri: dir.display().to_string(),
                holder: other,
                lock,
                detail: String::new(),
            });
        }
        file.set_len(0).and_then(|_| file.rewind()).and_then(|_| writeln!(file, "{holder}")).map_err(io)?;
        let (_tx, lost) = watch::channel(None);
        Ok(Self { lock, held: Held::Local { _file: file, created }, lost })
    }

    async fn object(uri: &str, rest: &str, holder: &str, ttl: Duration) -> Result<Self, IndexError> {
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let store: Arc<dyn ObjectStore> = Arc::new(
            object_store::aws::AmazonS3Builder::from_env()
                .with_bucket_name(bucket)
                .build()
                .map_err(|e| lease_error(uri, format!("connecting to bucket {bucket}: {e}")))?,
        );
        let key = StorePath::from(format!("{}/{LEASE_KEY}", prefix.trim_end_matches('/')).trim_start_matches('/'));
        let lock = format!("s3://{bucket}/{key}");
        let ttl_ms = ttl.as_millis().max(1000) as u64;
        let store_err = |e: object_store::Error| lease_error(uri, format!("lease {lock}: {e}"));
        // A request the store did not answer (a reset, a timeout, an answer lost after the write
        // landed) is tried again; a lease found with this process's own holder name is the one
        // its unanswered write created (`benches/faults.py s3-faults`: one failed request used
        // to stop the writer at start).
        let mut attempt = 0;
        // A body an earlier, unanswered try wrote may be the one found: the proof counts from the
        // first try, never from a later one.
        let made = boot_clock();
        let first = loop {
            match take(&store, &key, holder, LeaseBody::payload(holder, ttl_ms), (uri, &lock)).await {
                Ok(e_tag) => break (e_tag, made),
                Err(Take::Again(e)) if attempt < TAKE_RETRIES_MS.len() => {
                    tracing::warn!(lease = %lock, "taking the writer lease failed (retrying): {e}");
                    tokio::time::sleep(Duration::from_millis(TAKE_RETRIES_MS[attempt])).await;
                    attempt += 1;
                }
                Err(Take::Again(e)) => return Err(store_err(e)),
                Err(Take::Refused(e)) => return Err(e),
            }
        };
        let lease = ObjectLease::new(store, key, holder, &lock, ttl_ms, first);
        let lost = lease.lost();
        crate::fence::register(uri, lease.clone());
        let renew = tokio::spawn(renew_every_third(lease.clone()));
        Ok(Self { lock, held: Held::Object { renew, lease, uri: uri.to_string() }, lost })
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        match self {
            Held::Object { renew, uri, lease } => {
                renew.abort();
                crate::fence::unregister(uri, lease);
            }
            Held::Local { created: Some(dir), .. } => {
                let only_lock = std::fs::read_dir(&*dir)
                    .map(|entries| entries.flatten().all(|e| e.file_name() == LOCK_FILE))
                    .unwrap_or(false);
                if only_lock {
                    let _ = std::fs::remove_file(dir.join(LOCK_FILE));
                    let _ = std::fs::remove_dir(&*dir);
                }
            }
            Held::Local { .. } => {}
        }
    }
}

/// The renewal loop: the lease renewed every third of its TTL until it is lost — taken by
/// another writer, or not renewed for two thirds of the TTL (by [`boot_clock`]).
async fn renew_every_third(lease: Arc<ObjectLease>) {
    let every = Duration::from_millis(lease.ttl_ms / 3);
    loop {
        tokio::time::sleep(every).await;
        match lease.renew().await {
            Renewal::Renewed => {}
            Renewal::Lost(why) => return lease.lose(why),
            Renewal::Failed(e) => {
                tracing::warn!(lease = %lease.lock, "renewing the writer lease failed (retrying): {e}");
                if lease.lose_if_unrenewed(lease.age().await, &e) {
                    return;
                }
            }
        }
    }
}

/// Pauses before each new try of taking the lease after a request went unanswered.
const TAKE_RETRIES_MS: [u64; 4] = [200, 500, 1000, 2000];

/// Why one try of taking the lease failed: a request went unanswered (try again), or the lease
/// is another writer's.
enum Take {
    Again(object_store::Error),
    Refused(IndexError),
}

/// One try of taking the lease at `key` for `holder` (`where_` names the index and the lease for
/// errors): created when absent, replaced when expired or unreadable, kept when it is already
/// `holder`'s (a write of an earlier try whose answer was lost). Returns its e-tag.
async fn take(
    store: &Arc<dyn ObjectStore>,
    key: &StorePath,
    holder: &str,
    payload: PutPayload,
    (uri, lock): (&str, &str),
) -> Result<String, Take> {
    let mode = match store.get(key).await {
        Err(object_store::Error::NotFound { .. }) => PutMode::Create,
        Err(e) => return Err(Take::Again(e)),
        Ok(found) => {
            let version = UpdateVersion { e_tag: found.meta.e_tag.clone(), version: found.meta.version.clone() };
            let bytes = found.bytes().await.map_err(Take::Again)?;
            match serde_json::from_slice::<LeaseBody>(&bytes) {
                Ok(own) if own.holder == holder => return Ok(version.e_tag.unwrap_or_default()),
                Ok(other) if other.expires_unix_ms > now_ms() => {
                    let left = (other.expires_unix_ms - now_ms()).div_ceil(1000);
                    return Err(Take::Refused(IndexError::Locked {
                        uri: uri.to_string(),
                        holder: other.holder,
                        lock: lock.to_string(),
                        detail: format!(" (the lease expires in {left} s unless its holder renews it)"),
                    }));
                }
                Ok(other) => {
                    tracing::warn!(lease = %lock, previous = %other.holder, "taking over an expired writer lease")
                }
                Err(e) => tracing::warn!(lease = %lock, "replacing an unreadable writer lease: {e}"),
            }
            PutMode::Update(version)
        }
    };
    match store.put_opts(key, payload, PutOptions { mode, ..Default::default() }).await {
        Ok(r) => Ok(r.e_tag.unwrap_or_default()),
        Err(object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. }) => {
            Err(Take::Refused(IndexError::Locked {
                uri: uri.to_string(),
                holder: "another writer that took the lease at the same moment".into(),
                lock: lock.to_string(),
                detail: String::new(),
            }))
        }
        Err(e) => Err(Take::Again(e)),
    }
}

fn lease_error(uri: &str, message: String) -> IndexError {
    IndexError::Lease { uri: uri.to_string(), message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_holder_name_gives_back_its_pid_and_host() {
        let name = holder_name("ctxd serve");
        assert_eq!(holder_pid_host(&name), Some((std::process::id(), this_host().as_str())));
        assert_eq!(
            holder_pid_host("ctxd index (pid 12 on build-3, since 2026-11-27T01:00:00Z)"),
            Some((12, "build-3"))
        );
        assert_eq!(holder_pid_host(""), None);
        assert_eq!(holder_pid_host("ctxd index (pid x on h, since t)"), None);
    }

    #[tokio::test]
    async fn a_second_local_writer_is_refused_with_the_holder_named_until_the_first_lets_go() {
        let tmp = tempfile::tempdir().unwrap();
        let db = tmp.path().join("db");
        let uri = db.to_string_lossy().into_owned();
        let first = WriterLease::acquire(&uri, &holder_name("ctxd serve"), Duration::from_secs(15)).await.unwrap();
        assert!(first.lock().ends_with(LOCK_FILE));
        let err = WriterLease::acquire(&uri, "ctxd index", Duration::from_secs(15)).await.err().expect("locked");
        let text = err.to_string();
        assert!(text.contains("ctxd serve (pid") && text.contains(LOCK_FILE), "{text}");
        assert!(first.lost().borrow().is_none());
        first.release().await;
        let again = WriterLease::acquire(&uri, "ctxd index", Duration::from_secs(15)).await.unwrap();
        drop(again);
        assert!(WriterLease::acquire(&format!("gs://{uri}"), "x", Duration::from_secs(1)).await.is_err());
    }
}
