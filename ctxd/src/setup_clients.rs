//! The coding agents `ctxd setup` configures: where each keeps its MCP servers and in what shape,
//! as each client documents it.
//!
//! | client | project scope | user scope | shape of the `ctxd` entry |
//! |---|---|---|---|
//! | `claude-code` | `.mcp.json` | `~/.claude.json` | `mcpServers.ctxd`: `{type: "stdio", command, args, env}` or `{type: "http", url, headers}` |
//! | `cursor` | `.cursor/mcp.json` | `~/.cursor/mcp.json` | `mcpServers.ctxd`: `{command, args}` or `{url, headers}` |
//! | `vscode` | `.vscode/mcp.json` | `~/.config/Code/User/mcp.json` | `servers.ctxd`: `{type: "stdio", command, args}` or `{type: "http", url, headers}` |
//! | `codex` | – | `~/.codex/config.toml` (`$CODEX_HOME`) | `[mcp_servers.ctxd]`: `command`, `args` or `url`, `http_headers` |
//! | `claude-desktop` | – | `~/.config/Claude/claude_desktop_config.json` | `mcpServers.ctxd`: `{command, args}` (stdio only) |
//! | `continue` | `.continue/mcpServers/ctxd.yaml` | – | a block file: `mcpServers: [{name, command, args}]` or `{name, type: streamable-http, url, requestOptions.headers}` |
//! | `windsurf` | – | `~/.codeium/windsurf/mcp_config.json` | `mcpServers.ctxd`: `{command, args}` or `{serverUrl, headers}` |
//!
//! The agent instructions (`--instructions`) go where each client reads them: `CLAUDE.md`
//! (Claude Code), `.cursor/rules/ctxd.mdc` (Cursor), `AGENTS.md` (the others).

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::ValueEnum;
use serde_json::{json, Value};

/// A coding agent `ctxd setup` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Client {
    ClaudeCode,
    Cursor,
    Vscode,
    Codex,
    ClaudeDesktop,
    Continue,
    Windsurf,
}

/// Where a client's configuration is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ConfigLocation {
    /// In the project folder (`--root`), shared with its other users.
    Project,
    /// In the user's home, for every project.
    User,
}

/// How the client reaches ctxd.
#[derive(Debug, Clone, PartialEq)]
pub enum Server {
    /// The client starts `command args` (`ctxd mcp …`) and speaks over stdio.
    Stdio { command: String, args: Vec<String> },
    /// A running daemon's `POST /mcp`, with its bearer token when it has one.
    Http { url: String, token: Option<String> },
}

/// The file format a client keeps its servers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFormat {
    /// A JSON object whose `key` maps server names to entries.
    Json { key: &'static str },
    /// Codex's TOML: `[mcp_servers.<name>]` tables.
    CodexToml,
    /// A Continue block file of its own (`.continue/mcpServers/ctxd.yaml`).
    ContinueYaml,
}

/// Where the user's files are (`$HOME` and `$XDG_CONFIG_HOME`, `$CODEX_HOME`).
pub struct Homes {
    pub home: PathBuf,
    pub config: PathBuf,
    pub codex: PathBuf,
}

impl Homes {
    pub fn from_env() -> Result<Self> {
        let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from) else {
            bail!("HOME is not set: ctxd setup needs it to find the clients' user configuration");
        };
        let config = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from).unwrap_or_else(|| home.join(".config"));
        let codex = std::env::var_os("CODEX_HOME").map(PathBuf::from).unwrap_or_else(|| home.join(".codex"));
        Ok(Self { home, config, codex })
    }
}

impl Client {
    /// The scope used when `--scope` is not given: the project where the client reads one.
    pub fn default_scope(self) -> ConfigLocation {
        match self {
            Client::ClaudeCode | Client::Cursor | Client::Vscode | Client::Continue => ConfigLocation::Project,
            Client::Codex | Client::ClaudeDesktop | Client::Windsurf => ConfigLocation::User,
        }
    }

    /// The configuration file for `scope`, or why this client has none there.
    pub fn config_path(self, scope: ConfigLocation, root: &Path, homes: &Homes) -> Result<PathBuf> {
        let name = self.to_possible_value().map(|v| v.get_name().to_string()).unwrap_or_default();
        Ok(match (self, scope) {
            (Client::ClaudeCode, ConfigLocation::Project) => root.join(".mcp.json"),
            (Client::ClaudeCode, ConfigLocation::User) => homes.home.join(".claude.json"),
            (Client::Cursor, ConfigLocation::Project) => root.join(".cursor/mcp.json"),
            (Client::Cursor, ConfigLocation::User) => homes.home.join(".cursor/mcp.json"),
            (Client::Vscode, ConfigLocation::Project) => root.join(".vscode/mcp.json"),
            (Client::Vscode, ConfigLocation::User) => homes.config.join("Code/User/mcp.json"),
            (Client::Continue, ConfigLocation::Project) => root.join(".continue/mcpServers/ctxd.yaml"),
            (Client::Codex, ConfigLocation::User) => homes.codex.join("config.toml"),
            (Client::ClaudeDesktop, ConfigLocation::User) => homes.config.join("Claude/claude_desktop_config.json"),
            (Client::Windsurf, ConfigLocation::User) => homes.home.join(".codeium/windsurf/mcp_config.json"),
            (_, ConfigLocation::Project) => {
                bail!("{name} keeps its MCP servers in the user's configuration: use --scope user")
            }
            (_, ConfigLocation::User) => bail!("{name} reads MCP servers from the project: use --scope project"),
        })
    }

