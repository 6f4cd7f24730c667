//! The typed stage tasks: bounded queues, each stage's worker tasks, batching, metrics, drain.
//!
//! The component traits it runs ([`Stage`], [`BatchStage`], [`Sink`]) live in
//! [`ctxd_stages::stage`], next to the stages that implement them; they are re-exported here.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_channel::{Receiver, Sender, TrySendError};
use ctxd_stages::error::StageError;
use ctxd_stages::stage::{BatchStage, Sink, Stage};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::metrics as m;

/// The sending end of a queue, owned by the producing stage.
pub struct Output<T> {
    tx: Sender<T>,
    /// Name of the producing stage (blocked time is charged to it).
    producer: &'static str,
    /// Name of the consuming stage (queue depth is reported for it).
    consumer: &'static str,
}

impl<T> Clone for Output<T> {
    fn clone(&self) -> Self {
        Self { tx: self.tx.clone(), producer: self.producer, consumer: self.consumer }
    }
}

/// The downstream side is gone (the pipeline is shutting down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl<T> Output<T> {
    fn after_send(&self) {
        metrics::counter!(m::STAGE_SENT_TOTAL, "stage" => self.producer).increment(1);
        metrics::gauge!(m::STAGE_QUEUE_DEPTH, "stage" => self.consumer).set(self.tx.len() as f64);
    }

    fn blocked(&self, since: Instant) {
        // Monotonic float seconds: the `metrics` facade has no float counter, so this is a
        // gauge that only ever increases (rate() works the same).
        metrics::gauge!(m::STAGE_BLOCKED_SECONDS_TOTAL, "stage" => self.producer)
            .increment(since.elapsed().as_secs_f64());
    }

    /// Sends `item`, waiting while the queue is full (back-pressure; the wait is counted).
    pub async fn send(&self, item: T) -> Result<(), Closed> {
        match self.tx.try_send(item) {
            Ok(()) => {}
            Err(TrySendError::Closed(_)) => return Err(Closed),
            Err(TrySendError::Full(item)) => {
                let since = Instant::now();
                let res = self.tx.send(item).await;
                self.blocked(since);
                res.map_err(|_| Closed)?;
            }
        }
        self.after_send();
        Ok(())
    }

    /// Blocking variant for producers on blocking threads (the directory scan).
    pub fn send_blocking(&self, item: T) -> Result<(), Closed> {
        match self.tx.try_send(item) {
            Ok(()) => {}
            Err(TrySendError::Closed(_)) => return Err(Closed),
            Err(TrySendError::Full(item)) => {
                let since = Instant::now();
                let res = self.tx.send_blocking(item);
                self.blocked(since);
                res.map_err(|_| Closed)?;
            }
        }
        self.after_send();
        Ok(())
    }

    /// Items waiting in the queue.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.tx.len()
    }
}

/// The receiving end of a queue, owned by the consuming stage.
pub struct Input<T> {
    rx: Receiver<T>,
    consumer: &'static str,
}

impl<T> Clone for Input<T> {
    fn clone(&self) -> Self {
        Self { rx: self.rx.clone(), consumer: self.consumer }
    }
}

impl<T> Input<T> {
    /// Next item; `None` once every producer is gone and the queue is empty.
    pub async fn recv(&self) -> Option<T> {
        let item = self.rx.recv().await.ok();
        if item.is_some() {
            metrics::counter!(m::STAGE_RECEIVED_TOTAL, "stage" => self.consumer).increment(1);
            metrics::gauge!(m::STAGE_QUEUE_DEPTH, "stage" => self.consumer).set(self.rx.len() as f64);
        }
        item
    }

    /// Collects a batch: waits for one item, then takes more until `max_weight` or
    /// `max_items` is reached or `max_wait` has passed since the first item.
    pub async fn recv_batch(
        &self,
        max_weight: usize,
        max_items: usize,
        max_wait: Duration,
        weight: impl Fn(&T) -> usize,
    ) -> Option<Vec<T>> {
        let first = self.recv().await?;
        let mut total = weight(&first);
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + max_wait;
        while total < max_weight && batch.len() < max_items {
            match tokio::time::timeout_at(deadline, self.recv()).await {
                Ok(Some(item)) => {
                    total += weight(&item);
                    batch.push(item);
                }
                Ok(None) | Err(_) => break,
            }
        }
        Some(batch)
    }

