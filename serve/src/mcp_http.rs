//! MCP's streamable HTTP transport on `POST /mcp`: JSON-RPC messages answered with
//! `application/json` (notifications with 202), and the `Mcp-Session-Id` header: `initialize`
//! issues one, and the requests that carry it are that session's (what `get_context` and
//! `get_symbols` sent is not repeated); `?tools=` narrows the tools offered. The tools themselves
//! are [`crate::mcp`]'s.

use axum::extract::rejection::JsonRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::reply::error;
use crate::state::{AppState, CallerExt};
use ctxd_choice::ToolPreset;

/// The MCP session header of the streamable HTTP transport.
const MCP_SESSION_ID: &str = "mcp-session-id";

/// A new MCP session id: 128 random bits (the process's random hasher keys, a counter and the
/// time).
fn new_mcp_session_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let half = |salt: u64| {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(n);
        h.write_u128(nanos);
        h.write_u64(salt);
        h.finish()
    };
    format!("mcp-{:016x}{:016x}", half(1), half(2))
}

/// `POST /mcp?tools=minimal`: a client narrows the tools the server offers ([`ToolPreset`]; it
/// cannot widen what `[server] mcp_tools` allows).
#[derive(Debug, serde::Deserialize)]
pub(crate) struct McpQuery {
    tools: Option<String>,
}

/// MCP's streamable HTTP transport, answering each JSON-RPC message (or batch) with
/// `application/json`; notifications get 202. `initialize` issues an `Mcp-Session-Id`; the
/// requests that carry it are that session's (what `get_context`/`get_symbols` sent is not
/// repeated) unless a tool call names another `session`.
pub(crate) async fn mcp(
    State(state): State<AppState>,
    caller: CallerExt,
    Query(query): Query<McpQuery>,
    headers: axum::http::HeaderMap,
    body: Result<Json<serde_json::Value>, JsonRejection>,
) -> Response {
    let Some(server) = &state.mcp else { return error(StatusCode::NOT_FOUND, "mcp is not enabled".into()) };
    let msg = match body {
        Ok(Json(v)) => v,
        Err(rej) => return (StatusCode::BAD_REQUEST, Json(crate::mcp::parse_error(rej.body_text()))).into_response(),
    };
    let given = match headers.get(MCP_SESSION_ID).map(|v| v.to_str()) {
        None => None,
        Some(Ok(id)) if ctxd_context::session::validate_id(id).is_ok() => Some(id.to_string()),
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid Mcp-Session-Id header: use the id the initialize response carried".into(),
            )
        }
    };
    let issued = (given.is_none() && msg.get("method").and_then(serde_json::Value::as_str) == Some("initialize"))
        .then(new_mcp_session_id);
    let mut server = (**server).clone().for_caller(caller.and_then(|c| c.0.sources));
    if let Some(asked) = query.tools.as_deref() {
        match asked.parse::<ToolPreset>() {
            Ok(asked) => server = server.narrowed_to(&asked),
            Err(e) => return error(StatusCode::BAD_REQUEST, format!("?tools= {e}")),
        }
    }
    let reply = match given.as_ref().or(issued.as_ref()) {
        Some(id) => server.with_session(id.clone()).handle_message(msg).await,
        None => server.handle_message(msg).await,
    };
    let mut resp = match reply {
        Some(r) => Json(r).into_response(),
        None => StatusCode::ACCEPTED.into_response(),
    };
    if let Some(value) = issued.and_then(|id| axum::http::HeaderValue::from_str(&id).ok()) {
        resp.headers_mut().insert(MCP_SESSION_ID, value);
    }
    resp
}

/// No server-initiated stream: GET on the MCP endpoint is not offered.
pub(crate) async fn mcp_get() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [(axum::http::header::ALLOW, "POST")]).into_response()
}
