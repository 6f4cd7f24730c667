//! How far an indexing run is: files done of those the source emitted, chunks written, rates and
//! the time left — what `ctxd index` shows while it works (a bar on a terminal, a line every few
//! seconds otherwise), what a daemon logs during its first scan and reports in `/v1/status`.
//!
//! The counts are the run's [`Counters`] (the same as its final summary); the total is known once
//! the source has finished its initial pass ([`Tracker::mark_scanned`]): until then files keep
//! arriving and no time left is given. The time left is the files still to do at the run's mean
//! file rate so far — files differ in size, so it is an estimate that settles as the run goes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use ctxd_stages::counters::Counters;

use crate::stage_tasks::Tracker;

/// A live view of one run's counts (cheap to clone; see [`crate::daemon::Running::progress`]).
#[derive(Clone)]
pub struct ProgressHandle {
    counters: Arc<Counters>,
    tracker: Tracker,
    started: Instant,
}

/// One reading of a run's progress.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct IndexProgress {
    /// Files the source emitted so far (the total once `scan_done`).
    pub files_seen: u64,
    /// Files finished: committed, unchanged, skipped or failed.
    pub files_done: u64,
    /// Chunks written.
    pub chunks: u64,
    /// Commits made.
    pub commits: u64,
    /// The source finished its initial pass: `files_seen` is the total.
    pub scan_done: bool,
    pub elapsed_secs: f64,
}

impl ProgressHandle {
    pub(crate) fn new(counters: Arc<Counters>, tracker: Tracker, started: Instant) -> Self {
        Self { counters, tracker, started }
    }

    /// The counts now.
    pub fn read(&self) -> IndexProgress {
        let c = &self.counters;
        let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let seen = load(&c.seen);
        let done = load(&c.indexed) + load(&c.unchanged) + load(&c.skipped) + load(&c.failed);
        IndexProgress {
            files_seen: seen,
            files_done: done.min(seen),
            chunks: load(&c.chunks),
            commits: load(&c.commits),
            scan_done: self.tracker.is_scanned(),
            elapsed_secs: self.started.elapsed().as_secs_f64(),
        }
    }
}

/// The pipeline a daemon runs now — its tracker and progress — replaced when it starts another
/// (a source reload, a model switch), so answers and `/v1/status` never read a stopped one.
#[derive(Clone, Default)]
pub struct LiveRun(Arc<std::sync::RwLock<Option<(Tracker, ProgressHandle)>>>);

impl LiveRun {
    /// From now on, the run of `tracker` and `progress` (`Running::tracker`, `Running::progress`).
    pub fn set(&self, tracker: Tracker, progress: ProgressHandle) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some((tracker, progress));
    }

    /// Files in flight in the current run: changed and not committed yet.
    pub fn in_flight(&self) -> u64 {
        self.0.read().unwrap_or_else(|e| e.into_inner()).as_ref().map_or(0, |(t, _)| t.in_flight().max(0) as u64)
    }

    /// The current run's progress, if one runs.
    pub fn read(&self) -> Option<IndexProgress> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).as_ref().map(|(_, p)| p.read())
    }
}

impl IndexProgress {
    /// Files finished per second since the start.
    pub fn files_per_sec(&self) -> f64 {
        per_sec(self.files_done, self.elapsed_secs)
    }

    /// Chunks written per second since the start.
    pub fn chunks_per_sec(&self) -> f64 {
        per_sec(self.chunks, self.elapsed_secs)
    }

    /// Seconds left at the mean file rate so far; `None` until the scan is done or a file is.
    pub fn secs_left(&self) -> Option<f64> {
        let rate = self.files_per_sec();
        (self.scan_done && rate > 0.0).then(|| self.files_seen.saturating_sub(self.files_done) as f64 / rate)
    }

