//! Language detection by file extension or name: one of [`Language::ALL`], from the one table
//! of extensions in `ctxd_index::language`.

use ctxd_index::language::Language;

/// Language label of a path (`rust`, `python`, …, `text` when unknown).
pub fn detect(path: &str) -> &'static str {
    language_of(path).as_str()
}

/// Language of a path ([`Language::Text`] when unknown; the table is
/// [`Language::of_path`]'s).
pub fn language_of(path: &str) -> Language {
    Language::of_path(path)
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
