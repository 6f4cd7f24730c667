//! The load a serving process is under, as its query admission sees it: how many queries run
//! and how many wait for a slot (`ctxd_serve::admission` keeps the counts; see there for the
//! 503 answers). Routed search reads it to **shed work under load**: while queries wait, it
//! rescores fewer candidates ([`Pressure::rerank_depth`]; all of them when their scores are
//! kept from an earlier answer, or scored from the codes their index stores, neither of which
//! costs a forward pass: [`crate::rerank`]), so the queue drains faster instead
//! of every query waiting for the full-depth rescoring of the ones ahead of it. Idle (nothing
//! queued) answers are exactly the full-depth ones the evaluation sets measure.
//!
//! The model thread reads it too: while queries wait, indexing takes a smaller share of the
//! model ([`Pressure::waiting_probe`]; `ctxd_models::service`).
//!
//! Clones share the counts. A default [`Pressure`] that no admission layer updates never
//! reports load (one-shot CLI queries, tests).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::metrics as m;

#[derive(Default)]
struct Counts {
    queued: AtomicUsize,
    running: AtomicUsize,
    slots: AtomicUsize,
}

/// Running and waiting queries of one process (see the module docs).
#[derive(Clone, Default)]
pub struct Pressure(Arc<Counts>);

/// A query waiting for a slot; stops counting when dropped.
pub struct Queued(Pressure);

/// A query running; stops counting when dropped.
pub struct RunningQuery(Pressure);

impl Pressure {
    /// How many queries may run at once (the admission's slots).
    pub fn set_slots(&self, slots: usize) {
        self.0.slots.store(slots, Ordering::Relaxed);
    }

    /// Counts one more waiting query, unless `max` already wait (`None`: the queue is full).
    pub fn enqueue(&self, max: usize) -> Option<Queued> {
        let mut now = self.0.queued.load(Ordering::Relaxed);
        loop {
            if now >= max {
                return None;
            }
            match self.0.queued.compare_exchange_weak(now, now + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(seen) => now = seen,
            }
        }
        metrics::gauge!(m::QUERY_QUEUED).set((now + 1) as f64);
        Some(Queued(self.clone()))
    }

    /// Counts one more running query.
    pub fn run(&self) -> RunningQuery {
        let n = self.0.running.fetch_add(1, Ordering::AcqRel) + 1;
        metrics::gauge!(m::QUERY_IN_FLIGHT).set(n as f64);
        RunningQuery(self.clone())
    }

    /// Queries waiting for a slot now.
    pub fn queued(&self) -> usize {
        self.0.queued.load(Ordering::Acquire)
    }

    /// Whether queries wait for a slot now, for the model thread's indexing share
    /// ([`ctxd_models::service::EmbedService::watch_queries_waiting`]).
    pub fn waiting_probe(&self) -> ctxd_models::service::QueriesWaiting {
        let pressure = self.clone();
        Arc::new(move || pressure.queued() > 0)
    }

    /// Queries running now.
    pub fn running(&self) -> usize {
        self.0.running.load(Ordering::Acquire)
    }

    /// The rescoring depth to use now for a configured `depth`: all of it while no query
    /// waits; a third (at least 5) while some wait; none once more wait than twice the slots
    /// (the answer is then the fused ranking, as with `"rerank": false`).
    pub fn rerank_depth(&self, depth: usize) -> usize {
        let (queued, slots) = (self.queued(), self.0.slots.load(Ordering::Relaxed).max(1));
        match queued {
            0 => depth,
            q if q > 2 * slots => 0,
            _ => (depth / 3).max(5).min(depth),
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        let n = self.0 .0.queued.fetch_sub(1, Ordering::AcqRel) - 1;
        metrics::gauge!(m::QUERY_QUEUED).set(n as f64);
    }
}

impl Drop for RunningQuery {
    fn drop(&mut self) {
        let n = self.0 .0.running.fetch_sub(1, Ordering::AcqRel) - 1;
        metrics::gauge!(m::QUERY_IN_FLIGHT).set(n as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_bounded_and_rescoring_shrinks_while_queries_wait() {
        let p = Pressure::default();
        p.set_slots(2);
        let probe = p.waiting_probe();
        assert_eq!(p.rerank_depth(30), 30, "idle: full depth");
        assert!(!probe(), "nothing waits: indexing keeps its share");
        let waiting: Vec<Queued> = (0..3).map(|_| p.enqueue(5).unwrap()).collect();
        assert!(probe(), "the model thread sees the queries waiting");
        assert_eq!(p.rerank_depth(30), 10);
        assert_eq!(p.rerank_depth(0), 0, "off stays off");
        let more: Vec<Queued> = (0..2).map(|_| p.enqueue(5).unwrap()).collect();
        assert!(p.enqueue(5).is_none(), "bounded at 5");
        assert_eq!(p.rerank_depth(30), 0, "5 waiting > 2 x 2 slots: no rescoring");
        drop(more);
        drop(waiting);
        assert_eq!((p.queued(), p.rerank_depth(30)), (0, 30));
        let r = p.clone().run();
        assert_eq!(p.running(), 1);
        drop(r);
        assert_eq!(p.running(), 0);
    }
}
