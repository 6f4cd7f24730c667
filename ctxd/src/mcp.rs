//! `ctxd mcp`: the MCP server on stdio (its `check_index` tool is [`crate::staleness`]).

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use ctxd_choice::ToolPreset;
use ctxd_serve::mcp::McpServer;

use crate::model_args::ModelArgs;
use crate::open::{build_config, open_assembler};
use crate::staleness::checker;

/// `ctxd mcp`: serves MCP on stdin/stdout until stdin closes.
pub async fn run(
    db: PathBuf,
    root: Option<PathBuf>,
    config: Option<PathBuf>,
    tools: ToolPreset,
    model: ModelArgs,
) -> Result<()> {
    let assembler = Arc::new(open_assembler(&db, &model, true).await?);
    let searcher = assembler.searcher().clone();
    let check = match (root, config) {
        (None, None) => None,
        (root, config) => {
            let cfg = build_config(config.as_deref(), root.as_deref(), Some(&db), &model)?;
            let root = cfg.source.root.clone();
            (!cfg.source.is_object_store()).then(|| checker(searcher, root, db.clone(), Some(cfg)))
        }
    };
    // One stdio process serves one agent: its calls share a session unless they name another.
    let started = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let server = McpServer::new(assembler, check)
        .with_session(format!("mcp-stdio-{}-{started}", std::process::id()))
        .with_tools(tools);
    tracing::info!("mcp: serving {} on stdio (tools: {})", db.display(), server.preset());
    let stdin = tokio::io::BufReader::new(tokio::io::stdin());
    ctxd_serve::mcp::serve_lines(server, stdin, tokio::io::stdout()).await?;
    Ok(())
}
