//! Admission control of the query routes: a bounded number of queries run at once, a bounded
//! queue waits, and everything beyond is answered at once with **503 and `Retry-After`**.
//!
//! A query is CPU work (embedding the query, rescoring candidates with the model): accepting
//! more of them than the cores can run only makes every answer later. Measured before this
//! layer existed, 50 concurrent clients on 2 cores saw p50 4.6 s and p99 14.8 s with the
//! requests queued without bound inside the process. Now:
//!
//! * at most `[server] max_concurrent_queries` queries run (0: one per CPU core);
//! * at most `[server] max_queued_queries` more wait for a slot, each at most
//!   `[server] queue_timeout_ms`;
//! * a query that finds the queue full, or waits too long, gets `503 Service Unavailable` with
//!   `Retry-After: 1` and `{"error": "..."}` saying which limit it hit, so a client (or a
//!   load balancer in front of several readers) retries elsewhere or later instead of piling up.
//!
//! The queue's depth is also the **load signal** ([`Pressure`]) routed search reads to shrink its
//! rescoring depth while queries wait ([`ctxd_search::pressure`]). `POST /v1/search` looks in the
//! answer cache ([`ctxd_search::answers`]) *before* it asks for a slot: a repeated question is
//! answered at once even when the queue is full, and a question another request is computing
//! now waits for that answer without taking a slot or a place in the queue.
//!
//! One gate serves the whole process: the HTTP query routes and Arrow Flight searches (a
//! refused Flight search gets `UNAVAILABLE` with the same message and `retry-after: 1` in its
//! metadata; Flight table scans are exports, not queries, and are not gated).
//!
//! Metrics: `ctxd_query_in_flight` and `ctxd_query_queued` (gauges),
//! `ctxd_query_queue_wait_seconds` (histogram), `ctxd_query_rejected_total{reason=queue_full|queue_timeout}`.
//! Health, readiness, metrics and status routes are never queued.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use ctxd_search::pressure::Pressure;
use tokio::sync::Semaphore;

use ctxd_search::metrics as search_m;

/// The limits (`[server] max_concurrent_queries`, `max_queued_queries`, `queue_timeout_ms`).
#[derive(Debug, Clone, Copy)]
pub struct AdmissionLimits {
    /// Queries running at once; 0: one per CPU core.
    pub concurrent: usize,
    /// Queries waiting for a slot at most.
    pub queued: usize,
    /// Longest wait for a slot.
    pub timeout: Duration,
}

impl Default for AdmissionLimits {
    fn default() -> Self {
        Self { concurrent: 0, queued: 64, timeout: Duration::from_millis(2000) }
    }
}

/// The gate every query route passes (one per router).
pub struct Admission {
    slots: Arc<Semaphore>,
    limits: AdmissionLimits,
    pressure: Pressure,
    /// Questions of stale answers being computed again in the background now.
    revalidating: AtomicUsize,
}

impl Admission {
    /// A gate with `limits`, publishing its queue to `pressure`.
    pub fn new(limits: AdmissionLimits, pressure: Pressure) -> Self {
        let concurrent = match limits.concurrent {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        };
        pressure.set_slots(concurrent);
        Self {
            slots: Arc::new(Semaphore::new(concurrent)),
            limits: AdmissionLimits { concurrent, ..limits },
            pressure,
            revalidating: AtomicUsize::new(0),
        }
    }

    fn refuse(&self, reason: &'static str, message: String) -> Refused {
        metrics::counter!(search_m::QUERY_REJECTED_TOTAL, "reason" => reason).increment(1);
        Refused { message }
    }

    /// Waits for a slot, or refuses (see the module docs).
    pub async fn enter(&self) -> Result<Entered, Refused> {
        let slot = match self.slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                let Some(_queued) = self.pressure.enqueue(self.limits.queued) else {
                    return Err(self.refuse(
                        "queue_full",
                        format!(
                            "server busy: {} queries running and {} waiting (server.max_queued_queries); retry after \
                             1 s or ask another reader",
                            self.limits.concurrent, self.limits.queued
                        ),
                    ));
                };
                let started = Instant::now();
                let acquired = tokio::time::timeout(self.limits.timeout, self.slots.clone().acquire_owned()).await;
                metrics::histogram!(search_m::QUERY_QUEUE_WAIT_SECONDS).record(started.elapsed().as_secs_f64());
                match acquired {
                    Ok(Ok(p)) => p,
                    _ => {
                        return Err(self.refuse(
                            "queue_timeout",
                            format!(
                                "server busy: no query slot freed within {} ms (server.queue_timeout_ms); retry after \
                                 1 s or ask another reader",
                                self.limits.timeout.as_millis()
                            ),
                        ))
                    }
                }
            }
        };
        Ok(Entered { _slot: slot, _running: self.pressure.run() })
    }
}

