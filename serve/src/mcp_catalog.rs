//! The MCP tool list (`tools/list`): each tool's name, description (with its approximate token
//! cost, so an agent can plan its context window) and argument schema — ctxd's own tools here,
//! the symbol and graph tools from [`crate::symbol_tools`] and [`crate::graph_tools`], and the
//! `source`/`ref` arguments every tool takes. The dispatcher is [`crate::mcp`].
//!
//! Every tool's description costs tokens in each request an agent makes, used or not, so a server
//! can offer a subset ([`ToolPreset`]: `ctxd mcp --tools`, `[server] mcp_tools`, `POST /mcp?tools=`):
//!
//! | preset | tools | for |
//! |---|---|---|
//! | `minimal` | `get_context`, `locate`, `search` | an agent that asks questions and fixes issues |
//! | `standard` | minimal + `search_symbols`, `get_symbol_source`, `get_repo_overview`, `check_index`, `find_references`, `callers`, `impact` | everyday coding: definitions, uses, what a change reaches |
//! | `all` | every tool (the default) | agents that plan with the whole code graph and history |
//!
//! or a comma-separated list of tool names.

use ctxd_choice::ToolPreset;
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

/// The tools of the `minimal` preset.
/// The catalog's tools `preset` offers, in catalog order.
pub fn preset_tools(preset: &ToolPreset) -> Vec<Value> {
    tools().into_iter().filter(|t| t["name"].as_str().is_some_and(|n| preset.allows(n))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `tools/list` answer's size, in bytes and in estimated tokens (4 bytes a token, the usual
    /// figure for English and JSON with LLM tokenizers; 3 for a pessimistic bound).
    fn size(preset: &ToolPreset) -> (usize, usize) {
        let bytes = serde_json::to_string(&json!({ "tools": preset_tools(preset) })).unwrap().len();
        (bytes, bytes.div_ceil(4))
    }

    #[test]
    fn presets_list_their_tools_and_minimal_stays_small() {
        let names = |p: &ToolPreset| {
            preset_tools(p).iter().map(|t| t["name"].as_str().unwrap().to_string()).collect::<Vec<_>>()
        };
        assert_eq!(names(&ToolPreset::Minimal), ["search", "get_context", "locate"]);
        assert_eq!(
            names(&ToolPreset::Standard).len(),
            ToolPreset::Standard.len(),
            "{:?}",
            names(&ToolPreset::Standard)
        );
        assert_eq!(names(&ToolPreset::All).len(), tools().len());
        for p in [ToolPreset::Minimal, ToolPreset::Standard, ToolPreset::All] {
            let (bytes, tokens) = size(&p);
            println!("preset {p}: {} tools, tools/list {bytes} bytes, ~{tokens} tokens", preset_tools(&p).len());
        }
        // The bound, even at a pessimistic 3 bytes a token.
        assert!(size(&ToolPreset::Minimal).0.div_ceil(3) <= 1_500, "{:?}", size(&ToolPreset::Minimal));
        assert!(size(&ToolPreset::Minimal).0 < size(&ToolPreset::Standard).0);
        assert!(size(&ToolPreset::Standard).0 < size(&ToolPreset::All).0);
    }

    #[test]
    fn the_catalog_holds_every_tool_name_in_order_and_a_named_list_keeps_catalog_order() {
        let names: Vec<String> = tools().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(names, ctxd_choice::MCP_TOOLS);
        let p: ToolPreset = "callers,locate".parse().unwrap();
        let offered: Vec<_> = preset_tools(&p).iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
        assert_eq!(offered, ["locate", "callers"]);
    }
}