    pub fn format(self) -> ClientFormat {
        match self {
            Client::Vscode => ClientFormat::Json { key: "servers" },
            Client::Codex => ClientFormat::CodexToml,
            Client::Continue => ClientFormat::ContinueYaml,
            _ => ClientFormat::Json { key: "mcpServers" },
        }
    }

    /// The `ctxd` entry of a JSON client (see the module table).
    pub fn json_entry(self, server: &Server) -> Result<Value> {
        let auth = |token: &Option<String>| match token {
            Some(t) => json!({ "Authorization": format!("Bearer {t}") }),
            None => json!({}),
        };
        Ok(match (self, server) {
            (Client::ClaudeCode, Server::Stdio { command, args }) => {
                json!({ "type": "stdio", "command": command, "args": args, "env": {} })
            }
            (Client::ClaudeCode, Server::Http { url, token }) => {
                json!({ "type": "http", "url": url, "headers": auth(token) })
            }
            (Client::Vscode, Server::Stdio { command, args }) => {
                json!({ "type": "stdio", "command": command, "args": args })
            }
            (Client::Vscode, Server::Http { url, token }) => {
                json!({ "type": "http", "url": url, "headers": auth(token) })
            }
            (Client::Windsurf, Server::Http { url, token }) => json!({ "serverUrl": url, "headers": auth(token) }),
            (Client::ClaudeDesktop, Server::Http { .. }) => bail!(
                "Claude Desktop starts its MCP servers over stdio only: drop --url (it then runs `ctxd mcp` on the \
                 daemon's index, which readers may share)"
            ),
            (Client::Cursor, Server::Http { url, token }) => json!({ "url": url, "headers": auth(token) }),
            (_, Server::Stdio { command, args }) => json!({ "command": command, "args": args }),
            (client, Server::Http { .. }) => bail!("{client:?} is not configured through a JSON file"),
        })
    }

    /// Where the agent instructions go (relative to the project root).
    pub fn instructions_file(self) -> &'static str {
        match self {
            Client::ClaudeCode => "CLAUDE.md",
            Client::Cursor => ".cursor/rules/ctxd.mdc",
            _ => "AGENTS.md",
        }
    }
}

/// Continue's block file for `server` (YAML; strings written as JSON strings, which YAML reads).
pub fn continue_block(server: &Server) -> String {
    let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let mut out = String::from("name: ctxd\nversion: 0.0.1\nschema: v1\nmcpServers:\n  - name: ctxd\n");
    match server {
        Server::Stdio { command, args } => {
            out.push_str(&format!("    command: {}\n    args:\n", q(command)));
            for a in args {
                out.push_str(&format!("      - {}\n", q(a)));
            }
        }
        Server::Http { url, token } => {
            out.push_str(&format!("    type: streamable-http\n    url: {}\n", q(url)));
            if let Some(t) = token {
                out.push_str(&format!(
                    "    requestOptions:\n      headers:\n        Authorization: {}\n",
                    q(&format!("Bearer {t}"))
                ));
            }
        }
    }
    out
}

/// Codex's `[mcp_servers.ctxd]` table for `server`, set into `doc` (other tables untouched).
pub fn codex_table(doc: &mut toml_edit::DocumentMut, server: &Server) {
    let mut table = toml_edit::Table::new();
    match server {
        Server::Stdio { command, args } => {
            table["command"] = toml_edit::value(command.as_str());
            let mut list = toml_edit::Array::new();
            for a in args {
                list.push(a.as_str());
            }
            table["args"] = toml_edit::value(list);
        }
        Server::Http { url, token } => {
            table["url"] = toml_edit::value(url.as_str());
            if let Some(t) = token {
                let mut headers = toml_edit::InlineTable::new();
                headers.insert("Authorization", format!("Bearer {t}").into());
                table["http_headers"] = toml_edit::value(headers);
            }
        }
    }
    if !doc.contains_key("mcp_servers") {
        let mut parent = toml_edit::Table::new();
        parent.set_implicit(true);
        doc["mcp_servers"] = toml_edit::Item::Table(parent);
    }
    doc["mcp_servers"]["ctxd"] = toml_edit::Item::Table(table);
}
