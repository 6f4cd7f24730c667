//! The watch stage: what files exist under a root, and what changed since.
//!
//! * [`Scanner::scan`] walks the root with the `ignore` crate (`.gitignore`, `.ignore`,
//!   `.git/info/exclude`, hidden files skipped), drops known binary extensions and secret
//!   files, never follows symlinks (so symlink loops cannot trap it), and reports unreadable
//!   directories as counted skips.
//! * [`EventWatcher`] follows `notify` events and debounces them: every path that saw events
//!   is reported once, after it has been quiet for the debounce window, as either changed
//!   (it is a file now) or removed (it is gone). Editor save patterns — write to a temp file and
//!   rename, truncate then write, bursts — collapse into one report for the final path.
//!   A late event for a file that still looks as it did when it was reported (same size, inode,
//!   modification and change times) is an echo of that change and is dropped ([`Reported`]), so
//!   an unchanged file is not read again nor counted as changed in answers' `changed_since`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::metrics as m;
use crate::select::Selector;
use crate::{error::StageError, SourceFile};

use crate::skip::classify_name;

/// Relative, `/`-separated form of `abs` under `root`.
pub fn rel_path(root: &Path, abs: &Path) -> Option<String> {
    let rel = abs.strip_prefix(root).ok()?;
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Walks a root and decides which paths are indexable.
#[derive(Clone)]
pub struct Scanner {
    root: PathBuf,
    excludes: Vec<PathBuf>,
    select: std::sync::Arc<Selector>,
}

impl Scanner {
    /// A scanner for `root` that never descends into any of `excludes` (e.g. the index itself).
    pub fn new(root: impl Into<PathBuf>, excludes: Vec<PathBuf>) -> Self {
        let root = root.into();
        let root = root.canonicalize().unwrap_or(root);
        let excludes = excludes.into_iter().map(|p| p.canonicalize().unwrap_or(p)).collect();
        Self { root, excludes, select: Default::default() }
    }

    /// The scanner of a source with a name and include/exclude globs: only files `select`
    /// matches are reported, under their stored path ([`Selector::qualify`]).
    pub fn with_selector(mut self, select: Selector) -> Self {
        self.select = std::sync::Arc::new(select);
        self
    }

    /// The source's selector.
    pub fn selector(&self) -> &Selector {
        &self.select
    }

    /// The (canonical) root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Walks the root, calling `emit` for each indexable file; stops early when `emit`
    /// returns false. Blocking: run it on a blocking thread. Returns the number of errors met
    /// (unreadable directories, broken entries), each also logged.
    pub fn scan(&self, mut emit: impl FnMut(SourceFile) -> bool) -> usize {
        let mut errors = 0;
        let excludes = self.excludes.clone();
        let walker = ignore::WalkBuilder::new(&self.root)
            .follow_links(false)
            .require_git(false)
            .filter_entry(move |e| !excludes.iter().any(|x| e.path().starts_with(x)))
            .build();
        for entry in walker {
            let entry = match entry {
                Ok(e) => e,
                Err(err) => {
                    errors += 1;
                    tracing::warn!("scan: {err}");
                    metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "unreadable").increment(1);
                    continue;
                }
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let abs = entry.path();
            if let Some(reason) = classify_name(abs) {
                metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => reason.label()).increment(1);
                continue;
            }
            let Some(rel) = rel_path(&self.root, abs) else { continue };
            if !self.select.in_share(&rel) {
                continue; // another shard's (a sharded build): not a skip
            }
            if !self.select.matches(&rel) {
                metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "excluded").increment(1);
                continue;
            }
            metrics::counter!(m::WATCH_FILES_TOTAL, "origin" => "scan").increment(1);
            if !emit(SourceFile { rel: self.select.qualify(&rel), abs: abs.to_path_buf() }) {
                break;
            }
        }
        errors
    }

    /// Builds an ignore matcher for event filtering from every `.gitignore`/`.ignore` under
    /// the root (each applied to its own directory) plus `.git/info/exclude`.
    pub fn ignore_matcher(&self) -> IgnoreMatcher {
        let mut matchers = Vec::new();
        // `.gitignore` files are hidden: walk hidden entries too, but never into `.git`.
        let walker = ignore::WalkBuilder::new(&self.root)
            .follow_links(false)
            .require_git(false)
            .hidden(false)
            .filter_entry(|e| e.file_name() != ".git")
            .build();
        for entry in walker.flatten() {
            let name = entry.file_name().to_string_lossy();
            if name == ".gitignore" || name == ".ignore" {
                let dir = entry.path().parent().unwrap_or(&self.root).to_path_buf();
                let mut b = GitignoreBuilder::new(&dir);
                b.add(entry.path());
                if let Ok(gi) = b.build() {
                    matchers.push((dir, gi));
                }
            }
        }
        let exclude = self.root.join(".git").join("info").join("exclude");
        if exclude.is_file() {
            let mut b = GitignoreBuilder::new(&self.root);
            b.add(exclude);
            if let Ok(gi) = b.build() {
                matchers.push((self.root.clone(), gi));
            }
        }
        IgnoreMatcher { root: self.root.clone(), excludes: self.excludes.clone(), matchers }
    }
}