    /// `1,234 of 2,784 files · 45,210 chunks · 118 chunks/s, 9.5 files/s · about 2 min 43 s left`
    /// (`of 2,784+ files, still scanning` before the total is known).
    pub fn describe(&self) -> String {
        let total = if self.scan_done {
            format!("{} of {} files", thousands(self.files_done), thousands(self.files_seen))
        } else {
            format!("{} of {}+ files, still scanning", thousands(self.files_done), thousands(self.files_seen))
        };
        let left = self.secs_left().map(|s| format!(" · about {} left", duration(s))).unwrap_or_default();
        format!(
            "{total} · {} chunks · {:.0} chunks/s, {:.1} files/s{left}",
            thousands(self.chunks),
            self.chunks_per_sec(),
            self.files_per_sec()
        )
    }
}

fn per_sec(n: u64, secs: f64) -> f64 {
    if secs > 0.0 {
        n as f64 / secs
    } else {
        0.0
    }
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `42 s`, `2 min 43 s`, `1 h 05 min`.
fn duration(secs: f64) -> String {
    let s = secs.round() as u64;
    match s {
        0..=59 => format!("{s} s"),
        60..=3599 => format!("{} min {} s", s / 60, s % 60),
        _ => format!("{} h {:02} min", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(seen: u64, done: u64, chunks: u64, scan_done: bool, elapsed_secs: f64) -> IndexProgress {
        IndexProgress { files_seen: seen, files_done: done, chunks, commits: 1, scan_done, elapsed_secs }
    }

    #[test]
    fn the_time_left_is_the_files_to_do_at_the_mean_rate_once_the_total_is_known() {
        let p = reading(2784, 1234, 45210, true, 130.0);
        assert!((p.files_per_sec() - 1234.0 / 130.0).abs() < 1e-9);
        let left = p.secs_left().unwrap();
        assert!((left - 1550.0 / (1234.0 / 130.0)).abs() < 1e-6, "{left}");
        assert_eq!(
            p.describe(),
            "1,234 of 2,784 files · 45,210 chunks · 348 chunks/s, 9.5 files/s · about 2 min 43 s left"
        );
        // Still scanning: no total, no time left.
        let p = reading(2000, 1234, 45210, false, 130.0);
        assert_eq!(p.secs_left(), None);
        assert!(p.describe().starts_with("1,234 of 2,000+ files, still scanning · "), "{}", p.describe());
        // Nothing done yet: no rate, no time left, no division by zero.
        let p = reading(10, 0, 0, true, 0.0);
        assert_eq!((p.files_per_sec(), p.secs_left()), (0.0, None));
    }

    #[test]
    fn counts_and_durations_read_well() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
        assert_eq!(duration(42.4), "42 s");
        assert_eq!(duration(163.0), "2 min 43 s");
        assert_eq!(duration(3900.0), "1 h 05 min");
    }

    #[test]
    fn a_handle_reads_the_runs_counters() {
        let counters = Arc::new(Counters::default());
        let tracker = Tracker::default();
        let h = ProgressHandle::new(counters.clone(), tracker.clone(), Instant::now());
        counters.seen.store(5, Ordering::Relaxed);
        counters.indexed.store(2, Ordering::Relaxed);
        counters.unchanged.store(1, Ordering::Relaxed);
        counters.chunks.store(40, Ordering::Relaxed);
        let p = h.read();
        assert_eq!((p.files_seen, p.files_done, p.chunks, p.scan_done), (5, 3, 40, false));
        tracker.mark_scanned();
        assert!(h.read().scan_done);
        // A daemon's live run: replaced by the next pipeline, never read from a stopped one.
        let live = LiveRun::default();
        assert_eq!((live.in_flight(), live.read()), (0, None));
        live.set(tracker.clone(), h.clone());
        tracker.add(2);
        assert_eq!(live.in_flight(), 2);
        let next = Tracker::default();
        live.set(next.clone(), ProgressHandle::new(Arc::default(), next, Instant::now()));
        assert_eq!((live.in_flight(), live.read().unwrap().files_seen), (0, 0));
    }
}
