//! The closed set of language labels a chunk carries (`Chunk::language`, the `language` column):
//! what `ctxd_stages::lang::detect` assigns and what a query's `language` filter may name.
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
            /// Every label, in the order the README lists them.
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
}
