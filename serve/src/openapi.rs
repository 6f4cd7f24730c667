//! `GET /openapi.json`: the HTTP API's contract, an OpenAPI 3.1 document built from the
//! handlers' own types, not written by hand.
//!
//! - A route whose handler reads a typed body (`Json<SearchRequest>`, `Scoped<ContextRequest>`,
//!   …) takes the JSON Schema of that type as its handler deserialises it ([`schemars`], the
//!   *deserialize* contract: defaults make a field optional, `deny_unknown_fields` forbids
//!   others); a typed answer is the schema of the type as it is serialised (`skip_serializing_if`
//!   makes a field optional). The two are generated apart and inlined, so a type never means
//!   two shapes under one name. `?last=` of `/v1/versions` takes its bounds from the handler's
//!   constants.
//! - `POST /v1/locate`, `/v1/graph/<tool>` and `/v1/symbols/<which>` take the MCP tools'
//!   arguments: their bodies are the tools' input schemas ([`crate::mcp_catalog::tools`]), one
//!   operation per tool (`/v1/graph/callers`, …), since one path template cannot carry eight
//!   schemas.
//! - Handlers that answer with untyped JSON (status, versions, sessions, embeddings, MCP's
//!   JSON-RPC, the tools' results) are `{"type": "object"}` here: the document claims no shape
//!   the code does not have.
//! - Every error is `{"error": "…"}` (`default`, the [`ERROR`] schema); the routes behind the
//!   bearer token say so (`security`), the open ones (`/healthz`, `/openapi.json`, the web page)
//!   carry an empty `security`.
//!
//! The test in `reference.rs` holds the document to the router (every route it serves is an
//! operation here, and nothing else); `ctxd/tests/integration/api_fuzz.rs` fuzzes a running
//! daemon from it with Schemathesis.

use axum::response::IntoResponse;
use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::{json, Map, Value};

use ctxd_codegraph::tools::GraphTool;
use ctxd_context::completion::{CompletionRequest, CompletionResponse};
use ctxd_context::request::{ContextRequest, ContextResponse};
use ctxd_search::search::{SearchRequest, SearchResponse};

use crate::aggregate::{AggregateRequest, AggregateResponse};
use crate::embed_handlers::{OpenAiRequest, TeiRequest};
use crate::status_handlers as status;

/// The name of the error body's schema under `components.schemas`.
pub const ERROR: &str = "Error";

/// What a route's request or answer body is.
enum Body {
    /// No body.
    Empty,
    /// `application/json` of this schema.
    Json(Value),
    /// Another media type, with what it holds.
    Other(&'static str, &'static str),
}

/// Who may call a route.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    /// The bearer token, when one is configured.
    Token,
    /// Anyone: the route holds no index data.
    Open,
}

/// One operation of the document.
struct Operation {
    method: &'static str,
    path: String,
    summary: &'static str,
    parameters: Vec<Value>,
    request: Body,
    /// The answers besides the `default` error: status and body (none: `200` and an object).
    answers: Vec<(&'static str, Body)>,
    access: Access,
}

impl Operation {
    fn new(method: &'static str, path: impl Into<String>, summary: &'static str) -> Self {
        let (path, parameters, answers) = (path.into(), Vec::new(), Vec::new());
        Self { method, path, summary, parameters, request: Body::Empty, answers, access: Access::Token }
    }

    fn takes(mut self, body: Body) -> Self {
        self.request = body;
        self
    }

    fn answers(mut self, status: &'static str, body: Body) -> Self {
        self.answers.push((status, body));
        self
    }

    fn open(mut self) -> Self {
        self.access = Access::Open;
        self
    }

