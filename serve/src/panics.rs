//! Request ids and handler panics: the outermost layer of the HTTP router.
//!
//! Every request gets an id — the client's `x-request-id` when it sent a usable one (1–64
//! characters of `A–Z a–z 0–9 - _ .`), else one made here (`ctxd-` and a per-process counter,
//! started from the clock so ids of a restarted daemon do not repeat) — echoed in the answer's
//! `x-request-id` header. A handler that panics does not take the connection, the daemon or
//! other requests with it: the panic is caught at this layer, logged at error level with the
//! request id, method, route and the panic's message, counted
//! (`ctxd_server_handler_panics_total`), and answered `500 {"error": "...", "request_id": "..."}`,
//! so the client can quote the id and the operator find the log line. (A panic in a task a
//! handler spawned is that task's `JoinError`, answered by the handler as any other fault; one
//! while a streamed body is sent — `/v1/context/stream`, MCP's event stream — comes after this
//! layer has answered, and ends that connection only.)

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;

/// The header carrying a request's id, both ways.
pub const REQUEST_ID: &str = "x-request-id";
/// Longest client-sent id taken as it is.
const MAX_ID_CHARS: usize = 64;

/// The id of a request: the client's when usable, else a new one.
fn request_id(req: &Request) -> String {
    let sent = req.headers().get(REQUEST_ID).and_then(|v| v.to_str().ok()).unwrap_or("");
    let usable = (1..=MAX_ID_CHARS).contains(&sent.len())
        && sent.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if usable {
        return sent.to_string();
    }
    static NEXT: OnceLock<AtomicU64> = OnceLock::new();
    let next = NEXT.get_or_init(|| {
        let micros = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64);
        AtomicU64::new(micros)
    });
    format!("ctxd-{:x}", next.fetch_add(1, Ordering::Relaxed))
}

/// The panic's message, when it carried one.
fn message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// The layer (see the module docs): `axum::middleware::from_fn(answer_panics)`.
pub async fn answer_panics(req: Request, next: Next) -> Response {
    let id = request_id(&req);
    let (method, route) = (req.method().clone(), req.uri().path().to_string());
    let mut resp = match AssertUnwindSafe(next.run(req)).catch_unwind().await {
        Ok(resp) => resp,
        Err(panic) => {
            metrics::counter!(crate::metrics::HANDLER_PANICS_TOTAL).increment(1);
            tracing::error!(request_id = %id, %method, route, "a handler panicked: {}", message(&*panic));
            let body = serde_json::json!({
                "error": format!(
                    "internal error while answering this request (a bug in ctxd; the daemon runs on): \
                     report it with request id {id}, whose log line has the details"
                ),
                "request_id": id,
            });
            (StatusCode::INTERNAL_SERVER_ERROR, axum::Json(body)).into_response()
        }
    };
    if let Ok(v) = HeaderValue::from_str(&id) {
        resp.headers_mut().insert(REQUEST_ID, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::routing::get;
    use axum::Router;

    async fn boom() -> &'static str {
        panic!("kaboom {}", 42)
    }

    async fn serve_router() -> String {
        let app = Router::new()
            .route("/boom", get(boom))
            .route("/ok", get(|| async { "fine" }))
            .layer(axum::middleware::from_fn(answer_panics));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_panicking_handler_is_answered_500_with_its_request_id_and_the_server_runs_on() {
        let base = serve_router().await;
        let client = reqwest::Client::new();
        let resp = client.get(format!("{base}/boom")).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 500);
        let id = resp.headers()[REQUEST_ID].to_str().unwrap().to_string();
        assert!(id.starts_with("ctxd-"), "{id}");
        let body: serde_json::Value = resp.json().await.unwrap();
        assert_eq!(body["request_id"], id.as_str());
        assert!(body["error"].as_str().unwrap().contains(&id), "{body}");
        // The next request, on the same server, is answered; ids differ; a client's id is kept.
        let again = client.get(format!("{base}/boom")).send().await.unwrap();
        assert_ne!(again.headers()[REQUEST_ID].to_str().unwrap(), id);
        let ok = client.get(format!("{base}/ok")).header(REQUEST_ID, "trace-7.a_b").send().await.unwrap();
        assert_eq!(ok.status().as_u16(), 200);
        assert_eq!(ok.headers()[REQUEST_ID], "trace-7.a_b");
        assert_eq!(ok.text().await.unwrap(), "fine");
        // An unusable client id (too long, odd characters) is replaced.
        let odd = client.get(format!("{base}/ok")).header(REQUEST_ID, "a b/c").send().await.unwrap();
        assert!(odd.headers()[REQUEST_ID].to_str().unwrap().starts_with("ctxd-"));
        let long = client.get(format!("{base}/ok")).header(REQUEST_ID, "x".repeat(65)).send().await.unwrap();
        assert!(long.headers()[REQUEST_ID].to_str().unwrap().starts_with("ctxd-"));
    }
}
