//! Document types: the closed set a context (or search) can be limited to with `doc_types`
//! (`["code", "docs", "config", "tests"]`), and the rule that puts every indexed file in one.
//!
//! The rule reads the path and the language label the chunk stage gave the file, in this order:
//!
//! 1. **tests**: a test file by [`ctxd_codegraph::graph::is_test_path`] (`tests/` folders, `test_*.py`,
//!    `*_test.go`, `*.spec.ts`, `FooTest.java`, `conftest.py`, …), whatever its language;
//! 2. **docs**: prose (Markdown, reST, text, HTML, PDF, notebooks) and anything under a
//!    `doc`/`docs` folder (a Sphinx `conf.py` is documentation's, not the product's);
//! 3. **config**: data and build files (JSON, YAML, TOML, XML, CSV, Dockerfiles, Makefiles,
//!    CMake) and `*.ini`, `*.cfg`, `*.conf`, `*.properties`, `*.lock` whatever their label;
//! 4. **code**: the rest.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use ctxd_search::error::SearchError;

/// What kind of file a chunk comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DocType {
    Code,
    Docs,
    Config,
    Tests,
}

impl DocType {
    /// Every type, in the order docs/search-and-context.md lists them.
    pub const ALL: [DocType; 4] = [DocType::Code, DocType::Docs, DocType::Config, DocType::Tests];

    /// The label as sent and accepted.
    pub fn as_str(self) -> &'static str {
        match self {
            DocType::Code => "code",
            DocType::Docs => "docs",
            DocType::Config => "config",
            DocType::Tests => "tests",
        }
    }

    /// The type of the file at `path`, labelled `language` by the chunk stage.
    pub fn of(path: &str, language: &str) -> DocType {
        if ctxd_codegraph::graph::is_test_path(path) {
            return DocType::Tests;
        }
        let lower = path.to_ascii_lowercase();
        let in_docs = lower.split('/').rev().skip(1).any(|d| matches!(d, "doc" | "docs"));
        if in_docs || ctxd_search::routed::is_document(language) {
            // A requirements.txt or an .ini read as text is configuration, not prose.
            if !is_config_name(&lower) || in_docs {
                return DocType::Docs;
            }
        }
        if is_config_name(&lower)
            || matches!(language, "json" | "jsonl" | "yaml" | "toml" | "xml" | "csv" | "dockerfile" | "make" | "cmake")
        {
            return DocType::Config;
        }
        DocType::Code
    }
}

/// Configuration by file name, whatever the language label says.
fn is_config_name(lower_path: &str) -> bool {
    let file = lower_path.rsplit('/').next().unwrap_or(lower_path);
    let ext = file.rsplit_once('.').map_or("", |(_, e)| e);
    matches!(ext, "ini" | "cfg" | "conf" | "properties" | "lock" | "env")
        || (file.starts_with("requirements") && ext == "txt")
        || matches!(file, ".editorconfig" | ".gitignore" | ".dockerignore" | "makefile" | "dockerfile")
}

impl FromStr for DocType {
    type Err = SearchError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "code" => Ok(DocType::Code),
            "docs" | "doc" => Ok(DocType::Docs),
            "config" => Ok(DocType::Config),
            "tests" | "test" => Ok(DocType::Tests),
            other => Err(SearchError::BadRequest(format!(
                "unknown document type '{other}' in doc_types (code, docs, config or tests)"
            ))),
        }
    }
}

/// Parses a comma-separated list (`code,tests`), as the CLI takes it.
pub fn parse_list(s: &str) -> Result<Vec<DocType>, SearchError> {
    s.split(',').filter(|p| !p.trim().is_empty()).map(DocType::from_str).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_gets_one_type() {
        let cases = [
            ("src/shop/models.py", "python", DocType::Code),
            ("tests/test_models.py", "python", DocType::Tests),
            ("pkg/geo_test.go", "go", DocType::Tests),
            ("web/button.spec.ts", "typescript", DocType::Tests),
            ("README.md", "markdown", DocType::Docs),
            ("docs/conf.py", "python", DocType::Docs),
            ("paper.pdf", "pdf", DocType::Docs),
            ("pyproject.toml", "toml", DocType::Config),
            ("deploy/values.yaml", "yaml", DocType::Config),
            ("Dockerfile", "dockerfile", DocType::Config),
            ("setup.cfg", "text", DocType::Config),
            ("requirements-dev.txt", "text", DocType::Config),
            ("notes.txt", "text", DocType::Docs),
            ("src/main.rs", "rust", DocType::Code),
        ];
        for (path, language, want) in cases {
            assert_eq!(DocType::of(path, language), want, "{path}");
        }
    }

    #[test]
    fn lists_parse_and_unknown_types_are_named() {
        assert_eq!(parse_list("code, tests").unwrap(), [DocType::Code, DocType::Tests]);
        let err = parse_list("code,binaries").unwrap_err().to_string();
        assert!(err.contains("'binaries'") && err.contains("code, docs, config or tests"), "{err}");
        let v: Vec<DocType> = serde_json::from_str(r#"["docs","config"]"#).unwrap();
        assert_eq!(v, [DocType::Docs, DocType::Config]);
        assert!(serde_json::from_str::<Vec<DocType>>(r#"["nope"]"#).is_err());
    }
}