    fn parameter(mut self, name: &str, place: &str, schema: Value, description: &str) -> Self {
        let required = place == "path";
        self.parameters.push(
            json!({"name": name, "in": place, "required": required, "schema": schema, "description": description}),
        );
        self
    }
}

/// The JSON Schema of `T` as its handler deserialises it.
fn request<T: JsonSchema>() -> Body {
    Body::Json(schema_of::<T>(SchemaSettings::draft2020_12().for_deserialize()))
}

/// The JSON Schema of `T` as a handler serialises it.
fn answer<T: JsonSchema>() -> Body {
    Body::Json(schema_of::<T>(SchemaSettings::draft2020_12().for_serialize()))
}

fn schema_of<T: JsonSchema>(settings: SchemaSettings) -> Value {
    let settings = settings.with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut schema = settings.into_generator().into_root_schema_for::<T>().to_value();
    if let Some(o) = schema.as_object_mut() {
        o.remove("$defs");
    }
    schema
}

/// The input schema of the catalog's MCP tool `name` (the routes that take a tool's arguments).
fn tool_arguments(tools: &[Value], name: &str) -> Body {
    let schema = tools.iter().find(|t| t["name"] == name).map(|t| t["inputSchema"].clone());
    Body::Json(schema.unwrap_or_else(|| json!({"type": "object"})))
}

/// Every operation the router serves.
fn operations() -> Vec<Operation> {
    let tools = crate::mcp_catalog::tools();
    let text = |what| Body::Other("text/plain", what);
    let mut ops = vec![
        Operation::new("post", "/v1/search", "Hybrid search: ranked chunks")
            .takes(request::<SearchRequest>())
            .answers("200", answer::<SearchResponse>()),
        Operation::new("post", "/v1/context", "A budgeted context for a task")
            .takes(request::<ContextRequest>())
            .answers("200", answer::<ContextResponse>()),
        Operation::new("post", "/v1/context/stream", "The same, as NDJSON lines").takes(request::<ContextRequest>()).answers(
            "200",
            Body::Other("application/x-ndjson", "one {\"block\":…} line per block, then {\"done\":…} or {\"error\":…}"),
        ),
        Operation::new("post", "/v1/completion-context", "Snippets for an editor's completion")
            .takes(request::<CompletionRequest>())
            .answers("200", answer::<CompletionResponse>()),
        Operation::new("post", "/v1/aggregate", "A context from several sources")
            .takes(request::<AggregateRequest>())
            .answers("200", answer::<AggregateResponse>()),
        Operation::new("post", "/v1/locate", "The files an issue is about").takes(tool_arguments(&tools, "locate")),
        Operation::new("post", "/v1/embeddings", "Embeddings, OpenAI's form").takes(request::<OpenAiRequest>()),
        Operation::new("post", "/embed", "Embeddings, text-embeddings-inference's form")
            .takes(request::<TeiRequest>())
            .answers("200", answer::<Vec<Vec<f32>>>()),
        Operation::new("get", "/info", "The embedding model this process serves"),
        Operation::new("post", "/mcp", "Model Context Protocol (JSON-RPC 2.0)")
            .takes(Body::Json(json!({"type": ["object", "array"]})))
            .answers("200", Body::Json(json!({"type": ["object", "array"]})))
            .answers("202", Body::Empty),
        Operation::new("get", "/mcp", "Not offered (no server-initiated stream): 405").answers("405", Body::Empty),
        Operation::new("get", "/v1/status", "Version, readiness, model, role, sources"),
        Operation::new("get", "/v1/versions", "The last versions of the index").parameter(
            "last",
            "query",
            json!({"type": "integer", "minimum": 1, "maximum": status::MAX_VERSIONS_SHOWN}),
            &format!("how many (default {})", status::VERSIONS_SHOWN),
        ),
        Operation::new("get", "/v1/sessions", "Live sessions' usage"),
        Operation::new("get", "/v1/sessions/{id}", "One session's usage").parameter(
            "id",
            "path",
            json!({"type": "string"}),
            "the session id",
        ),
        Operation::new("post", "/v1/sources/{name}/poll", "A git source polls its refs now (a push webhook)")
            .parameter("name", "path", json!({"type": "string"}), "the git source")
            .takes(Body::Other("application/json", "the git host's push event (not read beyond its signature)"))
            .answers("202", Body::Json(json!({"type": "object", "properties": {"source": {"type": "string"}, "polling": {"type": "boolean"}}}))),
        Operation::new("get", "/healthz", "200 while the process serves").open().answers("200", text("ok")),
        Operation::new("get", "/readyz", "200 once the initial scan is committed")
            .answers("200", text("ready"))
            .answers("503", text("initial scan in progress")),
        Operation::new("get", "/metrics", "Prometheus text").answers("200", text("Prometheus exposition format")),
        Operation::new("get", "/openapi.json", "This document").open(),
        Operation::new("get", "/", "Redirects to the web page")
            .open()
            .answers("303", Body::Empty)
            .answers("200", Body::Other("text/html", "the page, where the redirect is followed")),
        Operation::new("get", "/ui", "The web page").open().answers("200", Body::Other("text/html", "the page")),
        Operation::new("get", "/ui/{name}", "The web page's files")
            .open()
            .parameter("name", "path", json!({"type": "string"}), "a file of the page")
            .answers("200", Body::Other("*/*", "the file"))
            .answers("404", text("no such file of the web page")),
    ];
    for tool in GraphTool::ALL.iter().filter(|t| **t != GraphTool::Locate) {
        let summary = "A code-graph tool with its MCP arguments";
        let path = format!("/v1/graph/{}", tool.name());
        ops.push(Operation::new("post", path, summary).takes(tool_arguments(&tools, tool.name())));
    }
    for (which, name) in [("list", "list_symbols"), ("get", "get_symbols")] {
        let summary = "A symbol tool with its MCP arguments";
        ops.push(Operation::new("post", format!("/v1/symbols/{which}"), summary).takes(tool_arguments(&tools, name)));
    }
    ops
}

/// `content` of a request or answer body, or `None` for no body.
fn content(body: &Body) -> Option<Value> {
    match body {
        Body::Empty => None,
        Body::Json(schema) => Some(json!({"application/json": {"schema": schema}})),
        Body::Other(media, what) => Some(json!({ *media: {"schema": {"description": what}} })),
    }
}

fn operation_json(op: &Operation) -> Value {
    let error = json!({"$ref": format!("#/components/schemas/{ERROR}")});
    let mut responses = json!({
        "default": {"description": "an error: what failed, and what to do", "content": {"application/json": {"schema": error}}},
    });
    let object = [("200", Body::Json(json!({"type": "object"})))];
    for (status, body) in if op.answers.is_empty() { &object[..] } else { &op.answers[..] } {
        let mut answer = json!({"description": op.summary});
        if let Some(c) = content(body) {
            answer["content"] = c;
        }
        responses[*status] = answer;
    }
    let mut out = json!({
        "operationId": format!("{} {}", op.method, op.path),
        "summary": op.summary,
        "responses": responses,
    });
    if let Some(c) = content(&op.request) {
        out["requestBody"] = json!({"required": true, "content": c});
    }
    if !op.parameters.is_empty() {
        out["parameters"] = Value::Array(op.parameters.clone());
    }
    if op.access == Access::Open {
        out["security"] = json!([]);
    }
    out
}

/// The whole document.
pub fn document() -> Value {
    let mut paths = Map::new();
    for op in operations() {
        let item = paths.entry(op.path.clone()).or_insert_with(|| json!({}));
        item[op.method] = operation_json(&op);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "ctxd",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "ctxd's HTTP API: ranked, cited, token-budgeted context over indexed code and docs. \
                            docs/reference/http.md describes each route.",
        },
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer",
                "description": "the token of [server] token_file or source_tokens_file, when one is configured"}},
            "schemas": {ERROR: {"type": "object", "properties": {"error": {}}, "required": ["error"]}},
        },
        "paths": paths,
    })
}

