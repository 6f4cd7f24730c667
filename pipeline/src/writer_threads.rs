//! The writer's threads: a daemon's pipeline runs at a lower scheduling priority than its queries.
//!
//! A daemon of role `both` answers queries and ingests on the same cores. Under load (50 clients
//! asking while an agent edits 20 files a second, `benches/load.py`) every core is busy, and the
//! writer's own work — the sources' scans, watches and git reads, loading and chunking, the sink's
//! commits and full-text folds, the scheduled upkeep — took its share of them from the queries
//! (BENCHMARKS.md, "Indexing slows down further while queries wait"). Here the tasks of a
//! following pipeline ([`crate::pipeline::Pipeline::run`] with `follow`) run on a tokio runtime of
//! their own whose threads have a higher nice value: the daemon's own plus `[pipeline]
//! writer_nice` (10 by default; at most 19), so a daemon started niced (systemd's `Nice=`) keeps
//! its writer below its queries too. Linux's scheduler then gives a core to a query's thread
//! first, and the writer still gets every cycle the queries leave (a niced thread is not starved:
//! at nice 10 it weighs about a tenth of a query thread when both want a core, and all of an idle
//! core).
//!
//! What stays at the queries' priority, because queries use it too:
//! - the model's threads (query and indexing embeddings share them; indexing yields to waiting
//!   queries by its own share, `[model] indexing_share_waiting_percent`);
//! - Lance's CPU pool, shared by every read and write of the process. A thread inherits its
//!   creator's priority and the pool keeps every thread it starts, so its threads are all started
//!   from the caller ([`ctxd_index::connection::start_cpu_threads`]) before the first writer thread
//!   exists.
//!
//! One runtime for the process, built at the first following pipeline with that pipeline's
//! `writer_nice` (a reload that sets another value above 0 keeps the running one until the daemon
//! restarts); a later generation (a model switch, a reload of the sources) runs on the same
//! threads. `writer_nice = 0` runs the pipeline on the caller's runtime, as before. One-shot runs
//! (`ctxd index`) have no queries beside them and stay where they are called. The nice value is
//! per thread on Linux (`setpriority(PRIO_PROCESS, tid)`); elsewhere the runtime is built the same
//! and the priority is left alone (said once in the log).

use std::sync::OnceLock;

use tokio::runtime::{EnterGuard, Runtime};

/// The writer's runtime, the `writer_nice` it was built with and the nice value its threads were
/// given (the builder's own plus that, at most 19).
struct WriterRuntime {
    runtime: Runtime,
    steps: i32,
    nice: i32,
}

static WRITER: OnceLock<Option<WriterRuntime>> = OnceLock::new();

/// Enters the writer's runtime (built on the first call, `steps` of nice below the calling
/// thread): tasks spawned while the guard lives run on its threads. `None` when `steps` is 0, or
/// when the runtime could not be built (logged; the pipeline then runs on the caller's runtime).
pub fn enter(steps: i32) -> Option<EnterGuard<'static>> {
    if steps == 0 {
        return None;
    }
    let writer = WRITER.get_or_init(|| build(steps)).as_ref()?;
    if writer.steps != steps {
        tracing::info!(
            running = writer.steps,
            nice = writer.nice,
            configured = steps,
            "pipeline.writer_nice changed: the writer's threads keep the value they started with until the daemon restarts"
        );
    }
    Some(writer.runtime.enter())
}

fn build(steps: i32) -> Option<WriterRuntime> {
    ctxd_index::connection::start_cpu_threads();
    let nice = writer_nice_from(this_thread_nice(), steps);
    // As many workers as the queries' runtime has (tokio's default: one per core).
    let built = tokio::runtime::Builder::new_multi_thread()
        .thread_name("ctxd-writer")
        .on_thread_start(move || lower_this_thread(nice))
        .enable_all()
        .build();
    match built {
        Ok(runtime) => {
            tracing::info!(nice, "the writer's tasks run on threads of their own at a lower priority");
            Some(WriterRuntime { runtime, steps, nice })
        }
        Err(e) => {
            tracing::warn!("building the writer's runtime failed ({e}): the writer shares the queries' threads");
            None
        }
    }
}

