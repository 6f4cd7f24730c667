//! The batch symbol tools on the wire: MCP `list_symbols` / `get_symbols` (descriptions with
//! their token cost) and HTTP `POST /v1/symbols/list` / `POST /v1/symbols/get`. Both parse the
//! same JSON into [`ListSymbolsRequest`] / [`GetSymbolsRequest`] and call the assembler
//! ([`ctxd_context::symbols`]), so MCP and HTTP answer alike.

use serde_json::{json, Value};

use ctxd_context::assembler::Assembler;
use ctxd_context::symbols::{GetSymbolsRequest, ListSymbolsRequest};
use ctxd_search::error::SearchError;

fn tool(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "description": description, "inputSchema": schema })
}

/// The MCP descriptions of the two tools.
pub fn mcp_tools() -> Vec<Value> {
    let common = |mut props: Value| {
        props["as_of"] = json!({"type": "string", "description": "a snapshot: version number or tag"});
        props["session"] =
            json!({"type": "string", "description": "your task's session id (default: this connection's, for stdio)"});
        props
    };
    vec![
        tool(
            "list_symbols",
            "A file's outline in one call: its definitions in line order (nested ones indented) with line ranges, \
             signatures and the first doc line. `target` is a path, a folder or a module (pkg.mod, crate::a). \
             Cost: about 15 tokens per definition.",
            json!({"type": "object", "properties": common(json!({
                "target": {"type": "string"},
                "kinds": {"type": "array", "items": {"type": "string"}, "description": "only these kinds: function, class, method, struct, …"}})),
                "required": ["target"]}),
        ),
        tool(
            "get_symbols",
            "The sources of many definitions in one call, packed in the order asked into `budget` tokens; names \
             without a definition are listed as missing, sources that do not fit as over_budget, and (in a \
             session) sources sent before are cited, not repeated. Cost: at most `budget` tokens (default 4,000).",
            json!({"type": "object", "properties": common(json!({
                "names": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 100},
                "budget": {"type": "integer", "minimum": 1, "maximum": 32000, "default": 4000}})),
                "required": ["names"]}),
        ),
    ]
}

/// Whether `name` is one of these tools.
pub fn is_symbol_tool(name: &str) -> bool {
    matches!(name, "list_symbols" | "get_symbols")
}

/// Runs tool `name` with JSON `args` (the session defaults to `session`) over the sources of
/// `source` (resolved by the wire from the arguments and the caller's token); `(text, structured)`.
pub async fn call(
    assembler: &Assembler,
    name: &str,
    mut args: Value,
    session: Option<&str>,
    source: Option<&ctxd_index::scope::SourceScope>,
) -> Result<(String, Value), SearchError> {
    let bad = |e: serde_json::Error| SearchError::BadRequest(format!("{name}: {e}"));
    if let (Some(obj), Some(s)) = (args.as_object_mut(), session) {
        obj.entry("session").or_insert_with(|| json!(s));
    }
    match name {
        "list_symbols" => {
            let mut req: ListSymbolsRequest = serde_json::from_value(args).map_err(bad)?;
            req.source = source.cloned();
            let out = assembler.list_symbols(&req).await?;
            Ok((out.text.clone(), serde_json::to_value(&out).unwrap_or_default()))
        }
        _ => {
            let mut req: GetSymbolsRequest = serde_json::from_value(args).map_err(bad)?;
            req.source = source.cloned();
            let out = assembler.get_symbols(&req).await?;
            let mut text = out.text.clone();
            if !out.missing.is_empty() {
                text.push_str(&format!("no definition named: {}\n", out.missing.join(", ")));
            }
            if !out.over_budget.is_empty() {
                text.push_str(&format!(
                    "over the budget (ask again with a larger one): {}\n",
                    out.over_budget.join(", ")
                ));
            }
            Ok((text, serde_json::to_value(&out).unwrap_or_default()))
        }
    }
}
