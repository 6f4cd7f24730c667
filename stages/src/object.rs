//! Object-storage sources: an `s3://bucket/prefix` watched by listing.
//!
//! S3 has no change feed that works everywhere (event notifications need a queue and a bucket
//! policy; S3-compatible servers differ), so the source **lists** the prefix on an interval and
//! diffs the listing — key → (ETag, size) — against the previous one:
//!
//! * a new key, or one whose ETag or size changed, is downloaded into a local **mirror**
//!   (streamed to a temporary file in 1 MiB pieces and renamed into place, never held in
//!   memory whole) and then flows through the pipeline like a local file. The load stage still
//!   compares content hashes, so an object rewritten with the same bytes costs one download and
//!   no embedding;
//! * a key gone from the listing is deleted from the mirror and reported removed.
//!
//! The last listing is persisted in the mirror (`.ctxd-objects.json`), so after downtime only
//! the objects that changed meanwhile are downloaded again; a start-up pass nevertheless reports
//! every listed object ([`ObjectSource::poll`] with `all`) so the caller can reconcile the index
//! against the bucket (indexed paths missing from the listing are removed).
//!
//! Keys are filtered like local paths ([`crate::skip::classify_name`]: binaries, secrets) and
//! keys with `..` or empty segments are refused, so nothing is written outside the mirror.
//! Credentials and endpoint come from the usual variables: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL` and
//! `AWS_ALLOW_HTTP=true` for a plain-HTTP endpoint such as a local MinIO or moto.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectMeta, ObjectStore, ObjectStoreExt};
use tokio::io::AsyncWriteExt;

use ctxd_index::source_objects::ObjectVersion;

use crate::object_events::{later, EventChange, ObjectEvent};

use crate::metrics as m;
use crate::{error::StageError, SourceFile};

/// Name of the persisted listing inside the mirror.
const MANIFEST: &str = ".ctxd-objects.json";

/// A parsed `s3://bucket/prefix` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectUri {
    pub bucket: String,
    /// Key prefix without leading or trailing `/` (empty for the whole bucket).
    pub prefix: String,
}

impl ObjectUri {
    /// Parses `s3://bucket[/prefix]` (or `s3a://`); `None` for anything else.
    pub fn parse(uri: &str) -> Option<Self> {
        let rest = uri.strip_prefix("s3://").or_else(|| uri.strip_prefix("s3a://"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return None;
        }
        Some(Self { bucket: bucket.to_string(), prefix: prefix.trim_matches('/').to_string() })
    }

    /// True when `uri` names an object store rather than a local path.
    pub fn is_object_uri(uri: &str) -> bool {
        Self::parse(uri).is_some()
    }
}

impl std::fmt::Display for ObjectUri {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "s3://{}", self.bucket)
        } else {
            write!(f, "s3://{}/{}", self.bucket, self.prefix)
        }
    }
}

/// A listed object's version as the mirror knows it: downloaded, or (`unmirrored`) indexed by a
/// sharded build's shard on another machine and never downloaded here ([`ObjectSource::seed`]).
/// The manifest stores these by key (`{"etag", "size"}`, plus `"unmirrored": true` where set).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct Known {
    #[serde(flatten)]
    version: ObjectVersion,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    unmirrored: bool,
}

/// One entry of a listing diff.
#[derive(Debug)]
pub enum ObjectChange {
    /// New or changed: download it with [`ObjectSource::fetch`].
    Fetch(Listed),
    /// Listed and identical to the mirrored copy (reported only by a full poll).
    Unchanged(SourceFile),
    /// Listed and identical to what a sharded build indexed, with no mirrored copy (reported
    /// only by a full poll): indexed when the index holds its path, else to be fetched.
    Indexed(Listed),
    /// Gone from the bucket (relative path); already deleted from the mirror.
    Removed(String),
}

/// A listed object that needs downloading.
#[derive(Debug, Clone)]
pub struct Listed {
    pub rel: String,
    location: ObjectPath,
    version: ObjectVersion,
    /// When the object was last written (for the freshness metric).
    pub modified: SystemTime,
}

