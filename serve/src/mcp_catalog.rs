//! The MCP tool list (`tools/list`): each tool's name, description (with its approximate token
//! cost, so an agent can plan its context window) and argument schema — ctxd's own tools here,
//! the symbol and graph tools from [`crate::symbol_tools`] and [`crate::graph_tools`], and the
//! `source`/`ref` arguments every tool takes. The dispatcher is [`crate::mcp`].

use serde_json::{json, Value};

fn tool(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "description": description, "inputSchema": schema })
}

/// The tool list (`tools/list`).
pub fn tools() -> Vec<Value> {
    let mut list = vec![
        tool(
            "search",
            "Hybrid code search (vectors + BM25 + symbols, routed by query shape): ranked chunks cited as \
             path:start-end. Cost: about 120 tokens per result (k=10: ~1,200).",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "description": "free text, a symbol, a path[:line] or an error message"},
                "k": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
                "mode": {"type": "string", "enum": ["routed", "hybrid", "vector", "bm25", "symbol"], "default": "routed"},
                "path_prefix": {"type": "string"}, "language": {"type": "string"}},
                "required": ["query"]}),
        ),
        tool(
            "get_context",
            "The code and docs that answer a question, deduplicated and packed into a token budget, each block \
             cited. Within a session, what it was already sent is cited in one line instead of repeated. Cost: at \
             most `budget` tokens (default 4,000).",
            json!({"type": "object", "properties": {
                "query": {"type": "string"},
                "session": {"type": "string", "description": "your task's session id (default: this connection's, for stdio)"},
                "as_of": {"type": "string", "description": "a snapshot: an index version number or a tag (default: the latest)"},
                "skeletons": {"type": "boolean", "default": true, "description": "send what does not fit whole as signature skeletons"},
                "assembly": {"type": "string", "enum": ["auto", "balanced", "hierarchical", "sequential", "thematic"], "default": "auto",
                    "description": "layout: by relevance (balanced), file outlines first (hierarchical), file and line order (sequential), grouped by topic (thematic); auto picks by intent"},
                "doc_types": {"type": "array", "items": {"type": "string", "enum": ["code", "docs", "config", "tests"]},
                    "description": "only these kinds of files (default: all)"},
                "budget": {"type": "integer", "minimum": 64, "maximum": 32000, "default": 4000},
                "format": {"type": "string", "enum": ["xml", "markdown", "plain"], "default": "markdown"}},
                "required": ["query"]}),
        ),
        tool(
            "search_symbols",
            "Definitions by name (exact, or by prefix): kind, qualified name, path:lines, signature. Cost: about \
             30 tokens per symbol (limit 20: ~600).",
            json!({"type": "object", "properties": {
                "name": {"type": "string"}, "prefix": {"type": "boolean", "default": false},
                "kind": {"type": "string", "description": "function, method, struct, class, trait, interface, enum, …"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}},
                "required": ["name"]}),
        ),
        tool(
            "get_symbol_source",
            "The full source of one definition (function, type, …) by name or qualified name, from the index. \
             Cost: the definition's size (typically 100-1,500 tokens).",
            json!({"type": "object", "properties": {
                "name": {"type": "string"}, "path": {"type": "string", "description": "disambiguate by file"}},
                "required": ["name"]}),
        ),
        tool(
            "get_repo_overview",
            "What is in the index: languages, top folders, key types and modules. Cost: at most `max_tokens` \
             (default 1,500).",
            json!({"type": "object", "properties": {
                "max_tokens": {"type": "integer", "minimum": 100, "maximum": 8000, "default": 1500}}}),
        ),
        tool(
            "check_index",
            "Index freshness: version, last commit time, and the files modified, added or removed since; with \
             refresh=true re-indexes them first. Cost: ~100 tokens plus ~15 per changed file listed (at most 50).",
            json!({"type": "object", "properties": {"refresh": {"type": "boolean", "default": false}}}),
        ),
    ];
    list.extend(crate::symbol_tools::mcp_tools());
    list.extend(crate::graph_tools::mcp_tools());
    // Every tool that reads the index takes `source` (an index of named sources).
    for t in list.iter_mut().filter(|t| t["name"] != "check_index") {
        if let Some(props) = t["inputSchema"]["properties"].as_object_mut() {
            props.insert(
                "ref".into(),
                json!({"type": "string", "description": "a git source's branch, tag or commit (default: its first configured ref)"}),
            );
            props.insert(
                "source".into(),
                json!({"description": "only these named sources: a name, \"a,b\" or a list (default: all you may read)",
                       "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
            );
        }
    }
    list
}
