//! The binary's side of metrics: it installs the Prometheus recorder (bucket layouts, every
//! crate's metrics described) and runs its upkeep, which also samples what only the binary can
//! see — its allocator (jemalloc: live heap against resident pages) and the process-wide
//! LanceDB caches — every [`UPKEEP`].
//!
//! Why these gauges: a soak (`benches/soak.py`) showed the writer's resident memory rising by
//! a fifth over its first ten minutes and then staying flat. Whether that is caches filling up
//! to their budgets (warm-up) or memory that is never given back (a leak, fragmentation) is
//! read from these series: `ctxd_process_heap_bytes{state="allocated"}` is what the program
//! holds, `resident` what the allocator keeps in RAM for it, and `ctxd_index_cache_bytes`,
//! `ctxd_query_answer_cache_answers` the bounded caches within the heap.

use std::time::Duration;

use anyhow::{Context, Result};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Gauge: bytes of the process's heap (jemalloc), label state — `allocated` (live allocations),
/// `active` (pages holding them), `resident` (pages in RAM, the allocator's metadata included),
/// `retained` (address space kept but returned to the system).
pub const PROCESS_HEAP_BYTES: &str = "ctxd_process_heap_bytes";

/// Gauge: files the process holds open (`/proc/self/fd`; Linux).
pub const PROCESS_OPEN_FILES: &str = "ctxd_process_open_files";
/// Gauge: the most files the process may hold open (its soft `RLIMIT_NOFILE`).
pub const PROCESS_OPEN_FILES_LIMIT: &str = "ctxd_process_open_files_limit";

/// How often the upkeep runs (histogram upkeep, heap and cache gauges).
const UPKEEP: Duration = Duration::from_secs(5);

/// Installs the Prometheus recorder (histograms with buckets for every `*_seconds` metric).
pub fn install_metrics() -> Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Suffix("seconds".into()),
            &[0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0],
        )
        .context("configuring metric buckets")?
        .set_buckets_for_metric(
            Matcher::Suffix("items".into()),
            &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 1024.0, 4096.0],
        )
        .context("configuring metric buckets")?
        .install_recorder()
        .context("installing the metrics recorder")?;
    // Every metric described (# HELP), and the series dashboards and alerts read present at zero.
    ctxd_index::metrics::describe();
    ctxd_models::metrics::describe();
    ctxd_stages::metrics::describe();
    ctxd_pipeline::metrics::describe();
    ctxd_search::metrics::describe();
    ctxd_codegraph::metrics::describe();
    ctxd_context::metrics::describe();
    ctxd_serve::metrics::describe();
    metrics::describe_gauge!(
        PROCESS_HEAP_BYTES,
        "Bytes of the process's heap, label state (allocated: live; active: pages holding them; resident: in RAM; retained: returned to the system)."
    );
    metrics::describe_gauge!(
        PROCESS_OPEN_FILES,
        "Files the process holds open (LanceDB keeps one per index segment its index cache holds)."
    );
    metrics::describe_gauge!(
        PROCESS_OPEN_FILES_LIMIT,
        "The most files the process may hold open (its soft RLIMIT_NOFILE, raised to the hard one at start)."
    );
    sample_heap();
    sample_open_files();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(UPKEEP).await;
            upkeep.run_upkeep();
            sample_heap();
            sample_open_files();
            ctxd_index::connection::cache_use().await;
        }
    });
    Ok(handle)
}

/// The allocator's figures now (`None` if jemalloc's statistics could not be read).
pub fn heap() -> Option<[(&'static str, usize); 4]> {
    use tikv_jemalloc_ctl::{epoch, stats};
    // The statistics are a snapshot taken when the epoch advances.
    epoch::advance().ok()?;
    Some([
        ("allocated", stats::allocated::read().ok()?),
        ("active", stats::active::read().ok()?),
        ("resident", stats::resident::read().ok()?),
        ("retained", stats::retained::read().ok()?),
    ])
}

fn sample_heap() {
    match heap() {
        Some(figures) => {
            for (state, bytes) in figures {
                metrics::gauge!(PROCESS_HEAP_BYTES, "state" => state).set(bytes as f64);
            }
        }
        None => tracing::debug!("jemalloc statistics unavailable; ctxd_process_heap_bytes not set"),
    }
}

/// The process's limits on open files (soft and hard `RLIMIT_NOFILE`), if they can be read.
pub fn open_files_limit() -> Option<libc::rlimit> {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit only writes the struct passed.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit)
}

/// Files open now and the limit on them (`None` where `/proc/self/fd` cannot be read).
pub fn open_files() -> Option<(usize, u64)> {
    let open = std::fs::read_dir("/proc/self/fd").ok()?.count();
    Some((open, open_files_limit().map_or(0, |l| l.rlim_cur)))
}

fn sample_open_files() {
    if let Some((open, limit)) = open_files() {
        metrics::gauge!(PROCESS_OPEN_FILES).set(open as f64);
        metrics::gauge!(PROCESS_OPEN_FILES_LIMIT).set(limit as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heap_figures_are_read_and_consistent() {
        let keep: Vec<u8> = vec![7; 8 << 20];
        let figures = heap().expect("jemalloc statistics are compiled in");
        let get = |s: &str| figures.iter().find(|(n, _)| *n == s).unwrap().1;
        assert!(get("allocated") >= keep.len(), "an 8 MiB buffer is live: {figures:?}");
        assert!(get("active") >= get("allocated") && get("resident") >= get("active"), "{figures:?}");
        drop(keep);
    }

    #[test]
    fn open_files_are_counted_against_the_limit() {
        let held: Vec<std::fs::File> = (0..5).map(|_| std::fs::File::open("/proc/self/stat").unwrap()).collect();
        let Some((open, limit)) = open_files() else {
            eprintln!("skipped: /proc/self/fd cannot be read on this system");
            return;
        };
        // Other tests of this process open and close files meanwhile: what is certain is these
        // five and the standard streams.
        assert!(open >= held.len() + 3, "at least the 5 held files and stdin/out/err: {open}");
        assert!(limit as usize >= open, "the limit {limit} is at least what is open ({open})");
    }
}