    /// Like [`Input::recv_batch`], but also stops as soon as `idle(batch_len)` says nothing
    /// else is on its way (checked after every item and every 20 ms): a lone edit is
    /// committed at once instead of waiting out `max_wait`, while a bulk load still fills
    /// batches. Before `idle_from` the idle check is not made: a steady trickle of edits
    /// arriving just after a commit is gathered until then rather than committed one by one.
    pub async fn recv_batch_until_idle(
        &self,
        limits: BatchLimits,
        idle_from: tokio::time::Instant,
        weight: impl Fn(&T) -> usize,
        idle: impl Fn(usize) -> bool,
    ) -> Option<Vec<T>> {
        let first = self.recv().await?;
        let mut total = weight(&first);
        let mut batch = vec![first];
        let deadline = tokio::time::Instant::now() + limits.max_wait;
        while total < limits.max_weight && batch.len() < limits.max_items {
            let now = tokio::time::Instant::now();
            if now >= deadline || (now >= idle_from && idle(batch.len())) {
                break;
            }
            let slice = deadline.min(now + Duration::from_millis(20));
            match tokio::time::timeout_at(slice, self.recv()).await {
                Ok(Some(item)) => {
                    total += weight(&item);
                    batch.push(item);
                }
                Ok(None) => break,
                Err(_) => {}
            }
        }
        Some(batch)
    }
}

/// A bounded queue into stage `consumer`, written by stage `producer`.
pub fn queue<T>(producer: &'static str, consumer: &'static str, capacity: usize) -> (Output<T>, Input<T>) {
    let (tx, rx) = async_channel::bounded(capacity.max(1));
    metrics::gauge!(m::STAGE_QUEUE_CAPACITY, "stage" => consumer).set(capacity.max(1) as f64);
    metrics::gauge!(m::STAGE_QUEUE_DEPTH, "stage" => consumer).set(0.0);
    // Register the counters so a scrape shows every stage from the start.
    metrics::counter!(m::STAGE_RECEIVED_TOTAL, "stage" => consumer).increment(0);
    metrics::counter!(m::STAGE_SENT_TOTAL, "stage" => producer).increment(0);
    metrics::gauge!(m::STAGE_BLOCKED_SECONDS_TOTAL, "stage" => producer).increment(0.0);
    (Output { tx, producer, consumer }, Input { rx, consumer })
}

/// Counts items in flight (emitted by the source, not yet committed or dropped) and whether
/// the source has finished its initial pass.
#[derive(Clone)]
pub struct Tracker {
    in_flight: Arc<watch::Sender<i64>>,
    scanned: Arc<watch::Sender<bool>>,
}

impl Default for Tracker {
    fn default() -> Self {
        Self { in_flight: Arc::new(watch::channel(0).0), scanned: Arc::new(watch::channel(false).0) }
    }
}

impl Tracker {
    /// `n` items entered the pipeline.
    pub fn add(&self, n: usize) {
        self.in_flight.send_modify(|v| *v += n as i64);
        metrics::gauge!(m::PIPELINE_IN_FLIGHT).set(*self.in_flight.borrow() as f64);
    }

    /// `n` items left the pipeline (committed, skipped or failed).
    pub fn done(&self, n: usize) {
        self.in_flight.send_modify(|v| *v -= n as i64);
        metrics::gauge!(m::PIPELINE_IN_FLIGHT).set(*self.in_flight.borrow() as f64);
    }

    /// Items in flight now.
    pub fn in_flight(&self) -> i64 {
        *self.in_flight.borrow()
    }

    /// The source finished its initial pass.
    pub fn mark_scanned(&self) {
        self.scanned.send_replace(true);
    }

    /// True once the source finished its initial pass (what it emitted may still be in flight).
    pub fn is_scanned(&self) -> bool {
        *self.scanned.borrow()
    }

    /// True once the initial pass is done and everything it emitted has left the pipeline.
    pub fn is_ready(&self) -> bool {
        self.is_scanned() && self.in_flight() <= 0
    }

    /// Waits until nothing is in flight, at most `limit`; false when it gave up.
    pub async fn wait_drained(&self, limit: Duration) -> bool {
        let mut n = self.in_flight.subscribe();
        let drained = tokio::time::timeout(limit, n.wait_for(|v| *v <= 0)).await.is_ok();
        drained
    }

    /// Waits until [`Tracker::is_ready`].
    pub async fn wait_ready(&self) {
        let mut scanned = self.scanned.subscribe();
        let _ = scanned.wait_for(|s| *s).await;
        let mut n = self.in_flight.subscribe();
        let _ = n.wait_for(|v| *v <= 0).await;
    }
}

/// Batch caps of a batching stage or sink.
#[derive(Debug, Clone, Copy)]
pub struct BatchLimits {
    pub max_weight: usize,
    pub max_items: usize,
    pub max_wait: Duration,
}

fn record_error(stage: &'static str, err: &StageError) {
    metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => stage, "error" => err.kind()).increment(1);
    tracing::warn!(stage, "{err}");
}

fn record_time(stage: &'static str, since: Instant) {
    metrics::histogram!(m::STAGE_PROCESSING_SECONDS, "stage" => stage).record(since.elapsed().as_secs_f64());
}

