//! Which MCP tools a server lists and answers: the presets `minimal`, `standard`, `all` or tool
//! names separated by commas (`[server] mcp_tools`, `ctxd mcp --tools`, `POST /mcp?tools=`), over
//! the tool names [`MCP_TOOLS`]. The tools themselves (descriptions, schemas) are
//! `ctxd_serve::mcp_catalog`'s, whose test holds its list to these names.

use std::fmt;
use std::str::FromStr;

/// Every MCP tool's name, in the catalog's order.
pub const MCP_TOOLS: [&str; 17] = [
    "search",
    "get_context",
    "search_symbols",
    "get_symbol_source",
    "get_repo_overview",
    "check_index",
    "list_symbols",
    "get_symbols",
    "locate",
    "find_references",
    "callers",
    "callees",
    "imports",
    "imported_by",
    "impact",
    "repo_map",
    "history",
];

/// The tools of `minimal`.
const MINIMAL: &[&str] = &["get_context", "locate", "search"];
/// The tools `standard` adds to `minimal`.
const STANDARD_MORE: &[&str] = &[
    "search_symbols",
    "get_symbol_source",
    "get_repo_overview",
    "check_index",
    "find_references",
    "callers",
    "impact",
];

/// Which tools a server lists (`tools/list`) and answers (`tools/call`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum ToolPreset {
    Minimal,
    Standard,
    #[default]
    All,
    /// These tools, by name (each one of [`MCP_TOOLS`]), in the order first given.
    Named(Vec<String>),
}

/// A `--tools` value that is neither a preset nor a list of known tool names.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown MCP tool preset or tool '{given}': give minimal, standard, all, or tool names separated by commas ({known})")]
pub struct UnknownTool {
    pub given: String,
    pub known: String,
}

impl FromStr for ToolPreset {
    type Err = UnknownTool;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "minimal" => Ok(Self::Minimal),
            "standard" => Ok(Self::Standard),
            "all" | "" => Ok(Self::All),
            list => {
                let mut names: Vec<String> = Vec::new();
                for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
                    if !MCP_TOOLS.contains(&name) {
                        return Err(UnknownTool { given: name.to_string(), known: MCP_TOOLS.join(", ") });
                    }
                    if !names.iter().any(|n| n == name) {
                        names.push(name.to_string());
                    }
                }
                Ok(Self::Named(names))
            }
        }
    }
}

impl TryFrom<String> for ToolPreset {
    type Error = UnknownTool;

    fn try_from(s: String) -> Result<Self, UnknownTool> {
        s.parse()
    }
}

impl fmt::Display for ToolPreset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Minimal => f.write_str("minimal"),
            Self::Standard => f.write_str("standard"),
            Self::All => f.write_str("all"),
            Self::Named(names) => f.write_str(&names.join(",")),
        }
    }
}

impl ToolPreset {
    /// Whether `name` is one of this preset's tools.
    pub fn allows(&self, name: &str) -> bool {
        match self {
            Self::Minimal => MINIMAL.contains(&name),
            Self::Standard => MINIMAL.contains(&name) || STANDARD_MORE.contains(&name),
            Self::All => true,
            Self::Named(names) => names.iter().any(|n| n == name),
        }
    }

    /// How many tools the preset offers.
    pub fn len(&self) -> usize {
        MCP_TOOLS.iter().filter(|t| self.allows(t)).count()
    }

    /// Whether the preset offers no tool (an empty list of names).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_of_names_is_checked_and_each_name_kept_once() {
        let p: ToolPreset = " locate, callers ,locate".parse().unwrap();
        assert_eq!(p, ToolPreset::Named(vec!["locate".into(), "callers".into()]));
        assert!(p.allows("callers") && !p.allows("search"));
        assert_eq!(p.to_string(), "locate,callers");
        let e = "locate,grep".parse::<ToolPreset>().unwrap_err();
        assert_eq!(e.given, "grep");
        assert!(e.to_string().contains("minimal, standard, all") && e.to_string().contains("find_references"), "{e}");
        assert_eq!("".parse::<ToolPreset>().unwrap(), ToolPreset::All);
        assert_eq!("standard".parse::<ToolPreset>().unwrap(), ToolPreset::Standard);
        let from_config: ToolPreset = serde_json::from_str("\"minimal\"").unwrap();
        assert_eq!(from_config, ToolPreset::Minimal);
        assert!(serde_json::from_str::<ToolPreset>("\"grep\"").unwrap_err().to_string().contains("'grep'"));
    }

    #[test]
    fn presets_nest_and_name_only_known_tools() {
        assert_eq!(ToolPreset::Minimal.len(), MINIMAL.len());
        assert_eq!(ToolPreset::Standard.len(), MINIMAL.len() + STANDARD_MORE.len());
        assert_eq!(ToolPreset::All.len(), MCP_TOOLS.len());
        assert!(MINIMAL.iter().chain(STANDARD_MORE).all(|t| MCP_TOOLS.contains(t)));
    }
}
