//! `ctxd setup <client>`: connects a coding agent to ctxd in one command — writes or merges the
//! client's own MCP configuration file ([`crate::setup_clients`] says which and in what shape) and,
//! with `--instructions`, a short note telling the agent when to call which tool.
//!
//! Rules: other servers and keys in the file are kept (a JSON or TOML file is edited, never
//! replaced; a file that does not parse is left alone with an error); running it twice changes
//! nothing the second time; `--print` writes nothing and prints the file as it would be;
//! `--remove` takes out what it wrote. Without `--url` the entry starts `ctxd mcp` on stdio (this
//! executable's absolute path, `--db`/`--root` or `--config`); with `--url` (a running daemon) it is
//! the HTTP form with the daemon's bearer token (`CTXD_AUTH_TOKEN`, or the `--config`'s
//! `[server] auth_token_file`).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use ctxd_choice::ToolPreset;
use serde_json::{json, Value};

use crate::setup_clients::{codex_table, continue_block, Client, ClientFormat, ConfigLocation, Homes, Server};

/// `ctxd setup`'s arguments.
#[derive(Debug, Args)]
pub struct SetupArgs {
    /// The agent to connect.
    #[arg(value_enum)]
    client: Client,
    /// The index (default: ~/.local/share/ctxd/<name of the root folder>).
    #[arg(long)]
    db: Option<PathBuf>,
    /// The project folder (default: the current folder).
    #[arg(long)]
    root: Option<PathBuf>,
    /// A config file naming the sources and the index (instead of --db/--root).
    #[arg(long)]
    config: Option<PathBuf>,
    /// A running daemon's MCP endpoint, e.g. http://127.0.0.1:7700/mcp (writes the HTTP form).
    #[arg(long)]
    url: Option<String>,
    /// Project or user configuration (default: the project where the client reads one).
    #[arg(long, value_enum)]
    scope: Option<ConfigLocation>,
    /// The tools the agent is offered (`ctxd mcp --tools`; over HTTP `?tools=`).
    #[arg(long)]
    tools: Option<ToolPreset>,
    /// Also write the agent instructions (CLAUDE.md, AGENTS.md or .cursor/rules/ctxd.mdc).
    #[arg(long)]
    instructions: bool,
    /// Write nothing; print each file as it would be.
    #[arg(long)]
    print: bool,
    /// Take out what setup wrote (the ctxd entry, the instructions block).
    #[arg(long)]
    remove: bool,
}

/// Runs `ctxd setup`.
pub fn run(a: SetupArgs) -> Result<()> {
    let root = match &a.root {
        Some(r) => r.clone(),
        None => std::env::current_dir().context("reading the current folder (give --root)")?,
    };
    let root = std::path::absolute(&root).with_context(|| format!("resolving {}", root.display()))?;
    let homes = Homes::from_env()?;
    let scope = a.scope.unwrap_or(a.client.default_scope());
    let path = a.client.config_path(scope, &root, &homes)?;
    let server = server(&a, &root, &homes)?;
    if let (Server::Http { token: Some(_), .. }, ConfigLocation::Project) = (&server, scope) {
        bail!(
            "the daemon's bearer token would be written into {}, a project file that is usually committed: use \
             --scope user (where the client has one), or unset CTXD_AUTH_TOKEN and add the header by hand",
            path.display()
        );
    }
    let old = read(&path)?;
    let new = if a.remove && old.is_none() {
        None
    } else {
        match a.client.format() {
            ClientFormat::Json { key } => {
                let entry = if a.remove { None } else { Some(a.client.json_entry(&server)?) };
                merge_json(old.as_deref(), key, entry).with_context(|| format!("editing {}", path.display()))?
            }
            ClientFormat::CodexToml => merge_codex(old.as_deref(), (!a.remove).then_some(&server))
                .with_context(|| format!("editing {}", path.display()))?,
            ClientFormat::ContinueYaml => (!a.remove).then(|| continue_block(&server)),
        }
    };
    apply(&path, old, new, a.print)?;
    if a.instructions {
        let file = root.join(a.client.instructions_file());
        let old = read(&file)?;
        let new = instructions(a.client, old.as_deref(), a.remove);
        apply(&file, old, new, a.print)?;
    }
    Ok(())
}