/// Decides whether an event path is ignored (gitignore rules, hidden, excluded).
#[derive(Clone)]
pub struct IgnoreMatcher {
    root: PathBuf,
    excludes: Vec<PathBuf>,
    matchers: Vec<(PathBuf, Gitignore)>,
}

/// The path rule that keeps a path out of the index ([`IgnoreMatcher::rule_for`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRule {
    /// Inside an excluded folder (the index itself), or outside the root.
    Excluded,
    /// This dot-named part of the path.
    Hidden(String),
    /// A `.gitignore`/`.ignore`/exclude rule: the file it is written in and its pattern.
    Ignored { file: PathBuf, pattern: String },
}

impl IgnoreMatcher {
    /// True when `abs` must not be indexed.
    pub fn is_ignored(&self, abs: &Path, is_dir: bool) -> bool {
        self.rule_for(abs, is_dir).is_some()
    }

    /// The first path rule that keeps `abs` out of the index, in the order they apply; `None`
    /// when none does.
    pub fn rule_for(&self, abs: &Path, is_dir: bool) -> Option<PathRule> {
        if self.excludes.iter().any(|e| abs.starts_with(e)) {
            return Some(PathRule::Excluded);
        }
        let Ok(rel) = abs.strip_prefix(&self.root) else { return Some(PathRule::Excluded) };
        let hidden = rel.components().map(|c| c.as_os_str().to_string_lossy()).find(|c| c.starts_with('.'));
        if let Some(part) = hidden {
            return Some(PathRule::Hidden(part.into_owned()));
        }
        self.matchers.iter().filter(|(dir, _)| abs.starts_with(dir)).find_map(|(dir, gi)| {
            match gi.matched_path_or_any_parents(abs, is_dir) {
                ignore::Match::Ignore(glob) => {
                    let file = glob.from().map_or_else(|| dir.join(".gitignore"), Path::to_path_buf);
                    Some(PathRule::Ignored { file, pattern: glob.original().to_string() })
                }
                _ => None,
            }
        })
    }
}

/// A debounced change the watcher reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WatchEvent {
    /// The path is a file now (created or modified).
    Changed(SourceFile),
    /// The path (a file or a whole directory) is gone: `rel` is its relative path.
    Removed(String),
    /// The OS dropped events; everything must be rescanned.
    Rescan,
}

/// Follows filesystem events under a root and reports debounced [`WatchEvent`]s.
pub struct EventWatcher {
    _watcher: notify::RecommendedWatcher,
    rx: mpsc::Receiver<WatchEvent>,
}

