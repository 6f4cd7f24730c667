//! The closed set of language labels a chunk carries (`Chunk::language`, the `language` column):
//! what `ctxd_stages::lang::detect` assigns and what a query's `language` filter may name; and
//! the one table of file extensions ([`Language::of_extension`], [`Language::of_path`]) that the
//! chunker's detection and the router's "this word is a file name" both read.
//!
//! Parsed once at the edge: a request naming a language not in [`Language::ALL`] is refused
//! with the list of labels (before, a misspelt `"pyhton"` silently matched nothing). Stored
//! and serialised as the label string, so the table and the wire formats are unchanged.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! languages {
    ($($variant:ident = $label:literal),* $(,)?) => {
        /// A language label.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Language {
            $($variant),*
        }

        impl Language {
            /// Every label, in the order docs/how-it-works.md lists them.
            pub const ALL: &'static [Language] = &[$(Language::$variant),*];

            /// The label as stored and sent (`rust`, `python`, …).
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Language::$variant => $label),*
                }
            }
        }
    };
}

languages! {
    Rust = "rust", Python = "python", Javascript = "javascript", Typescript = "typescript", Tsx = "tsx",
    Go = "go", Java = "java", C = "c", Cpp = "cpp", Csharp = "csharp", Ruby = "ruby", Php = "php",
    Bash = "bash", Kotlin = "kotlin", Swift = "swift", Scala = "scala", Lua = "lua", Sql = "sql",
    Dockerfile = "dockerfile", Make = "make", Cmake = "cmake", Markdown = "markdown", Rst = "rst",
    Json = "json", Jsonl = "jsonl", Notebook = "notebook", Pdf = "pdf", Text = "text", Yaml = "yaml",
    Toml = "toml", Html = "html", Css = "css", Csv = "csv", Xml = "xml",
}

/// A label that is not a language ctxd assigns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown language '{0}': ctxd labels chunks as one of {labels}", labels = labels())]
pub struct UnknownLanguage(pub String);

use Language as L;

/// Every file extension ctxd knows, with the language it labels. Extensions of files indexed as
/// plain text (no grammar) are listed too: they still make a word of a query a file name.
const EXTENSIONS: &[(&str, Language)] = &[
    ("rs", L::Rust),
    ("py", L::Python),
    ("pyi", L::Python),
    ("js", L::Javascript),
    ("mjs", L::Javascript),
    ("cjs", L::Javascript),
    ("jsx", L::Javascript),
    ("ts", L::Typescript),
    ("mts", L::Typescript),
    ("cts", L::Typescript),
    ("tsx", L::Tsx),
    ("go", L::Go),
    ("java", L::Java),
    ("c", L::C),
    ("h", L::C),
    ("cc", L::Cpp),
    ("cpp", L::Cpp),
    ("cxx", L::Cpp),
    ("hpp", L::Cpp),
    ("hh", L::Cpp),
    ("hxx", L::Cpp),
    ("cs", L::Csharp),
    ("rb", L::Ruby),
    ("php", L::Php),
    ("sh", L::Bash),
    ("bash", L::Bash),
    ("zsh", L::Bash),
    ("kt", L::Kotlin),
    ("kts", L::Kotlin),
    ("swift", L::Swift),
    ("scala", L::Scala),
    ("lua", L::Lua),
    ("sql", L::Sql),
    ("md", L::Markdown),
    ("markdown", L::Markdown),
    ("mdx", L::Markdown),
    ("rst", L::Rst),
    ("json", L::Json),
    ("geojson", L::Json),
    ("jsonl", L::Jsonl),
    ("ndjson", L::Jsonl),
    ("ipynb", L::Notebook),
    ("pdf", L::Pdf),
    ("txt", L::Text),
    // Not `log`: a `.log` file is text by default, and `logger.log` in a query is a call.
    ("yaml", L::Yaml),
    ("yml", L::Yaml),
    ("toml", L::Toml),
    ("html", L::Html),
    ("htm", L::Html),
    ("css", L::Css),
    ("scss", L::Css),
    ("csv", L::Csv),
    ("tsv", L::Csv),
    ("xml", L::Xml),
    // Indexed as text.
    ("proto", L::Text),
    ("gradle", L::Text),
    ("cfg", L::Text),
    ("ini", L::Text),
    ("lock", L::Text),
    ("vue", L::Text),
    ("svelte", L::Text),
    ("dart", L::Text),
    ("ex", L::Text),
    ("exs", L::Text),
    ("erl", L::Text),
    ("hs", L::Text),
    ("ml", L::Text),
    ("clj", L::Text),
    ("zig", L::Text),
    ("nim", L::Text),
    ("r", L::Text),
    ("jl", L::Text),
];

/// File names that say their language without an extension (compared lower-cased).
const FILE_NAMES: &[(&str, Language)] =
    &[("dockerfile", L::Dockerfile), ("makefile", L::Make), ("gnumakefile", L::Make), ("cmakelists.txt", L::Cmake)];

impl Language {
    /// The language an extension (without its dot, any case) labels; `None` for one ctxd does
    /// not know.
    pub fn of_extension(ext: &str) -> Option<Language> {
        EXTENSIONS.iter().find(|(e, _)| e.eq_ignore_ascii_case(ext)).map(|(_, l)| *l)
    }

    /// The language of a path by its file name or extension ([`Language::Text`] when unknown).
    pub fn of_path(path: &str) -> Language {
        let p = std::path::Path::new(path);
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
        if let Some((_, l)) = FILE_NAMES.iter().find(|(n, _)| *n == name) {
            return *l;
        }
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        Language::of_extension(ext).unwrap_or(Language::Text)
    }
}

fn labels() -> String {
    Language::ALL.iter().map(|l| l.as_str()).collect::<Vec<_>>().join(", ")
}

impl FromStr for Language {
    type Err = UnknownLanguage;

    /// Case-insensitive (`Python` is `python`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Language::ALL
            .iter()
            .copied()
            .find(|l| l.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownLanguage(s.to_string()))
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Language {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A language is its label on the wire: one of [`Language::ALL`]'s.
impl schemars::JsonSchema for Language {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Language".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let labels: Vec<&str> = Language::ALL.iter().map(|l| l.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": labels })
    }
}

impl<'de> Deserialize<'de> for Language {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_and_unknown_ones_list_the_choices() {
        for l in Language::ALL {
            assert_eq!(l.as_str().parse::<Language>(), Ok(*l));
        }
        assert_eq!("Python".parse::<Language>(), Ok(Language::Python));
        let err = "pyhton".parse::<Language>().unwrap_err().to_string();
        assert!(err.starts_with("unknown language 'pyhton': ctxd labels chunks as one of rust, python,"), "{err}");
        let v: Language = serde_json::from_str("\"tsx\"").unwrap();
        assert_eq!((v, serde_json::to_string(&v).unwrap().as_str()), (Language::Tsx, "\"tsx\""));
        assert!(serde_json::from_str::<Language>("\"klingon\"").unwrap_err().to_string().contains("unknown language"));
    }

    #[test]
    fn one_table_of_extensions_and_names() {
        assert_eq!(Language::of_extension("PY"), Some(Language::Python));
        assert_eq!(Language::of_extension("vue"), Some(Language::Text), "a text file the router still names");
        assert_eq!(Language::of_extension("log"), None);
        assert_eq!(Language::of_path("src/Makefile"), Language::Make);
        assert_eq!(Language::of_path("a/b.tsx"), Language::Tsx);
        assert_eq!(Language::of_path("notes"), Language::Text);
    }
}