/// How the client reaches ctxd, from the arguments.
fn server(a: &SetupArgs, root: &Path, homes: &Homes) -> Result<Server> {
    if let Some(url) = &a.url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            bail!("--url {url}: give the daemon's MCP endpoint, e.g. http://127.0.0.1:7700/mcp");
        }
        let token = match &a.config {
            Some(file) => ctxd_config::Config::load_with_env(Some(file))?.server.auth_token()?,
            None => std::env::var("CTXD_AUTH_TOKEN").ok().filter(|t| !t.trim().is_empty()),
        };
        let url = match &a.tools {
            Some(t) => format!("{url}{}tools={t}", if url.contains('?') { '&' } else { '?' }),
            None => url.clone(),
        };
        return Ok(Server::Http { url, token });
    }
    let exe = std::env::current_exe().context("finding this ctxd executable")?;
    let command = exe.canonicalize().unwrap_or(exe).display().to_string();
    let mut args = vec!["mcp".to_string()];
    if let Some(config) = &a.config {
        args.push("--config".into());
        args.push(std::path::absolute(config)?.display().to_string());
    }
    // `ctxd mcp` needs --db: from the flag, else the config's [index] db, else the default.
    let db = match (&a.db, &a.config) {
        (Some(db), _) => Some(std::path::absolute(db)?),
        (None, Some(config)) => Some(std::path::absolute(ctxd_config::Config::load_with_env(Some(config))?.index.db)?),
        (None, None) => {
            let name = root.file_name().map_or("project".into(), |n| n.to_string_lossy().to_string());
            Some(homes.home.join(".local/share/ctxd").join(name))
        }
    };
    if let Some(db) = db {
        if !db.exists() && a.config.is_none() {
            eprintln!(
                "setup: no index at {} yet: build it with `ctxd index {} --db {}` (or start `ctxd serve`)",
                db.display(),
                root.display(),
                db.display()
            );
        }
        args.push("--db".into());
        args.push(db.display().to_string());
    }
    if a.config.is_none() {
        args.push("--root".into());
        args.push(root.display().to_string());
    }
    if let Some(t) = &a.tools {
        args.push("--tools".into());
        args.push(t.to_string());
    }
    Ok(Server::Stdio { command, args })
}

fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// The JSON file `old` with `entry` as `key.ctxd` (or without it); other keys kept. Unchanged
/// content is returned as it was (its formatting too).
pub(crate) fn merge_json(old: Option<&str>, key: &str, entry: Option<Value>) -> Result<Option<String>> {
    let before: Value = match old {
        Some(text) if !text.trim().is_empty() => {
            serde_json::from_str(text).context("it is not valid JSON (fix or move it; nothing was written)")?
        }
        _ => json!({}),
    };
    let mut doc = before.clone();
    let Some(map) = doc.as_object_mut() else { bail!("it is not a JSON object (nothing was written)") };
    match entry {
        Some(entry) => {
            let servers = map.entry(key).or_insert_with(|| json!({}));
            let Some(servers) = servers.as_object_mut() else { bail!("its \"{key}\" is not an object") };
            servers.insert("ctxd".into(), entry);
        }
        None => {
            if let Some(servers) = map.get_mut(key).and_then(Value::as_object_mut) {
                servers.remove("ctxd");
            }
        }
    }
    if doc == before && old.is_some() {
        return Ok(old.map(str::to_string));
    }
    Ok(Some(serde_json::to_string_pretty(&doc)? + "\n"))
}

/// Codex's TOML with `[mcp_servers.ctxd]` set to `server` (or removed); the rest as it was.
pub(crate) fn merge_codex(old: Option<&str>, server: Option<&Server>) -> Result<Option<String>> {
    let mut doc: toml_edit::DocumentMut =
        old.unwrap_or_default().parse().context("it is not valid TOML (fix or move it; nothing was written)")?;
    match server {
        Some(server) => codex_table(&mut doc, server),
        None => {
            if let Some(servers) = doc.get_mut("mcp_servers").and_then(|s| s.as_table_like_mut()) {
                servers.remove("ctxd");
            }
        }
    }
    Ok(Some(doc.to_string()))
}