/// An `s3://` prefix mirrored to a local directory.
pub struct ObjectSource {
    store: Arc<dyn ObjectStore>,
    uri: ObjectUri,
    mirror: PathBuf,
    /// Relative paths (under the prefix) never listed, e.g. an index stored in the same bucket.
    exclude: Vec<String>,
    max_bytes: u64,
    known: HashMap<String, Known>,
    /// The source's include/exclude globs and the prefix of its stored paths.
    select: crate::select::Selector,
    /// The sequencer of the last event applied per key ([`ObjectSource::apply_event`]).
    sequencers: HashMap<String, String>,
}

impl ObjectSource {
    /// Connects to `uri` with credentials from the environment; `mirror` is created if needed.
    pub fn open(uri: &str, mirror: PathBuf, max_bytes: u64) -> Result<Self, StageError> {
        let parsed = ObjectUri::parse(uri).ok_or_else(|| StageError::NotObjectUri { uri: uri.to_string() })?;
        let store = AmazonS3Builder::from_env()
            .with_bucket_name(&parsed.bucket)
            .build()
            .map_err(|e| StageError::Object { uri: uri.to_string(), source: e.into() })?;
        Self::with_store(parsed, Arc::new(store), mirror, max_bytes)
    }

    /// Like [`ObjectSource::open`] with a given store (any `object_store` backend).
    pub fn with_store(
        uri: ObjectUri,
        store: Arc<dyn ObjectStore>,
        mirror: PathBuf,
        max_bytes: u64,
    ) -> Result<Self, StageError> {
        std::fs::create_dir_all(&mirror).map_err(|source| StageError::Read { path: mirror.clone(), source })?;
        let known = std::fs::read(mirror.join(MANIFEST))
            .ok()
            .and_then(|b| serde_json::from_slice::<HashMap<String, Known>>(&b).ok())
            .unwrap_or_default();
        let select = Default::default();
        Ok(Self { store, uri, mirror, exclude: Vec::new(), max_bytes, known, select, sequencers: HashMap::new() })
    }

    /// Lists only keys `select` matches, reported under their stored paths
    /// ([`crate::select::Selector::qualify`]; the mirror keeps the keys' own paths).
    pub fn with_selector(mut self, select: crate::select::Selector) -> Self {
        self.select = select;
        self
    }

    /// The same source mirrored into `mirror` instead (a shard of a sharded build keeps a
    /// mirror and listing of its own); created if needed.
    pub fn with_mirror(self, mirror: PathBuf) -> Result<Self, StageError> {
        Self::with_store(self.uri, self.store, mirror, self.max_bytes).map(|s| Self {
            exclude: self.exclude,
            select: self.select,
            sequencers: self.sequencers,
            ..s
        })
    }

    /// Takes the objects a sharded build indexed (`versions`, by key) as known without a mirrored
    /// copy, those whose stored path `indexed` says the index holds and that this mirror does not
    /// know yet: a full poll reports them [`ObjectChange::Indexed`] while they are unchanged.
    /// Returns how many were taken.
    pub fn seed(&mut self, versions: HashMap<String, ObjectVersion>, indexed: impl Fn(&str) -> bool) -> usize {
        let mut taken = 0;
        for (rel, version) in versions {
            if !self.known.contains_key(&rel) && indexed(&self.select.qualify(&rel)) {
                self.known.insert(rel, Known { version, unmirrored: true });
                taken += 1;
            }
        }
        taken
    }

    /// The objects this mirror downloaded, with their versions (what a shard records).
    pub fn downloaded(&self) -> impl Iterator<Item = (&str, &ObjectVersion)> {
        self.known.iter().filter(|(_, k)| !k.unmirrored).map(|(rel, k)| (rel.as_str(), &k.version))
    }

    /// The source's include/exclude globs and path prefix.
    pub fn selector(&self) -> &crate::select::Selector {
        &self.select
    }