/// Gives the calling thread the nice value `nice` (Linux: per thread), unless it already runs at
/// that priority or lower (a daemon at nice 19 has no lower one to give).
#[cfg(target_os = "linux")]
fn lower_this_thread(nice: i32) {
    if this_thread_nice() >= nice {
        return;
    }
    // SAFETY: a plain system call on the calling thread's own id.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, nice) };
    if rc != 0 {
        static SAID: OnceLock<()> = OnceLock::new();
        let e = std::io::Error::last_os_error();
        SAID.get_or_init(|| {
            tracing::warn!(
                "setting the writer threads' nice value to {nice} failed ({e}): they run at the queries' priority"
            )
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_this_thread(nice: i32) {
    static SAID: OnceLock<()> = OnceLock::new();
    SAID.get_or_init(|| {
        tracing::info!(
            "the writer threads' nice value ({nice}) applies on Linux only: they keep the process's priority"
        )
    });
}

/// The writer's nice value: `steps` below the daemon's `daemon` (Linux's range ends at 19).
fn writer_nice_from(daemon: i32, steps: i32) -> i32 {
    (daemon + steps).min(19)
}

/// The calling thread's nice value (elsewhere than Linux: 0, the writer's priority is left alone).
#[cfg(not(target_os = "linux"))]
fn this_thread_nice() -> i32 {
    0
}

/// The nice value of the calling thread (Linux).
#[cfg(target_os = "linux")]
fn this_thread_nice() -> i32 {
    // SAFETY: a plain system call on the calling thread's own id. -1 is also a valid nice value,
    // and never one the writer sets, so errno is not consulted.
    unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The process has one writer runtime, whose `writer_nice` is the first caller's: another
    /// test's pipeline may have built it with the default, so the value is read back from it. Run
    /// niced (`nice scripts/test.sh`), the writer is still below the test's own priority.
    #[test]
    fn writer_tasks_run_niced_and_lance_threads_keep_the_callers_priority() {
        let callers = this_thread_nice();
        assert!(enter(0).is_none(), "writer_nice = 0 keeps the caller's runtime");
        let guard = enter(7).expect("a writer runtime on Linux");
        let writer = WRITER.get().and_then(Option::as_ref).expect("built");
        let (steps, nice) = (writer.steps, writer.nice);
        assert_eq!(nice, writer_nice_from(callers, steps), "{steps} below the caller's {callers}");
        let (on_worker, on_blocking, in_lance) = futures::executor::block_on(async {
            let worker = tokio::spawn(async { this_thread_nice() });
            let blocking = tokio::task::spawn_blocking(this_thread_nice);
            let lance = tokio::spawn(async {
                lance_core::utils::tokio::spawn_cpu(|| Ok::<i32, std::io::Error>(this_thread_nice())).await.unwrap()
            });
            (worker.await.unwrap(), blocking.await.unwrap(), lance.await.unwrap())
        });
        drop(guard);
        assert!(nice > callers || callers == 19, "the writer ({nice}) below the caller ({callers})");
        assert_eq!(on_worker, nice, "a spawned task runs on a niced worker");
        assert_eq!(on_blocking, nice, "blocking work (loading, chunking, git reads) too");
        assert_eq!(in_lance, callers, "Lance's pool, shared with queries, keeps the caller's priority");
        assert_eq!(this_thread_nice(), callers, "the caller's own thread is left alone");
        let again = enter(steps + 1).expect("the same runtime");
        let still = futures::executor::block_on(tokio::spawn(async { this_thread_nice() })).unwrap();
        drop(again);
        assert_eq!(still, nice, "the first value holds until a restart");
    }
}
