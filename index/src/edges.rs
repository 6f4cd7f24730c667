//! The `edges` table: the code graph's outgoing edges of every indexed file, as written —
//! what a file imports, and what each of its definitions calls, references and inherits from.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | edge_id | utf8 | blake3 of path, from, kind, target, name and line (the merge key) |
//! | path | utf8 | the file the edge starts in |
//! | language | utf8 | that file's language label (how `target` is resolved) |
//! | from_symbol | utf8? | the enclosing definition, as the chunks and symbols name it (`Class.method`, `Point::norm`); null at file level |
//! | kind | utf8 | [`EdgeKind`]: `imports`, `calls`, `references`, `inherits` |
//! | target | utf8 | as written: a module spec for `imports` (`..utils`, `pkg.mod`, `crate::a::b`, `./x`, `github.com/a/b`), a (possibly dotted) name otherwise (`helper`, `os.path.join`, `Base`) |
//! | name | utf8? | for `imports`: the imported name (`from m import Name`, `use a::Name`), null for a whole module |
//! | line | uint32 | 1-based line of the edge's site |
//!
//! *Contains* edges are not stored: the symbols table's `parent` gives them. Targets are kept
//! as names, not resolved paths: a reader resolves them against the files and symbols of the
//! same version, so an edit of the file an edge points at never leaves the edge stale, and a
//! changed file replaces only its own outgoing rows (written like the symbols: an idempotent
//! merge keyed by `edge_id`, in the same commit as the file's chunks).

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

/// Name of the edges table.
pub const EDGES_TABLE: &str = "edges";

/// The kinds of stored edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EdgeKind {
    /// A file imports a module (and maybe a name from it).
    Imports,
    /// A definition (or file-level code) calls a function or constructs a class.
    Calls,
    /// A definition names another (a type in a signature, a value read, a decorator).
    References,
    /// A class/struct/interface extends or implements another.
    Inherits,
}

impl EdgeKind {
    pub const ALL: [EdgeKind; 4] = [EdgeKind::Imports, EdgeKind::Calls, EdgeKind::References, EdgeKind::Inherits];

    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Imports => "imports",
            EdgeKind::Calls => "calls",
            EdgeKind::References => "references",
            EdgeKind::Inherits => "inherits",
        }
    }
}

impl fmt::Display for EdgeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is no [`EdgeKind`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown edge kind {0:?} (one of imports, calls, references, inherits)")]
pub struct UnknownEdgeKind(pub String);

impl FromStr for EdgeKind {
    type Err = UnknownEdgeKind;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EdgeKind::ALL.into_iter().find(|k| k.as_str() == s).ok_or_else(|| UnknownEdgeKind(s.to_string()))
    }
}

/// One outgoing edge of a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeRow {
    pub edge_id: String,
    pub path: String,
    pub language: String,
    pub from_symbol: Option<String>,
    pub kind: EdgeKind,
    pub target: String,
    pub name: Option<String>,
    pub line: u32,
}

impl EdgeRow {
    /// An edge with its id computed from its fields.
    pub fn new(
        path: &str,
        language: &str,
        from_symbol: Option<&str>,
        kind: EdgeKind,
        target: &str,
        name: Option<&str>,
        line: u32,
    ) -> Self {
        let mut h = blake3::Hasher::new();
        for part in [path, from_symbol.unwrap_or(""), kind.as_str(), target, name.unwrap_or("")] {
            h.update(part.as_bytes());
            h.update(&[0]);
        }
        h.update(&line.to_le_bytes());
        EdgeRow {
            edge_id: h.finalize().to_hex()[..32].to_string(),
            path: path.to_string(),
            language: language.to_string(),
            from_symbol: from_symbol.map(str::to_string),
            kind,
            target: target.to_string(),
            name: name.map(str::to_string),
            line,
        }
    }
}

/// Schema of the edges table.
pub fn edges_schema() -> SchemaRef {
    let s = |n: &str, null: bool| Field::new(n, DataType::Utf8, null);
    Arc::new(Schema::new(vec![
        s("edge_id", false),
        s("path", false),
        s("language", false),
        s("from_symbol", true),
        s("kind", false),
        s("target", false),
        s("name", true),
        Field::new("line", DataType::UInt32, false),
    ]))
}

/// Builds a record batch of edge rows.
pub fn edges_to_batch(rows: &[EdgeRow]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let s = |f: fn(&EdgeRow) -> &str| -> ArrayRef { Arc::new(StringArray::from_iter_values(rows.iter().map(f))) };
    let o = |f: fn(&EdgeRow) -> Option<&str>| -> ArrayRef { Arc::new(rows.iter().map(f).collect::<StringArray>()) };
    RecordBatch::try_new(
        edges_schema(),
        vec![
            s(|r| &r.edge_id),
            s(|r| &r.path),
            s(|r| &r.language),
            o(|r| r.from_symbol.as_deref()),
            s(|r| r.kind.as_str()),
            s(|r| &r.target),
            o(|r| r.name.as_deref()),
            Arc::new(UInt32Array::from_iter_values(rows.iter().map(|r| r.line))),
        ],
    )
}

/// Reads edge rows back from a record batch (rows of an unknown kind are skipped).
pub fn batch_to_edges(batch: &RecordBatch) -> Vec<EdgeRow> {
    let col = |n: &str| batch.column_by_name(n).and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned());
    let (Some(id), Some(path), Some(lang), Some(from), Some(kind), Some(target), Some(name)) =
        (col("edge_id"), col("path"), col("language"), col("from_symbol"), col("kind"), col("target"), col("name"))
    else {
        return Vec::new();
    };
    let Some(line) = batch.column_by_name("line").and_then(|c| c.as_any().downcast_ref::<UInt32Array>().cloned())
    else {
        return Vec::new();
    };
    let opt = |a: &StringArray, i: usize| (!arrow_array::Array::is_null(a, i)).then(|| a.value(i).to_string());
    (0..batch.num_rows())
        .filter_map(|i| {
            Some(EdgeRow {
                edge_id: id.value(i).into(),
                path: path.value(i).into(),
                language: lang.value(i).into(),
                from_symbol: opt(&from, i),
                kind: kind.value(i).parse().ok()?,
                target: target.value(i).into(),
                name: opt(&name, i),
                line: line.value(i),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_a_batch() {
        let rows = vec![
            EdgeRow::new("a.py", "python", None, EdgeKind::Imports, "..util", Some("helper"), 1),
            EdgeRow::new("a.py", "python", Some("C.m"), EdgeKind::Calls, "helper", None, 7),
        ];
        let batch = edges_to_batch(&rows).unwrap();
        assert_eq!(batch_to_edges(&batch), rows);
        assert_ne!(rows[0].edge_id, rows[1].edge_id);
        assert_eq!("inherits".parse::<EdgeKind>(), Ok(EdgeKind::Inherits));
        assert!("calls_into".parse::<EdgeKind>().unwrap_err().to_string().contains("imports, calls"));
    }
}
