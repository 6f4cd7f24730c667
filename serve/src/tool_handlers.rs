//! The tools on HTTP: `POST /v1/locate`, `POST /v1/graph/{tool}` (the code-graph tools of
//! [`ctxd_codegraph::tools`]) and `POST /v1/symbols/{list|get}` ([`crate::symbol_tools`]). The body
//! is the MCP tool's arguments, so HTTP and MCP answer alike.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use ctxd_codegraph::tools::{GraphTool, GraphTools};
use ctxd_context::assembler::Assembler;
use serde_json::Value;

use crate::reply::{error, outcome, reply, tool_args};
use crate::state::{AppState, CallerExt};

/// `POST /v1/locate`: the body is `locate`'s arguments.
pub(crate) async fn locate(
    State(tools): State<Arc<GraphTools>>,
    State(state): State<AppState>,
    caller: CallerExt,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    graph_answer(&tools, &state, &caller, GraphTool::Locate, body).await
}

/// `POST /v1/graph/<tool>`: the body is the tool's arguments.
pub(crate) async fn graph(
    State(tools): State<Arc<GraphTools>>,
    State(state): State<AppState>,
    caller: CallerExt,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    match GraphTool::from_name(&name).filter(|t| *t != GraphTool::Locate) {
        Some(tool) => graph_answer(&tools, &state, &caller, tool, body).await,
        None => {
            let names: Vec<&str> =
                GraphTool::ALL.iter().filter(|t| **t != GraphTool::Locate).map(|t| t.name()).collect();
            error(
                StatusCode::NOT_FOUND,
                format!("no graph tool '{name}': use /v1/graph/ followed by one of {}", names.join(", ")),
            )
        }
    }
}

async fn graph_answer(
    tools: &GraphTools,
    state: &AppState,
    caller: &CallerExt,
    tool: GraphTool,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    let started = Instant::now();
    let (args, scope) = match tool_args(state, caller, body, (tool.name(), "graph"), started) {
        Ok(parsed) => parsed,
        Err(resp) => return resp,
    };
    let res = tools.call(tool, &args, scope.as_ref()).await;
    outcome(tool.name(), "graph", started, res.as_ref().err());
    reply(tool.name(), res)
}

/// `POST /v1/symbols/<list|get>`: the body is the tool's arguments.
pub(crate) async fn symbols(
    State(assembler): State<Arc<Assembler>>,
    State(state): State<AppState>,
    caller: CallerExt,
    Path(which): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    let name = match which.as_str() {
        "list" => "list_symbols",
        "get" => "get_symbols",
        _ => {
            return error(
                StatusCode::NOT_FOUND,
                format!("no symbol tool '{which}': use /v1/symbols/list or /v1/symbols/get"),
            )
        }
    };
    let started = Instant::now();
    let (args, scope) = match tool_args(&state, &caller, body, (name, "symbols"), started) {
        Ok(parsed) => parsed,
        Err(resp) => return resp,
    };
    let res = crate::symbol_tools::call(&assembler, name, args, None, scope.as_ref()).await;
    outcome(name, "symbols", started, res.as_ref().err());
    reply(name, res.map(|(_, structured)| structured))
}