/// Routes one stage result: sent downstream, or dropped/failed and so out of the pipeline.
async fn forward<T>(stage: &'static str, res: Result<Option<T>, StageError>, output: &Output<T>, tracker: &Tracker) {
    match res {
        Ok(Some(out)) => {
            if output.send(out).await.is_err() {
                tracker.done(1);
            }
        }
        Ok(None) => {
            metrics::counter!(m::STAGE_DROPPED_TOTAL, "stage" => stage).increment(1);
            tracker.done(1);
        }
        Err(e) => {
            record_error(stage, &e);
            tracker.done(1);
        }
    }
}

/// Runs `workers` copies of `stage` from `input` to `output`. The returned handles finish when
/// the input is closed and drained; the output closes when the last worker finishes.
pub fn spawn_stage<S: Stage>(
    stage: Arc<S>,
    workers: usize,
    input: Input<S::In>,
    output: Output<S::Out>,
    tracker: Tracker,
) -> Vec<JoinHandle<()>> {
    spawn_workers(S::NAME, workers, (stage, input, output, tracker), |(stage, input, output, tracker)| async move {
        while let Some(item) = input.recv().await {
            let since = Instant::now();
            let res = stage.process(item).await;
            record_time(S::NAME, since);
            forward(S::NAME, res, &output, &tracker).await;
        }
    })
}

/// `workers` tasks (at least one), each running `work` on its own clone of `parts`, with the
/// stage's error series shown at 0 from the start.
fn spawn_workers<P: Clone, F, Fut>(name: &'static str, workers: usize, parts: P, work: F) -> Vec<JoinHandle<()>>
where
    F: Fn(P) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => name, "error" => "none").increment(0);
    (0..workers.max(1)).map(|_| tokio::spawn(work(parts.clone()))).collect()
}

/// Runs `workers` copies of a batching stage.
pub fn spawn_batch_stage<S: BatchStage>(
    stage: Arc<S>,
    workers: usize,
    limits: BatchLimits,
    input: Input<S::In>,
    output: Output<S::Out>,
    tracker: Tracker,
) -> Vec<JoinHandle<()>> {
    spawn_workers(
        S::NAME,
        workers,
        (stage, input, output, tracker),
        move |(stage, input, output, tracker)| async move {
            while let Some(batch) =
                input.recv_batch(limits.max_weight, limits.max_items, limits.max_wait, |i| stage.weight(i)).await
            {
                metrics::histogram!(m::STAGE_BATCH_ITEMS, "stage" => S::NAME).record(batch.len() as f64);
                let since = Instant::now();
                let results = stage.process_batch(batch).await;
                record_time(S::NAME, since);
                for res in results {
                    forward(S::NAME, res, &output, &tracker).await;
                }
            }
        },
    )
}

