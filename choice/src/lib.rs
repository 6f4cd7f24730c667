//! The closed sets ctxd's configuration, flags and requests choose from, each an enum parsed
//! once where its word is read (a config file through serde, a flag through `FromStr`, a request's
//! JSON through serde), so the code matches on variants and never compares strings:
//!
//! - the embedding model's runtime: [`DeviceChoice`], [`PrecisionChoice`], [`BackendChoice`],
//!   [`EndpointKind`] (`[model] device`, `precision`, `backend`, `endpoint_kind`; `embedding.rs`);
//! - `locate`'s ranking model: [`RankerName`] (`[locate] model`, `--locate-model`, a request's
//!   `"model"`; `ranker.rs`);
//! - where an aggregate source's context comes from: [`SourceKind`] (`[[aggregate.sources]] kind`;
//!   `aggregate.rs`);
//! - which MCP tools a server offers: [`ToolPreset`] (`[server] mcp_tools`, `ctxd mcp --tools`,
//!   `/mcp?tools=`), over the tool names [`MCP_TOOLS`] (`mcp.rs`).
//!
//! An unknown word is an error naming the word and the valid ones ([`UnknownChoice`],
//! [`UnknownTool`]); the config layer adds the key and where it was set. `Display` writes a word
//! back as the config spells it. This crate sits at the bottom of the crate graph, so the config
//! crate and the crates that act on a choice name one type.

/// A word that names no member of a closed set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{value}' is not {valid}")]
pub struct UnknownChoice {
    /// The word as written.
    pub value: String,
    /// The valid words, in prose (`auto, cpu or cuda:N`).
    pub valid: &'static str,
}

/// `FromStr` and `Display` of a set of plain words, and its serde form through them.
macro_rules! words {
    ($ty:ident, $valid:literal, $($variant:ident = $word:literal),+) => {
        impl std::str::FromStr for $ty {
            type Err = $crate::UnknownChoice;

            fn from_str(s: &str) -> Result<Self, $crate::UnknownChoice> {
                match s {
                    $($word => Ok(Self::$variant),)+
                    other => Err($crate::UnknownChoice { value: other.to_string(), valid: $valid }),
                }
            }
        }

        impl $ty {
            /// The word the config spells it with.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word,)+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

/// serde's `try_from = "String"` for each set: the [`FromStr`] above.
macro_rules! from_string {
    ($($ty:ident),+) => {$(
        impl TryFrom<String> for $ty {
            type Error = $crate::UnknownChoice;

            fn try_from(s: String) -> Result<Self, $crate::UnknownChoice> {
                s.parse()
            }
        }
    )+};
}

mod aggregate;
mod embedding;
mod mcp;
mod ranker;

pub use aggregate::SourceKind;
pub use embedding::{BackendChoice, DeviceChoice, EndpointKind, PrecisionChoice};
pub use mcp::{ToolPreset, UnknownTool, MCP_TOOLS};
pub use ranker::RankerName;