/// `GET /openapi.json`.
pub(crate) async fn handler() -> axum::response::Response {
    axum::Json(document()).into_response()
}

/// The `(METHOD, path)` of every operation (for the router test).
#[cfg(test)]
pub(crate) fn routes() -> Vec<(String, String)> {
    operations().into_iter().map(|op| (op.method.to_uppercase(), op.path)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_schemas_are_the_handlers_types() {
        let doc = document();
        let search = &doc["paths"]["/v1/search"]["post"]["requestBody"]["content"]["application/json"]["schema"];
        assert_eq!(search["required"], json!(["query"]), "{search}");
        assert_eq!(search["additionalProperties"], json!(false), "deny_unknown_fields is the schema's too");
        let modes = search["properties"]["mode"].to_string();
        assert!(["routed", "hybrid", "bm25", "symbol"].iter().all(|m| modes.contains(m)), "{modes}");
        let source = &search["properties"]["source"];
        assert!(source.to_string().contains("array"), "source is a name or a list: {source}");
        let callers = &doc["paths"]["/v1/graph/callers"]["post"]["requestBody"]["content"]["application/json"];
        assert_eq!(callers["schema"]["required"], json!(["symbol"]));
        assert!(doc["paths"]["/v1/graph/locate"].is_null(), "locate has its own route");
    }

    #[test]
    fn answers_follow_serialisation_and_open_routes_say_so() {
        let doc = document();
        let answer = &doc["paths"]["/v1/search"]["post"]["responses"]["200"]["content"]["application/json"]["schema"];
        let required = answer["required"].as_array().cloned().unwrap_or_default();
        assert!(required.contains(&json!("results")), "{answer}");
        assert!(!required.contains(&json!("stale_ms")), "a skipped field is optional: {answer}");
        assert_eq!(doc["paths"]["/healthz"]["get"]["security"], json!([]));
        assert!(doc["paths"]["/v1/status"]["get"]["security"].is_null(), "the token is the default");
        assert_eq!(doc["openapi"], "3.1.0");
    }
}