impl EventWatcher {
    /// Starts watching `scanner`'s root recursively; events are quiet for `debounce` before
    /// they are reported.
    pub fn start(scanner: &Scanner, debounce: Duration) -> Result<Self, StageError> {
        let (raw_tx, mut raw_rx) = mpsc::channel::<(PathBuf, bool)>(4096);
        let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(event) => {
                let rescan = event.need_rescan();
                if rescan {
                    let _ = raw_tx.blocking_send((PathBuf::new(), true));
                }
                if matches!(event.kind, notify::EventKind::Access(_)) {
                    return;
                }
                for path in event.paths {
                    let _ = raw_tx.blocking_send((path, false));
                }
            }
            Err(err) => {
                tracing::warn!("watch: {err}");
                let _ = raw_tx.blocking_send((PathBuf::new(), true));
            }
        })
        .map_err(|e| StageError::Watch { path: scanner.root().to_path_buf(), source: e.into() })?;
        watcher
            .watch(scanner.root(), RecursiveMode::Recursive)
            .map_err(|e| StageError::Watch { path: scanner.root().to_path_buf(), source: e.into() })?;

        let (tx, rx) = mpsc::channel::<WatchEvent>(1024);
        let root = scanner.root().to_path_buf();
        let matcher = scanner.ignore_matcher();
        let select = scanner.select.clone();
        tokio::spawn(async move {
            let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
            let mut reported = Reported::default();
            let tick = (debounce / 4).max(Duration::from_millis(10));
            loop {
                let next = tokio::time::timeout(tick, raw_rx.recv()).await;
                match next {
                    Ok(Some((_, true))) => {
                        pending.clear();
                        reported.clear();
                        if tx.send(WatchEvent::Rescan).await.is_err() {
                            return;
                        }
                    }
                    Ok(Some((path, false))) => {
                        pending.insert(path, Instant::now());
                    }
                    Ok(None) => return,
                    Err(_) => {}
                }
                let now = Instant::now();
                let ready: Vec<PathBuf> = pending
                    .iter()
                    .filter(|(_, t)| now.duration_since(**t) >= debounce)
                    .map(|(p, _)| p.clone())
                    .collect();
                for path in ready {
                    pending.remove(&path);
                    if let Some(ev) = classify_event(&root, &matcher, &select, &path, &mut reported) {
                        if tx.send(ev).await.is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Ok(Self { _watcher: watcher, rx })
    }

    /// Next debounced event; `None` once the watcher is gone.
    pub async fn next(&mut self) -> Option<WatchEvent> {
        self.rx.recv().await
    }
}

fn classify_event(
    root: &Path,
    matcher: &IgnoreMatcher,
    select: &Selector,
    path: &Path,
    reported: &mut Reported,
) -> Option<WatchEvent> {
    let rel = rel_path(root, path)?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => {
            if matcher.is_ignored(path, false) {
                metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "ignored").increment(1);
                return None;
            }
            if !select.matches(&rel) {
                metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "excluded").increment(1);
                return None;
            }
            let rel = select.qualify(&rel);
            if let Some(reason) = classify_name(path) {
                metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => reason.label()).increment(1);
                return None;
            }
            if reported.is_echo(path, &meta, SystemTime::now()) {
                metrics::counter!(m::WATCH_SKIPPED_TOTAL, "reason" => "unchanged").increment(1);
                return None;
            }
            metrics::counter!(m::WATCH_FILES_TOTAL, "origin" => "event").increment(1);
            Some(WatchEvent::Changed(SourceFile { rel, abs: path.to_path_buf() }))
        }
        // Directories: their files get their own events (a moved-in directory is rescanned).
        Ok(meta) if meta.is_dir() => {
            if matcher.is_ignored(path, true) {
                return None;
            }
            Some(WatchEvent::Rescan)
        }
        Ok(_) => None,
        Err(_) => {
            reported.forget(path);
            Some(WatchEvent::Removed(select.qualify(&rel)))
        }
    }
}

/// A change within this margin before its report may be followed by another in the same tick of
/// the file system's clock (Linux stamps files with a coarse clock), so such a file's stat cannot
/// vouch for it: git's "racily clean" rule.
const RACY: Duration = Duration::from_millis(100);

/// What each file looked like when the watcher last reported it (cleared on a rescan, a removed
/// path and everything under it forgotten).
///
/// inotify delivers one save as several events, and a loaded machine can spread them across the
/// debounce window: the late ones arrive after the file was reported, and reading it again would
/// find it unchanged — but until then it would count as in flight, changed since the last commit.
/// A file whose stat is the one reported, and whose change time was at least [`RACY`] before the
/// report, has not changed since (the change time cannot be set back); its event is dropped.
#[derive(Default)]
struct Reported(HashMap<PathBuf, (FileStat, SystemTime)>);

/// The parts of a file's stat that any write changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStat {
    len: u64,
    ino: u64,
    mtime_ns: i128,
    ctime_ns: i128,
}

impl FileStat {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Self {
            len: meta.len(),
            ino: meta.ino(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The change time, as wall-clock time.
    fn changed_at(&self) -> SystemTime {
        let ns = u64::try_from(self.ctime_ns.max(0)).unwrap_or(u64::MAX);
        SystemTime::UNIX_EPOCH + Duration::from_nanos(ns)
    }
}

impl Reported {
    /// True when `path` (a file, stat `meta`) looks as it did when it was reported, and that stat
    /// could vouch for it then; else records it as reported `now` and returns false.
    fn is_echo(&mut self, path: &Path, meta: &std::fs::Metadata, now: SystemTime) -> bool {
        let stat = FileStat::of(meta);
        let echo = self.0.get(path).is_some_and(|(seen, at)| *seen == stat && seen.changed_at() + RACY <= *at);
        if !echo {
            self.0.insert(path.to_path_buf(), (stat, now));
        }
        echo
    }

