//! Language detection by file extension or name: one of [`Language::ALL`].

use std::path::Path;

use ctxd_index::Language;

/// Language label of a path (`rust`, `python`, …, `text` when unknown).
pub fn detect(path: &str) -> &'static str {
    language_of(path).as_str()
}

/// Language of a path ([`Language::Text`] when unknown).
pub fn language_of(path: &str) -> Language {
    use Language as L;
    let p = Path::new(path);
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
    match name.as_str() {
        "dockerfile" => return L::Dockerfile,
        "makefile" | "gnumakefile" => return L::Make,
        "cmakelists.txt" => return L::Cmake,
        _ => {}
    }
    let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    match ext.as_str() {
        "rs" => L::Rust,
        "py" | "pyi" => L::Python,
        "js" | "mjs" | "cjs" | "jsx" => L::Javascript,
        "ts" | "mts" | "cts" => L::Typescript,
        "tsx" => L::Tsx,
        "go" => L::Go,
        "java" => L::Java,
        "c" | "h" => L::C,
        "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" => L::Cpp,
        "cs" => L::Csharp,
        "rb" => L::Ruby,
        "php" => L::Php,
        "sh" | "bash" | "zsh" => L::Bash,
        "kt" | "kts" => L::Kotlin,
        "swift" => L::Swift,
        "scala" => L::Scala,
        "lua" => L::Lua,
        "sql" => L::Sql,
        "md" | "markdown" | "mdx" => L::Markdown,
        "rst" => L::Rst,
        "json" | "geojson" => L::Json,
        "jsonl" | "ndjson" => L::Jsonl,
        "ipynb" => L::Notebook,
        "pdf" => L::Pdf,
        "txt" | "log" => L::Text,
        "yaml" | "yml" => L::Yaml,
        "toml" => L::Toml,
        "html" | "htm" => L::Html,
        "css" | "scss" => L::Css,
        "csv" | "tsv" => L::Csv,
        "xml" => L::Xml,
        _ => L::Text,
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