/// A search as `POST /v1/search` and Flight answer it: from the answer cache without queueing
/// (an invalid request's error too), else once `gate` (if any) gives it a slot; `Err` when the
/// gate refused it. A stale answer (served while busy, see [`ctxd_search::answers`]) or a
/// carried one is returned at once and its question computed again in the background
/// ([`revalidate`]).
pub async fn search(
    gate: Option<&Arc<Admission>>,
    searcher: &ctxd_search::searcher::Searcher,
    req: &ctxd_search::search::ValidSearch,
) -> Result<Result<ctxd_search::search::SearchResponse, ctxd_search::error::SearchError>, Refused> {
    match searcher.cached(req).await {
        Ok(ctxd_search::searcher::Cached::Answer(answer)) => {
            match (gate, answer.stale_ms, answer.carried_ms) {
                (Some(gate), Some(_), _) => revalidate(gate, searcher, req, Revalidation::Stale),
                (Some(gate), None, Some(_)) => revalidate(gate, searcher, req, Revalidation::Carried),
                // Without a gate nothing computes it again in the background: now, then.
                (None, _, Some(_)) => return Ok(searcher.search(req).await),
                _ => {}
            }
            Ok(Ok(answer))
        }
        Err(_) => Ok(searcher.search(req).await),
        Ok(ctxd_search::searcher::Cached::Compute(lead)) => {
            let _entered = match gate {
                Some(gate) => Some(gate.enter().await?),
                None => None,
            };
            let answer = searcher.search(req).await;
            // The answer is kept: the requests that waited for this one look in the cache now.
            drop(lead);
            Ok(answer)
        }
    }
}

/// Which kind of answer a revalidation replaces.
#[derive(Clone, Copy)]
enum Revalidation {
    /// Of a superseded version, served while busy.
    Stale,
    /// Carried across commits that changed none of its files: its results are current, only a
    /// changed file's rank is unknown — computed again one at a time, while the queue is less
    /// than a quarter full.
    Carried,
}

/// Computes a stale or carried answer's question again at the latest version, in the
/// background, through the gate like any query (so it waits its turn, and sheds rescoring under
/// load as they do): the client got the answer at once; the next one asking gets the fresh
/// answer. For stale answers at most half the queue (at least one) is taken by such work, and
/// none is started while the queue is three quarters full, so clients' own questions keep
/// places; for carried ones, one at a time and only while the queue is less than a quarter full
/// (after a commit every hot answer is carried: recomputing them all at once was the tail
/// `benches/load.py` measured).
/// A question already answered at the latest version, or being computed, is not computed again.
/// `ctxd_query_answer_cache_revalidations_total`.
fn revalidate(
    gate: &Arc<Admission>,
    searcher: &ctxd_search::searcher::Searcher,
    req: &ctxd_search::search::ValidSearch,
    kind: Revalidation,
) {
    let (most, room) = match kind {
        Revalidation::Stale => ((gate.limits.queued / 2).max(1), gate.limits.queued * 3 / 4),
        Revalidation::Carried => (1, (gate.limits.queued / 4).max(1)),
    };
    if gate.pressure.queued() >= room {
        return; // the rest of the queue is the clients' own
    }
    if gate.revalidating.fetch_add(1, Ordering::AcqRel) >= most {
        gate.revalidating.fetch_sub(1, Ordering::AcqRel);
        return;
    }
    let (gate, searcher, req) = (gate.clone(), searcher.clone(), req.clone());
    tokio::spawn(async move {
        if let Some(lead) = searcher.revalidation(&req).await {
            if let Ok(_entered) = gate.enter().await {
                metrics::counter!(search_m::ANSWER_CACHE_REVALIDATIONS_TOTAL).increment(1);
                let _ = searcher.search(&req).await;
            }
            drop(lead);
        }
        gate.revalidating.fetch_sub(1, Ordering::AcqRel);
    });
}

/// A query refused: the sentence saying which limit it hit. HTTP answers it with 503 and
/// `Retry-After: 1` (its [`IntoResponse`]); Flight with `UNAVAILABLE` (`crate::flight`).
#[derive(Debug)]
pub struct Refused {
    pub message: String,
}

/// Seconds a refused client should wait before it retries.
pub const RETRY_AFTER_SECS: &str = "1";

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        let body = axum::Json(serde_json::json!({ "error": self.message }));
        (StatusCode::SERVICE_UNAVAILABLE, [(header::RETRY_AFTER, RETRY_AFTER_SECS)], body).into_response()
    }
}