    /// `path` is gone (a file, or a directory with everything under it).
    fn forget(&mut self, path: &Path) {
        self.0.retain(|p, _| !p.starts_with(path));
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_honours_gitignore_hidden_and_excludes() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("target")).unwrap();
        std::fs::create_dir_all(root.join("db")).unwrap();
        std::fs::create_dir_all(root.join(".hidden")).unwrap();
        std::fs::write(root.join("src/lib.rs"), "fn a() {}").unwrap();
        std::fs::write(root.join("target/out.rs"), "fn b() {}").unwrap();
        std::fs::write(root.join("debug.log"), "x").unwrap();
        std::fs::write(root.join("db/data.txt"), "x").unwrap();
        std::fs::write(root.join(".hidden/h.txt"), "x").unwrap();
        std::fs::write(root.join("key.pem"), "x").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink(root, root.join("src/loop")).unwrap();
        let scanner = Scanner::new(root, vec![root.join("db")]);
        let mut seen = Vec::new();
        scanner.scan(|f| {
            seen.push(f.rel);
            true
        });
        seen.sort();
        assert_eq!(seen, vec!["src/lib.rs".to_string()]);
        let matcher = scanner.ignore_matcher();
        let root = scanner.root();
        assert!(matcher.is_ignored(&root.join("target/new.rs"), false));
        assert!(matcher.is_ignored(&root.join("x.log"), false));
        assert!(matcher.is_ignored(&root.join("db/x.txt"), false));
        assert!(!matcher.is_ignored(&root.join("src/new.rs"), false));
    }

    #[test]
    fn a_file_that_looks_as_reported_is_an_echo_unless_it_changed_too_close_to_the_report() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.py");
        std::fs::write(&path, "x = 1\n").unwrap();
        let meta = std::fs::metadata(&path).unwrap();
        let changed = FileStat::of(&meta).changed_at();
        let mut reported = Reported::default();
        // Reported well after its change: a second event for the same stat is an echo.
        let later = changed + Duration::from_secs(1);
        assert!(!reported.is_echo(&path, &meta, later), "the first report is never an echo");
        assert!(reported.is_echo(&path, &meta, later + Duration::from_secs(5)));
        // A write changes the stat (size here; the change time in any case): reported again.
        std::fs::write(&path, "x = 22\n").unwrap();
        let meta2 = std::fs::metadata(&path).unwrap();
        assert!(!reported.is_echo(&path, &meta2, later + Duration::from_secs(6)));
        // Reported within RACY of its change: the stat cannot vouch for it, so it is read again.
        let mut racy = Reported::default();
        let soon = FileStat::of(&meta2).changed_at() + RACY / 2;
        assert!(!racy.is_echo(&path, &meta2, soon));
        assert!(!racy.is_echo(&path, &meta2, soon + Duration::from_secs(1)), "a racy report is not trusted");
        // Once reported at a safe distance it is; removing the folder forgets it.
        assert!(racy.is_echo(&path, &meta2, soon + Duration::from_secs(2)));
        racy.forget(dir.path());
        assert!(!racy.is_echo(&path, &meta2, soon + Duration::from_secs(3)), "a forgotten path is new");
    }

    #[tokio::test]
    async fn editor_save_patterns_collapse_into_one_update_per_file() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::write(root.join("a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(root.join("b.rs"), "fn b() {}\n").unwrap();
        let scanner = Scanner::new(&root, vec![]);
        let mut watcher = EventWatcher::start(&scanner, Duration::from_millis(300)).unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        // vim/IntelliJ style: write a temp file, rename it over the original.
        std::fs::write(root.join("a.rs.tmp~"), "fn a() { 1 }\n").unwrap();
        std::fs::rename(root.join("a.rs.tmp~"), root.join("a.rs")).unwrap();
        // truncate + write, in a burst of saves.
        for i in 0..5 {
            std::fs::write(root.join("b.rs"), "").unwrap();
            std::fs::write(root.join("b.rs"), format!("fn b() {{ {i} }}\n")).unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut changed: Vec<String> = Vec::new();
        let deadline = tokio::time::Instant::now() + Duration::from_millis(2000);
        while let Ok(Some(ev)) = tokio::time::timeout_at(deadline, watcher.next()).await {
            if let WatchEvent::Changed(f) = ev {
                changed.push(f.rel);
            }
        }
        changed.sort();
        assert_eq!(changed, vec!["a.rs".to_string(), "b.rs".to_string()], "one update per final path");
        assert_eq!(std::fs::read_to_string(root.join("b.rs")).unwrap(), "fn b() { 4 }\n");
    }
}
