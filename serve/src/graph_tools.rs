//! The code-graph tools and localization on the wire: their MCP tool descriptions (each with
//! its token cost) and the HTTP handler of `POST /v1/locate` and `POST /v1/graph/<tool>`.
//! Both call [`ctxd_codegraph::tools::GraphTools`], so MCP and HTTP answer alike.

use serde_json::{json, Value};

use ctxd_codegraph::tools::GraphTool;

fn tool(name: &str, description: &str, schema: Value) -> Value {
    json!({ "name": name, "description": description, "inputSchema": schema })
}

/// The MCP descriptions of the graph tools and `locate`.
pub fn mcp_tools() -> Vec<Value> {
    let symbol = json!({"type": "object", "properties": {
        "symbol": {"type": "string", "description": "a name (`parse`), symbol (`Class.method`, `Type::new`) or qualified name"},
        "limit": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50}},
        "required": ["symbol"]});
    let file = json!({"type": "object", "properties": {
        "path": {"type": "string", "description": "a file, relative to the indexed root"}}, "required": ["path"]});
    let mut refs = symbol.clone();
    refs["properties"]["kinds"] =
        json!({"type": "array", "items": {"enum": ["imports", "calls", "references", "inherits"]}});
    vec![
        tool(
            GraphTool::Locate.name(),
            "The files an issue, stack trace or task is about (the files a fix changes), ranked, each with its \
             likely definitions and why. Paste the whole issue (≤ 1 MB). Cost: about 80 tokens per file (k=10: ~800).",
            json!({"type": "object", "properties": {
                "text": {"type": "string"}, "k": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10},
                "without": {"type": "array", "items": {"type": "string"}, "description": "signals to leave out"},
                "no_adapter": {"type": "boolean", "default": false,
                    "description": "leave the index's query adapter (fitted on its git history) out"}},
                "required": ["text"]}),
        ),
        tool(
            GraphTool::FindReferences.name(),
            "Every use of a definition (calls, references, subclasses, imports), cited path:line, tests last. \
             Cost: about 40 tokens per use (limit=50: ~2,000).",
            refs,
        ),
        tool(
            GraphTool::Callers.name(),
            "Who calls a definition, cited path:line. Cost: about 40 tokens per caller.",
            symbol.clone(),
        ),
        tool(
            GraphTool::Callees.name(),
            "What a definition calls, with where each callee is defined. Cost: about 60 tokens per call.",
            symbol,
        ),
        tool(
            GraphTool::Imports.name(),
            "The indexed files a file imports, with the import lines. Cost: about 20 tokens per file.",
            file.clone(),
        ),
        tool(
            GraphTool::ImportedBy.name(),
            "The indexed files that import a file. Cost: about 20 tokens per file.",
            file,
        ),
        tool(
            GraphTool::Impact.name(),
            "What a change likely affects: the definitions its lines touch, then callers, referencers and importers \
             (ranked), and the tests that exercise them. Give `paths` or a unified `diff`. Cost: about 50 tokens per \
             item (limit=20: ~2,000).",
            json!({"type": "object", "properties": {
                "paths": {"type": "array", "items": {"type": "string"}}, "diff": {"type": "string"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 500, "default": 20}}}),
        ),
        tool(
            GraphTool::RepoMap.name(),
            "An aider-style map of the repository: the files most relevant to `query` (or the most central ones) \
             with the signatures of their most used definitions. Cost: at most `budget` tokens (default 1,024).",
            json!({"type": "object", "properties": {
                "query": {"type": "string"}, "budget": {"type": "integer", "minimum": 1, "maximum": 64000, "default": 1024}}}),
        ),
        tool(
            GraphTool::History.name(),
            "A file's recent commits (id, date, author, message) and the files that change with it, from the git \
             history the index recorded (git sources, folders that are git clones). Cost: about 30 tokens per commit \
             (limit=10: ~400).",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "description": "a file: its indexed path, or a path inside the source"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 300, "default": 10}}, "required": ["path"]}),
        ),
    ]
}