/// A query admitted: its slot and its count as running, both given back when dropped.
pub struct Entered {
    _slot: tokio::sync::OwnedSemaphorePermit,
    _running: ctxd_search::pressure::RunningQuery,
}

/// The middleware: reads the request's body, then runs the request once a slot is free, or
/// refuses it (see the module docs). The body comes first so that a client uploading slowly
/// does not hold a slot meanwhile; it is read up to the largest body any query route takes
/// (each route's own limit still applies after).
pub async fn admit(State(gate): State<Arc<Admission>>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, ctxd_codegraph::tools::MAX_TOOL_BODY_BYTES).await {
        Ok(bytes) => bytes,
        Err(e) => {
            let too_large = e.to_string().contains("length limit");
            let (status, message) = if too_large {
                let max = ctxd_codegraph::tools::MAX_TOOL_BODY_BYTES;
                (
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("request body over {max} bytes: send less (e.g. a shorter issue text)"),
                )
            } else {
                (StatusCode::BAD_REQUEST, format!("reading the request body failed (the client stopped sending?): {e}"))
            };
            return (status, axum::Json(serde_json::json!({ "error": message }))).into_response();
        }
    };
    let req = Request::from_parts(parts, axum::body::Body::from(bytes));
    match gate.enter().await {
        Ok(_entered) => next.run(req).await,
        Err(refused) => refused.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::post;
    use axum::Router;

    /// A route that holds its slot until told to finish.
    #[tokio::test]
    async fn queries_beyond_the_slots_and_queue_get_503_with_retry_after() {
        let gate = Arc::new(Admission::new(
            AdmissionLimits { concurrent: 1, queued: 1, timeout: Duration::from_millis(300) },
            Pressure::default(),
        ));
        let release = Arc::new(tokio::sync::Notify::new());
        let held = release.clone();
        let app = Router::new()
            .route(
                "/q",
                post(move || {
                    let held = held.clone();
                    async move {
                        held.notified().await;
                        "done"
                    }
                }),
            )
            .layer(axum::middleware::from_fn_with_state(gate.clone(), admit));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let client = reqwest::Client::new();
        let ask = || client.post(format!("http://{addr}/q")).send();

        let first = tokio::spawn(ask());
        tokio::time::sleep(Duration::from_millis(100)).await;
        let second = tokio::spawn(ask()); // waits in the queue
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(gate.pressure.queued(), 1);
        let third = ask().await.unwrap(); // the queue is full
        assert_eq!(third.status(), 503);
        assert_eq!(third.headers()[header::RETRY_AFTER], "1");
        assert!(third.text().await.unwrap().contains("max_queued_queries"));
        // The queued one times out while the first still holds the slot.
        let second = second.await.unwrap().unwrap();
        assert_eq!(second.status(), 503);
        assert!(second.text().await.unwrap().contains("queue_timeout_ms"));
        release.notify_one();
        assert_eq!(first.await.unwrap().unwrap().status(), 200);
        // Free again: a query runs at once.
        let fourth = tokio::spawn(ask());
        tokio::time::sleep(Duration::from_millis(100)).await;
        release.notify_one();
        assert_eq!(fourth.await.unwrap().unwrap().status(), 200);
        assert_eq!((gate.pressure.queued(), gate.pressure.running()), (0, 0));
    }

    /// A client that sends its body slowly waits outside the gate: with one slot and no queue,
    /// another query still runs meanwhile.
    #[tokio::test]
    async fn a_slow_upload_does_not_hold_a_slot() {
        use tokio::io::AsyncWriteExt;
        let gate = Arc::new(Admission::new(
            AdmissionLimits { concurrent: 1, queued: 0, timeout: Duration::from_millis(100) },
            Pressure::default(),
        ));
        let app = Router::new()
            .route("/q", post(|body: String| async move { format!("got {} bytes", body.len()) }))
            .layer(axum::middleware::from_fn_with_state(gate.clone(), admit));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        let mut slow = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = "POST /q HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\nconnection: close\r\n\r\nhello";
        slow.write_all(head.as_bytes()).await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(gate.pressure.running(), 0, "the slow upload must not hold the slot");
        let other = reqwest::Client::new().post(format!("http://{addr}/q")).body("abc").send().await.unwrap();
        assert_eq!(other.status(), 200);
        assert_eq!(other.text().await.unwrap(), "got 3 bytes");
        slow.write_all(b"world").await.unwrap();
        let mut answer = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut slow, &mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("got 10 bytes"), "{answer}");
    }
}