/// Runs a sink (a single worker, so commits are ordered).
/// `on_failure` runs after each batch the sink gave up on.
pub fn spawn_sink<S: Sink>(
    sink: Arc<S>,
    limits: BatchLimits,
    input: Input<S::In>,
    tracker: Tracker,
    on_failure: impl Fn() + Send + 'static,
) -> JoinHandle<()> {
    metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => S::NAME, "error" => "none").increment(0);
    tokio::spawn(async move {
        // Every item in the pipeline is counted by the tracker: when all of them are in this
        // batch, nothing more is coming soon and waiting would only delay freshness. But when
        // more items are already in flight as a write ends, edits are streaming in (an agent
        // writing file after file): then the next batch is held open for half the commit
        // interval, so that the stream makes about two commits per interval instead of one per
        // file, each a table version that readers, caches and upkeep pay for. An edit that
        // comes after a write with nothing in flight (write, search, write) is written at once.
        let idle = |n: usize| tracker.in_flight() <= n as i64;
        let gap = limits.max_wait / 2;
        let mut idle_from = tokio::time::Instant::now();
        while let Some(batch) = input.recv_batch_until_idle(limits, idle_from, |i| sink.weight(i), idle).await {
            let n = batch.len();
            metrics::histogram!(m::STAGE_BATCH_ITEMS, "stage" => S::NAME).record(n as f64);
            let since = Instant::now();
            let res = sink.write(batch).await;
            record_time(S::NAME, since);
            let written = res.is_ok();
            match res {
                Ok(()) => metrics::counter!(m::STAGE_SENT_TOTAL, "stage" => S::NAME).increment(n as u64),
                Err(e) => {
                    metrics::counter!(m::STAGE_ERRORS_TOTAL, "stage" => S::NAME, "error" => e.kind())
                        .increment(n as u64);
                    tracing::warn!(stage = S::NAME, "{e}; the batch's files are read again after the next rescan");
                    on_failure();
                }
            }
            tracker.done(n);
            if written {
                sink.after_write().await;
            }
            let streaming = tracker.in_flight() > 0;
            idle_from = tokio::time::Instant::now() + if streaming { gap } else { Duration::ZERO };
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    struct Double;
    impl Stage for Double {
        type In = u32;
        type Out = u32;
        const NAME: &'static str = "double";
        async fn process(&self, item: u32) -> Result<Option<u32>, StageError> {
            match item {
                13 => Err(StageError::Watch { path: "x".into(), source: "unlucky".into() }),
                7 => Ok(None),
                n => Ok(Some(n * 2)),
            }
        }
    }

    struct Collect(Mutex<Vec<u32>>, AtomicUsize);
    impl Sink for Collect {
        type In = u32;
        const NAME: &'static str = "collect";
        fn weight(&self, _: &u32) -> usize {
            1
        }
        async fn write(&self, items: Vec<u32>) -> Result<(), StageError> {
            // A slow sink: upstream must block, not pile up.
            tokio::time::sleep(Duration::from_millis(5)).await;
            self.1.fetch_add(1, Ordering::SeqCst);
            self.0.lock().unwrap().extend(items);
            Ok(())
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failing_items_are_skipped_and_drain_completes() {
        let tracker = Tracker::default();
        let (src_out, double_in) = queue::<u32>("source", "double", 2);
        let (double_out, sink_in) = queue::<u32>("double", "collect", 2);
        let sink = Arc::new(Collect(Mutex::new(Vec::new()), AtomicUsize::new(0)));
        let mut handles = spawn_stage(Arc::new(Double), 2, double_in, double_out, tracker.clone());
        let limits = BatchLimits { max_weight: 4, max_items: 4, max_wait: Duration::from_millis(2) };
        handles.push(spawn_sink(sink.clone(), limits, sink_in, tracker.clone(), || {}));
        for i in 0..50u32 {
            tracker.add(1);
            src_out.send(i).await.unwrap();
            // Never more queued than the capacities allow.
            assert!(src_out.len() <= 2);
        }
        tracker.mark_scanned();
        drop(src_out);
        for h in handles {
            h.await.unwrap();
        }
        let mut got = sink.0.lock().unwrap().clone();
        got.sort();
        let want: Vec<u32> = (0..50).filter(|n| *n != 7 && *n != 13).map(|n| n * 2).collect();
        assert_eq!(got, want);
        assert!(tracker.is_ready());
        assert!(sink.1.load(Ordering::SeqCst) >= 12, "batches are capped at 4 items");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_of_items_is_gathered_and_a_lone_item_is_written_at_once() {
        let tracker = Tracker::default();
        let (out, input) = queue::<u32>("source", "collect", 64);
        let sink = Arc::new(Collect(Mutex::new(Vec::new()), AtomicUsize::new(0)));
        let limits = BatchLimits { max_weight: 4096, max_items: 4096, max_wait: Duration::from_secs(1) };
        let handle = spawn_sink(sink.clone(), limits, input, tracker.clone(), || {});
        // One item every 2 ms: more arrive while each 5 ms write runs, so without the gap the
        // sink would write every two or three items (about 20 writes).
        for i in 0..50u32 {
            tracker.add(1);
            out.send(i).await.unwrap();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut n = tracker.in_flight.subscribe();
        tokio::time::timeout(Duration::from_secs(5), n.wait_for(|v| *v <= 0)).await.unwrap().unwrap();
        let writes = sink.1.load(Ordering::SeqCst);
        assert!(writes <= 6, "a stream of items is gathered into few writes, got {writes} for 50 items");
        // A lone item after a quiet spell, and one right after that write (nothing was in
        // flight when it ended): each written at once, not after the gap (500 ms).
        tokio::time::sleep(Duration::from_millis(700)).await;
        for item in [98, 99] {
            let since = Instant::now();
            tracker.add(1);
            out.send(item).await.unwrap();
            tokio::time::timeout(Duration::from_secs(5), n.wait_for(|v| *v <= 0)).await.unwrap().unwrap();
            assert!(since.elapsed() < Duration::from_millis(300), "item {item} waited {:?}", since.elapsed());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(sink.0.lock().unwrap().len(), 52);
        drop(out);
        handle.await.unwrap();
    }

    #[tokio::test]
    async fn batches_close_on_wait() {
        let (out, input) = queue::<usize>("a", "b", 16);
        for i in 0..3 {
            out.send(i).await.unwrap();
        }
        let b = input.recv_batch(100, 100, Duration::from_millis(20), |_| 1).await.unwrap();
        assert_eq!(b, vec![0, 1, 2]);
        drop(out);
        assert!(input.recv_batch(100, 100, Duration::from_millis(20), |_| 1).await.is_none());
    }
}
