//! Language detection by file extension or name.

use std::path::Path;

/// Language label of a path (`rust`, `python`, …, `text` when unknown).
pub fn detect(path: &str) -> &'static str {
    let p = Path::new(path);
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
    match name.as_str() {
        "dockerfile" => return "dockerfile",
        "makefile" | "gnumakefile" => return "make",
        "cmakelists.txt" => return "cmake",
        _ => {}
    }
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "rs" => "rust",
        "py" | "pyi" => "python",
        "js" | "mjs" | "cjs" | "jsx" => "javascript",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "tsx",
        "go" => "go",
        "java" => "java",
        "c" | "h" => "c",
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => "cpp",
        "cs" => "csharp",
        "rb" => "ruby",
        "php" => "php",
        "sh" | "bash" | "zsh" => "bash",
        "kt" | "kts" => "kotlin",
        "swift" => "swift",
        "scala" => "scala",
        "lua" => "lua",
        "sql" => "sql",
        "md" | "markdown" | "mdx" => "markdown",
        "rst" => "rst",
        "json" | "geojson" => "json",
        "jsonl" | "ndjson" => "jsonl",
        "ipynb" => "notebook",
        "pdf" => "pdf",
        "txt" | "log" => "text",
        "yaml" | "yml" => "yaml",
        "toml" => "toml",
        "html" | "htm" => "html",
        "css" | "scss" => "css",
        "csv" | "tsv" => "csv",
        "xml" => "xml",
        _ => "text",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn detects_common_languages() {
        assert_eq!(super::detect("src/main.rs"), "rust");
        assert_eq!(super::detect("a/b/c.PY"), "python");
        assert_eq!(super::detect("web/App.tsx"), "tsx");
        assert_eq!(super::detect("Dockerfile"), "dockerfile");
        assert_eq!(super::detect("notes"), "text");
    }
}