/// Marks the instructions block in a shared Markdown file.
const BEGIN: &str = "<!-- ctxd:begin (written by `ctxd setup`; `--instructions --remove` takes it out) -->";
const END: &str = "<!-- ctxd:end -->";

/// When to call which tool, for the agent.
const WHEN: &str = "## Code context: ctxd

This project is indexed by ctxd (MCP server `ctxd`). Ask it before opening files one by one:
- an issue, a bug report or a stack trace: call `locate` first — the files to change, ranked, with the
  definitions likely to change and why;
- a question about how something works: `get_context` (cited code within a token budget);
- a definition by name: `search_symbols`, then `get_symbol_source`;
- before changing a function: `find_references` or `callers`; after a change: `impact` on the diff for the
  tests to run;
- answers that say files changed since the index version, or look stale: `check_index` (`refresh: true`).
";

/// The instructions file with the block added, replaced or (with `remove`) taken out; `None`:
/// delete the file (it held only the block).
pub(crate) fn instructions(client: Client, old: Option<&str>, remove: bool) -> Option<String> {
    if client == Client::Cursor {
        // A rule file of its own.
        let rule = format!("---\ndescription: When to use the ctxd MCP tools\nalwaysApply: true\n---\n\n{WHEN}");
        return (!remove).then_some(rule);
    }
    let old = old.unwrap_or_default();
    let block = old.find(BEGIN).and_then(|b| old[b..].find(END).map(|e| (b, b + e)));
    let without = match block {
        Some((b, e)) => {
            format!("{}{}", &old[..b], old[e + END.len()..].trim_start_matches('\n')).trim_end().to_string()
        }
        None => old.trim_end().to_string(),
    };
    if remove {
        return (!without.is_empty()).then(|| without + "\n");
    }
    let block = format!("{BEGIN}\n{WHEN}{END}\n");
    Some(if without.is_empty() { block } else { format!("{without}\n\n{block}") })
}