    /// The stored path of a listed object.
    pub fn qualify(&self, rel: &str) -> String {
        self.select.qualify(rel)
    }

    /// Never lists keys under `rel` (relative to the prefix): the index's own files when it
    /// lives inside the watched prefix.
    pub fn exclude(mut self, rel: &str) -> Self {
        let rel = rel.trim_matches('/');
        if !rel.is_empty() {
            self.exclude.push(rel.to_string());
        }
        self
    }

    /// The watched URI.
    pub fn uri(&self) -> &ObjectUri {
        &self.uri
    }

    /// The bucket and prefix its event notifications are read for ([`crate::object_events`]).
    pub fn watched(&self) -> crate::object_events::Watched {
        crate::object_events::Watched { bucket: self.uri.bucket.clone(), prefix: self.uri.prefix.clone() }
    }

    /// The local mirror directory.
    pub fn mirror(&self) -> &Path {
        &self.mirror
    }

    /// Lists the prefix and diffs it against the last listing. With `all`, unchanged objects
    /// are reported too (as [`ObjectChange::Unchanged`]) so a start-up pass sees everything.
    /// Removed objects are deleted from the mirror before this returns.
    pub async fn poll(&mut self, all: bool) -> Result<Vec<ObjectChange>, StageError> {
        let err = |e: object_store::Error| StageError::Object { uri: self.uri.to_string(), source: e.into() };
        let prefix = (!self.uri.prefix.is_empty()).then(|| ObjectPath::from(self.uri.prefix.as_str()));
        let mut listing = self.store.list(prefix.as_ref());
        let mut seen: HashMap<String, Listed> = HashMap::new();
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(err)?;
            if let Some(listed) = self.accept(&meta, "listing") {
                seen.insert(listed.rel.clone(), listed);
            }
        }
        metrics::counter!(m::OBJECT_LISTINGS_TOTAL).increment(1);
        let mut changes = Vec::new();
        let mut gone: Vec<String> = self.known.keys().filter(|k| !seen.contains_key(*k)).cloned().collect();
        gone.sort();
        for rel in gone {
            self.known.remove(&rel);
            let _ = std::fs::remove_file(self.mirror.join(&rel));
            changes.push(ObjectChange::Removed(self.select.qualify(&rel)));
        }
        let mut listed: Vec<Listed> = seen.into_values().collect();
        listed.sort_by(|a, b| a.rel.cmp(&b.rel));
        for l in listed {
            let local = self.mirror.join(&l.rel);
            match self.known.get(&l.rel).filter(|k| k.version == l.version) {
                Some(_) if local.is_file() => {
                    if all {
                        let file = SourceFile { rel: self.select.qualify(&l.rel), abs: local };
                        changes.push(ObjectChange::Unchanged(file));
                    }
                }
                Some(k) if k.unmirrored => {
                    if all {
                        changes.push(ObjectChange::Indexed(l));
                    }
                }
                _ => changes.push(ObjectChange::Fetch(l)),
            }
        }
        self.save_manifest();
        Ok(changes)
    }

    /// Downloads one listed object into the mirror (streamed; atomic rename) and records it.
    /// `Ok(None)` when the object vanished since it was listed.
    pub async fn fetch(&mut self, listed: &Listed) -> Result<Option<SourceFile>, StageError> {
        let Some((file, version)) = self.download(listed).await? else { return Ok(None) };
        self.record(&listed.rel, version);
        Ok(Some(file))
    }

    /// Records that the mirror holds `version` of the object at `rel` (after [`ObjectSource::download`]).
    pub fn record(&mut self, rel: &str, version: ObjectVersion) {
        self.known.insert(rel.to_string(), Known { version, unmirrored: false });
    }

    /// [`ObjectSource::fetch`] without recording what it got, so that many run at once: the file
    /// and the version downloaded, `None` when the object vanished since it was listed.
    pub async fn download(&self, listed: &Listed) -> Result<Option<(SourceFile, ObjectVersion)>, StageError> {
        let local = self.mirror.join(&listed.rel);
        let io = |source: std::io::Error| StageError::Read { path: local.clone(), source };
        if let Some(dir) = local.parent() {
            tokio::fs::create_dir_all(dir).await.map_err(io)?;
        }
        let obj_err = |e: object_store::Error| StageError::Object {
            uri: format!("s3://{}/{}", self.uri.bucket, listed.location),
            source: e.into(),
        };
        let got = match self.store.get(&listed.location).await {
            Ok(g) => g,
            Err(object_store::Error::NotFound { .. }) => {
                metrics::counter!(m::OBJECT_VANISHED_TOTAL).increment(1);
                return Ok(None);
            }
            Err(e) => return Err(obj_err(e)),
        };
        let tmp = local
            .with_file_name(format!(".{}.ctxd-part", local.file_name().and_then(|n| n.to_str()).unwrap_or("object")));
        let mut out = tokio::fs::File::create(&tmp).await.map_err(io)?;
        // The version downloaded, which a late event may not name.
        let version = ObjectVersion { etag: got.meta.e_tag.clone(), size: got.meta.size };
        let mut body = got.into_stream();
        let mut bytes = 0u64;
        while let Some(piece) = body.next().await {
            let piece = match piece {
                Ok(p) => p,
                Err(e) => {
                    let _ = tokio::fs::remove_file(&tmp).await;
                    return Err(obj_err(e));
                }
            };
            bytes += piece.len() as u64;
            out.write_all(&piece).await.map_err(io)?;
        }
        out.flush().await.map_err(io)?;
        drop(out);
        tokio::fs::rename(&tmp, &local).await.map_err(io)?;
        metrics::counter!(m::OBJECT_DOWNLOADED_BYTES_TOTAL).increment(bytes);
        metrics::counter!(m::OBJECT_DOWNLOADS_TOTAL).increment(1);
        Ok(Some((SourceFile { rel: self.select.qualify(&listed.rel), abs: local }, version)))
    }

    /// What an event notification ([`crate::object_events`]) asks for, given what this mirror
    /// knows — the object to download, a removal, or nothing — and why (`applied`, `duplicate`:
    /// the version the mirror has, `stale`: older than an event already applied or than the
    /// bucket now, `ignored`: a key the source does not index).
    pub async fn apply_event(&mut self, ev: &ObjectEvent) -> Result<(Option<ObjectChange>, &'static str), StageError> {
        if let Some(seq) = &ev.sequencer {
            if self.sequencers.get(&ev.rel).is_some_and(|last| !later(seq, last)) {
                return Ok((None, "stale"));
            }
            self.sequencers.insert(ev.rel.clone(), seq.clone());
        }
        let key = match self.uri.prefix.is_empty() {
            true => ev.rel.clone(),
            false => format!("{}/{}", self.uri.prefix, ev.rel),
        };
        let location = ObjectPath::parse(&key).unwrap_or_else(|_| ObjectPath::from(key.as_str()));
        let EventChange::Created { etag, size } = &ev.change else {
            return self.removed(ev, &location).await;
        };
        let known = self.known.get(&ev.rel).map(|k| &k.version);
        let same = known.is_some_and(|k| {
            etag.is_some()
                && k.etag.as_deref().map(|e| e.trim_matches('"')) == etag.as_deref()
                && size.is_none_or(|s| s == k.size)
        });
        if same {
            return Ok((None, "duplicate"));
        }
        let meta = ObjectMeta {
            location,
            last_modified: chrono::Utc::now(),
            size: size.unwrap_or(0),
            e_tag: etag.as_ref().map(|e| format!("\"{e}\"")),
            version: None,
        };
        Ok(match self.accept(&meta, "event") {
            Some(listed) => (Some(ObjectChange::Fetch(listed)), "applied"),
            None => (None, "ignored"),
        })
    }

    /// A removal event: applied when the bucket no longer has the object (a `HEAD`); an object
    /// written again since is downloaded if the mirror lacks that version, else left alone.
    async fn removed(
        &mut self,
        ev: &ObjectEvent,
        location: &ObjectPath,
    ) -> Result<(Option<ObjectChange>, &'static str), StageError> {
        match self.store.head(location).await {
            Ok(meta) => Ok(match self.accept(&meta, "event") {
                Some(l) if self.known.get(&l.rel).is_none_or(|k| k.version != l.version) => {
                    (Some(ObjectChange::Fetch(l)), "applied")
                }
                _ => (None, "stale"),
            }),
            Err(object_store::Error::NotFound { .. }) => {
                self.known.remove(&ev.rel);
                let _ = std::fs::remove_file(self.mirror.join(&ev.rel));
                Ok((Some(ObjectChange::Removed(self.select.qualify(&ev.rel))), "applied"))
            }
            Err(e) => Err(StageError::Object { uri: format!("s3://{}/{location}", self.uri.bucket), source: e.into() }),
        }
    }

    /// Persists the listing state (best effort: losing it only costs re-downloads).
    pub fn save_manifest(&self) {
        let path = self.mirror.join(MANIFEST);
        let tmp = self.mirror.join(format!("{MANIFEST}.tmp"));
        let ok = serde_json::to_vec(&self.known)
            .ok()
            .is_some_and(|b| std::fs::write(&tmp, b).is_ok() && std::fs::rename(&tmp, &path).is_ok());
        if !ok {
            tracing::warn!("{}: could not save the object listing state", path.display());
        }
    }

    /// The relative path of a listed (or notified: `origin`) object, or `None` (counted) when it
    /// is not indexed.
    fn accept(&self, meta: &ObjectMeta, origin: &'static str) -> Option<Listed> {
        let key = meta.location.as_ref();
        let rel = if self.uri.prefix.is_empty() {
            key
        } else {
            key.strip_prefix(self.uri.prefix.as_str())?.strip_prefix('/')?
        };
        let skip = |reason: &'static str| {
            metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => reason).increment(1);
            None
        };
        if rel.is_empty() || rel.ends_with('/') {
            return None;
        }
        if self.exclude.iter().any(|x| rel == x || rel.strip_prefix(x.as_str()).is_some_and(|r| r.starts_with('/'))) {
            return None;
        }
        if !Path::new(rel).components().all(|c| matches!(c, Component::Normal(_))) {
            return skip("unsafe_key");
        }
        if !self.select.in_share(rel) {
            return None; // another shard's (a sharded build): not listed here, not a skip
        }
        if !self.select.matches(rel) {
            return skip("excluded");
        }
        if let Some(reason) = crate::skip::classify_name(Path::new(rel)) {
            return skip(reason.label());
        }
        if meta.size > self.max_bytes {
            return skip("too_large");
        }
        metrics::counter!(m::WATCH_FILES_TOTAL, "origin" => origin).increment(1);
        Some(Listed {
            rel: rel.to_string(),
            location: meta.location.clone(),
            version: ObjectVersion { etag: meta.e_tag.clone(), size: meta.size },
            modified: meta.last_modified.into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;
    use object_store::PutPayload;

    fn uri() -> ObjectUri {
        ObjectUri::parse("s3://bucket/docs").unwrap()
    }

    async fn put(store: &InMemory, key: &str, body: &str) {
        store.put(&ObjectPath::from(key), PutPayload::from(body.as_bytes().to_vec())).await.unwrap();
    }

    fn rels(changes: &[ObjectChange]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                ObjectChange::Fetch(l) => format!("fetch {}", l.rel),
                ObjectChange::Unchanged(f) => format!("same {}", f.rel),
                ObjectChange::Indexed(l) => format!("indexed {}", l.rel),
                ObjectChange::Removed(r) => format!("gone {r}"),
            })
            .collect()
    }

    #[test]
    fn parses_uris() {
        assert_eq!(ObjectUri::parse("s3://b/a/b/"), Some(ObjectUri { bucket: "b".into(), prefix: "a/b".into() }));
        assert_eq!(ObjectUri::parse("s3://b"), Some(ObjectUri { bucket: "b".into(), prefix: String::new() }));
        assert_eq!(ObjectUri::parse("/tmp/x"), None);
        assert_eq!(ObjectUri::parse("s3:///x"), None);
        assert_eq!(ObjectUri::parse("s3://b/p").unwrap().to_string(), "s3://b/p");
    }

    #[tokio::test]
    async fn listing_diff_downloads_only_what_changed_and_survives_a_restart() {
        let store = Arc::new(InMemory::new());
        put(&store, "docs/a.md", "# A\nalpha").await;
        put(&store, "docs/sub/b.rs", "fn b() {}").await;
        put(&store, "docs/img.png", "binary").await;
        put(&store, "docs/.env", "SECRET=1").await;
        put(&store, "other/c.md", "outside the prefix").await;
        put(&store, "docs/index/data/x.txt", "the index's own files").await;
        let mirror = tempfile::tempdir().unwrap();
        let mut src = ObjectSource::with_store(uri(), store.clone(), mirror.path().to_path_buf(), 1 << 20)
            .unwrap()
            .exclude("index");

        let first = src.poll(true).await.unwrap();
        assert_eq!(rels(&first), ["fetch a.md", "fetch sub/b.rs"]);
        for c in &first {
            if let ObjectChange::Fetch(l) = c {
                let f = src.fetch(l).await.unwrap().unwrap();
                assert!(f.abs.starts_with(mirror.path()));
            }
        }
        assert_eq!(std::fs::read_to_string(mirror.path().join("sub/b.rs")).unwrap(), "fn b() {}");
        assert!(rels(&src.poll(false).await.unwrap()).is_empty(), "nothing changed");

        put(&store, "docs/a.md", "# A\nalpha, edited").await;
        store.delete(&ObjectPath::from("docs/sub/b.rs")).await.unwrap();
        put(&store, "docs/c.txt", "new").await;
        let second = src.poll(false).await.unwrap();
        assert_eq!(rels(&second), ["gone sub/b.rs", "fetch a.md", "fetch c.txt"]);
        assert!(!mirror.path().join("sub/b.rs").exists(), "removed objects leave the mirror");
        for c in &second {
            if let ObjectChange::Fetch(l) = c {
                src.fetch(l).await.unwrap().unwrap();
            }
        }
        assert_eq!(std::fs::read_to_string(mirror.path().join("a.md")).unwrap(), "# A\nalpha, edited");

        // A restart reads the saved listing: a full pass re-downloads nothing.
        src.save_manifest();
        drop(src);
        let mut again = ObjectSource::with_store(uri(), store.clone(), mirror.path().to_path_buf(), 1 << 20)
            .unwrap()
            .exclude("index");
        assert_eq!(rels(&again.poll(true).await.unwrap()), ["same a.md", "same c.txt"]);
    }

    #[tokio::test]
    async fn objects_a_sharded_build_indexed_are_not_downloaded_while_unchanged() {
        let store = Arc::new(InMemory::new());
        put(&store, "docs/a.md", "alpha").await;
        put(&store, "docs/b.md", "beta").await;
        put(&store, "docs/c.md", "gamma").await;
        // A shard mirrors its share elsewhere; its downloads are what it records.
        let (shard_dir, mirror) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let select = crate::select::Selector::new("", &[], &[]).unwrap();
        let mut shard = ObjectSource::with_store(uri(), store.clone(), mirror.path().join("x"), 1 << 20)
            .unwrap()
            .with_selector(select.clone())
            .with_mirror(shard_dir.path().to_path_buf())
            .unwrap();
        for c in shard.poll(true).await.unwrap() {
            if let ObjectChange::Fetch(l) = c {
                shard.fetch(&l).await.unwrap();
            }
        }
        let recorded: HashMap<String, ObjectVersion> =
            shard.downloaded().map(|(rel, v)| (rel.to_string(), v.clone())).collect();
        assert_eq!(recorded.len(), 3);
        // The writer, on a mirror of its own: a.md and b.md are in the index, c.md is not.
        let mut writer = ObjectSource::with_store(uri(), store.clone(), mirror.path().to_path_buf(), 1 << 20)
            .unwrap()
            .with_selector(select);
        assert_eq!(writer.seed(recorded, |p| p != "c.md"), 2);
        put(&store, "docs/b.md", "beta, edited").await;
        assert_eq!(rels(&writer.poll(true).await.unwrap()), ["indexed a.md", "fetch b.md", "fetch c.md"]);
        // Kept across a restart (the manifest says which were never mirrored here).
        writer.save_manifest();
        let mut again = ObjectSource::with_store(uri(), store.clone(), mirror.path().to_path_buf(), 1 << 20).unwrap();
        assert_eq!(rels(&again.poll(true).await.unwrap()), ["indexed a.md", "fetch b.md", "fetch c.md"]);
        assert!(again.downloaded().next().is_none());
    }

    #[tokio::test]
    async fn events_apply_once_in_order_and_a_late_removal_keeps_a_rewritten_object() {
        use crate::object_events::{EventChange, ObjectEvent};
        let store = Arc::new(InMemory::new());
        put(&store, "docs/a.md", "alpha").await;
        let mirror = tempfile::tempdir().unwrap();
        let mut src = ObjectSource::with_store(uri(), store.clone(), mirror.path().to_path_buf(), 1 << 20).unwrap();
        let created = |etag: Option<&str>, seq: &str| ObjectEvent {
            rel: "a.md".into(),
            change: EventChange::Created { etag: etag.map(str::to_string), size: Some(5) },
            sequencer: Some(seq.into()),
        };
        let (change, outcome) = src.apply_event(&created(None, "02")).await.unwrap();
        assert_eq!(outcome, "applied");
        let Some(ObjectChange::Fetch(l)) = change else { panic!("a download") };
        src.fetch(&l).await.unwrap().unwrap();
        // The same version again (the ETag the download recorded): nothing to do.
        let etag = src.known["a.md"].version.etag.clone().unwrap();
        let again = created(Some(etag.trim_matches('"')), "03");
        assert_eq!(src.apply_event(&again).await.unwrap().1, "duplicate");
        // An event older than one applied: ignored.
        assert_eq!(src.apply_event(&created(Some("other"), "01")).await.unwrap().1, "stale");
        // A removal whose object is back (no sequencer: checked with a HEAD): kept.
        let removed = ObjectEvent { rel: "a.md".into(), change: EventChange::Removed, sequencer: None };
        let (change, outcome) = src.apply_event(&removed).await.unwrap();
        assert!(change.is_none() && outcome == "stale", "{change:?} {outcome}");
        // Gone for real: removed from the mirror and reported.
        store.delete(&ObjectPath::from("docs/a.md")).await.unwrap();
        let (change, _) = src.apply_event(&removed).await.unwrap();
        assert!(matches!(change, Some(ObjectChange::Removed(ref r)) if r == "a.md"), "{change:?}");
        assert!(!mirror.path().join("a.md").exists());
        // A key the source does not index (a secret's name) is ignored.
        let secret = ObjectEvent { rel: ".env".into(), ..created(Some("x"), "09") };
        let (change, outcome) = src.apply_event(&secret).await.unwrap();
        assert!(change.is_none() && outcome == "ignored", "{change:?} {outcome}");
    }

    #[tokio::test]
    async fn vanished_between_listing_and_download_is_not_an_error() {
        let store = Arc::new(InMemory::new());
        put(&store, "docs/a.md", "x").await;
        let mirror = tempfile::tempdir().unwrap();
        let mut src = ObjectSource::with_store(uri(), store.clone(), mirror.path().to_path_buf(), 1 << 20).unwrap();
        let changes = src.poll(true).await.unwrap();
        store.delete(&ObjectPath::from("docs/a.md")).await.unwrap();
        let ObjectChange::Fetch(l) = &changes[0] else { panic!("expected a fetch") };
        assert!(src.fetch(l).await.unwrap().is_none());
    }
}
