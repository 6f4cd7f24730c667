//! Where an aggregate source's context comes from: `[[aggregate.sources]] kind` and the `kind`
//! of a `POST /v1/aggregate` request's sources (`ctxd_serve::aggregate`).

/// Where a source's context comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SourceKind {
    /// The daemon's own index.
    Local,
    /// Another ctxd daemon (`url`: its base URL).
    Ctxd,
    /// An MCP server (`url`: its endpoint).
    Mcp,
}

impl SourceKind {
    /// The word the config spells it with.
    pub fn as_str(self) -> &'static str {
        match self {
            SourceKind::Local => "local",
            SourceKind::Ctxd => "ctxd",
            SourceKind::Mcp => "mcp",
        }
    }

    /// Whether a source of this kind is reached at a `url`.
    pub fn remote(self) -> bool {
        self != SourceKind::Local
    }
}

impl std::fmt::Display for SourceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_read_as_lowercase_words_and_an_unknown_one_names_the_valid_ones() {
        assert_eq!(serde_json::from_str::<SourceKind>("\"ctxd\"").unwrap(), SourceKind::Ctxd);
        assert!(!SourceKind::Local.remote() && SourceKind::Mcp.remote());
        assert_eq!(SourceKind::Mcp.to_string(), "mcp");
        let err = serde_json::from_str::<SourceKind>("\"grpc\"").unwrap_err().to_string();
        assert!(err.contains("local") && err.contains("ctxd") && err.contains("mcp"), "{err}");
    }
}