/// Writes `new` to `path` (creating folders; `None` deletes it) unless it equals `old`; with
/// `print`, shows it instead.
fn apply(path: &Path, old: Option<String>, new: Option<String>, print: bool) -> Result<()> {
    let shown = path.display();
    if new == old {
        println!("{shown}: already up to date");
        return Ok(());
    }
    match (new, print) {
        (None, true) => println!("{shown}: would be deleted"),
        (Some(text), true) => println!("{shown}: would be written as:\n{text}"),
        (None, false) => {
            std::fs::remove_file(path).with_context(|| format!("deleting {shown}"))?;
            println!("{shown}: deleted");
        }
        (Some(text), false) => {
            // A symlinked config (a dotfile manager's) is written through, keeping the link.
            let path = &std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            }
            let tmp = path.with_extension("ctxd-setup.tmp");
            std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
            // The file keeps its permissions (a 0600 `~/.claude.json` stays private).
            if let Ok(meta) = std::fs::metadata(path) {
                std::fs::set_permissions(&tmp, meta.permissions())
                    .with_context(|| format!("writing {}", tmp.display()))?;
            }
            std::fs::rename(&tmp, path).with_context(|| format!("replacing {shown}"))?;
            println!("{shown}: {}", if old.is_some() { "updated" } else { "written" });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio() -> Server {
        Server::Stdio { command: "/opt/ctxd/bin/ctxd".into(), args: vec!["mcp".into(), "--db".into(), "/d".into()] }
    }

    fn http() -> Server {
        Server::Http { url: "http://127.0.0.1:7700/mcp".into(), token: Some("t0k".into()) }
    }

    /// Each JSON client's entry has the keys its documentation names, under its servers key.
    #[test]
    fn json_clients_write_the_shape_they_document() {
        let cases: &[(Client, &str, Value, Value)] = &[
            (
                Client::ClaudeCode,
                "mcpServers",
                json!({"type": "stdio", "command": "/opt/ctxd/bin/ctxd", "args": ["mcp", "--db", "/d"], "env": {}}),
                json!({"type": "http", "url": "http://127.0.0.1:7700/mcp", "headers": {"Authorization": "Bearer t0k"}}),
            ),
            (
                Client::Cursor,
                "mcpServers",
                json!({"command": "/opt/ctxd/bin/ctxd", "args": ["mcp", "--db", "/d"]}),
                json!({"url": "http://127.0.0.1:7700/mcp", "headers": {"Authorization": "Bearer t0k"}}),
            ),
            (
                Client::Vscode,
                "servers",
                json!({"type": "stdio", "command": "/opt/ctxd/bin/ctxd", "args": ["mcp", "--db", "/d"]}),
                json!({"type": "http", "url": "http://127.0.0.1:7700/mcp", "headers": {"Authorization": "Bearer t0k"}}),
            ),
            (
                Client::Windsurf,
                "mcpServers",
                json!({"command": "/opt/ctxd/bin/ctxd", "args": ["mcp", "--db", "/d"]}),
                json!({"serverUrl": "http://127.0.0.1:7700/mcp", "headers": {"Authorization": "Bearer t0k"}}),
            ),
        ];
        for (client, key, want_stdio, want_http) in cases {
            assert_eq!(client.format(), ClientFormat::Json { key });
            for (server, want) in [(stdio(), want_stdio), (http(), want_http)] {
                let text = merge_json(None, key, Some(client.json_entry(&server).unwrap())).unwrap().unwrap();
                let doc: Value = serde_json::from_str(&text).unwrap();
                assert_eq!(&doc[*key]["ctxd"], want, "{client:?}");
            }
        }
        let desktop = merge_json(None, "mcpServers", Some(Client::ClaudeDesktop.json_entry(&stdio()).unwrap()));
        assert!(desktop.unwrap().unwrap().contains("\"command\": \"/opt/ctxd/bin/ctxd\""));
        let err = Client::ClaudeDesktop.json_entry(&http()).unwrap_err().to_string();
        assert!(err.contains("stdio only"), "{err}");
    }

    #[test]
    fn merging_keeps_other_servers_is_idempotent_and_removal_undoes_it() {
        let old = "{\n  \"mcpServers\": {\"other\": {\"command\": \"x\"}},\n  \"theme\": \"dark\"\n}\n";
        let entry = Client::Cursor.json_entry(&stdio()).unwrap();
        let once = merge_json(Some(old), "mcpServers", Some(entry.clone())).unwrap().unwrap();
        let doc: Value = serde_json::from_str(&once).unwrap();
        assert_eq!(doc["mcpServers"]["other"], json!({"command": "x"}));
        assert_eq!(doc["theme"], "dark");
        let twice = merge_json(Some(&once), "mcpServers", Some(entry)).unwrap().unwrap();
        assert_eq!(twice, once, "a second run changes nothing");
        let removed = merge_json(Some(&once), "mcpServers", None).unwrap().unwrap();
        let back: Value = serde_json::from_str(&removed).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(old).unwrap());
        // Removing what is not there leaves the file as it was, byte for byte.
        assert_eq!(merge_json(Some(old), "mcpServers", None).unwrap().unwrap(), old);
        // A file that is not JSON (or not an object) is never replaced.
        let err = merge_json(Some("{ not json"), "mcpServers", None).unwrap_err();
        assert!(format!("{err:#}").contains("nothing was written"), "{err:#}");
        assert!(merge_json(Some("[1]"), "mcpServers", Some(json!({}))).is_err());
        assert!(merge_json(Some("{\"mcpServers\": 3}"), "mcpServers", Some(json!({}))).is_err());
    }

    #[test]
    fn codex_gets_its_own_table_and_keeps_the_rest_of_the_file() {
        let old = "# my settings\nmodel = \"o4\"\n\n[mcp_servers.other]\ncommand = \"x\"\n";
        let once = merge_codex(Some(old), Some(&stdio())).unwrap().unwrap();
        assert!(once.starts_with("# my settings\nmodel = \"o4\""), "{once}");
        let doc: toml_edit::DocumentMut = once.parse().unwrap();
        assert_eq!(doc["mcp_servers"]["other"]["command"].as_str(), Some("x"));
        assert_eq!(doc["mcp_servers"]["ctxd"]["command"].as_str(), Some("/opt/ctxd/bin/ctxd"));
        assert_eq!(doc["mcp_servers"]["ctxd"]["args"].as_array().unwrap().len(), 3);
        assert_eq!(merge_codex(Some(&once), Some(&stdio())).unwrap().unwrap(), once, "idempotent");
        let h: toml_edit::DocumentMut = merge_codex(None, Some(&http())).unwrap().unwrap().parse().unwrap();
        assert_eq!(h["mcp_servers"]["ctxd"]["url"].as_str(), Some("http://127.0.0.1:7700/mcp"));
        assert_eq!(h["mcp_servers"]["ctxd"]["http_headers"]["Authorization"].as_str(), Some("Bearer t0k"));
        let removed = merge_codex(Some(&once), None).unwrap().unwrap();
        let doc: toml_edit::DocumentMut = removed.parse().unwrap();
        assert!(doc["mcp_servers"].get("ctxd").is_none() && doc["mcp_servers"].get("other").is_some(), "{removed}");
        assert!(merge_codex(Some("not = = toml"), None).is_err());
    }

    #[test]
    fn continue_gets_a_block_file_of_its_own() {
        let text = continue_block(&stdio());
        assert!(text.starts_with("name: ctxd\nversion: 0.0.1\nschema: v1\nmcpServers:\n  - name: ctxd\n"), "{text}");
        assert!(text.contains("    command: \"/opt/ctxd/bin/ctxd\"\n    args:\n      - \"mcp\"\n"), "{text}");
        let text = continue_block(&http());
        assert!(text.contains("    type: streamable-http\n    url: \"http://127.0.0.1:7700/mcp\"\n"), "{text}");
        assert!(text.contains("Authorization: \"Bearer t0k\""), "{text}");
    }

    #[test]
    fn instructions_are_one_block_added_once_and_taken_out_again() {
        let mine = "# Project\n\nBuild with make.\n";
        let with = instructions(Client::Codex, Some(mine), false).unwrap();
        assert!(with.starts_with(mine.trim_end()) && with.contains("call `locate` first"), "{with}");
        assert_eq!(instructions(Client::Codex, Some(&with), false).unwrap(), with, "idempotent");
        assert_eq!(instructions(Client::Codex, Some(&with), true).unwrap(), mine);
        assert_eq!(instructions(Client::ClaudeCode, None, true), None, "nothing left: the file goes");
        let rule = instructions(Client::Cursor, None, false).unwrap();
        assert!(rule.starts_with("---\ndescription: ") && rule.contains("alwaysApply: true"), "{rule}");
        assert_eq!(instructions(Client::Cursor, Some(&rule), true), None);
    }

    #[test]
    fn each_client_has_its_documented_files() {
        let homes = Homes { home: "/h".into(), config: "/h/.config".into(), codex: "/h/.codex".into() };
        let root = Path::new("/p");
        let at = |c: Client, s: ConfigLocation| c.config_path(s, root, &homes).map(|p| p.display().to_string());
        assert_eq!(at(Client::ClaudeCode, ConfigLocation::Project).unwrap(), "/p/.mcp.json");
        assert_eq!(at(Client::ClaudeCode, ConfigLocation::User).unwrap(), "/h/.claude.json");
        assert_eq!(at(Client::Cursor, ConfigLocation::Project).unwrap(), "/p/.cursor/mcp.json");
        assert_eq!(at(Client::Vscode, ConfigLocation::Project).unwrap(), "/p/.vscode/mcp.json");
        assert_eq!(at(Client::Vscode, ConfigLocation::User).unwrap(), "/h/.config/Code/User/mcp.json");
        assert_eq!(at(Client::Codex, ConfigLocation::User).unwrap(), "/h/.codex/config.toml");
        assert_eq!(
            at(Client::ClaudeDesktop, ConfigLocation::User).unwrap(),
            "/h/.config/Claude/claude_desktop_config.json"
        );
        assert_eq!(at(Client::Continue, ConfigLocation::Project).unwrap(), "/p/.continue/mcpServers/ctxd.yaml");
        assert_eq!(at(Client::Windsurf, ConfigLocation::User).unwrap(), "/h/.codeium/windsurf/mcp_config.json");
        assert!(at(Client::Codex, ConfigLocation::Project).unwrap_err().to_string().contains("--scope user"));
        assert!(at(Client::Continue, ConfigLocation::User).unwrap_err().to_string().contains("--scope project"));
    }
}
