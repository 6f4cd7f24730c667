//! The `symbols` table: one row per definition (function, method, class, struct, …) of every
//! indexed file, for exact and prefix symbol lookup.
//!
//! | column | type | meaning |
//! |---|---|---|
//! | symbol_id | utf8 | blake3 of path, qualified name and start line |
//! | name | utf8 | the definition's own name (`verify_password`, `norm`) |
//! | qualified_name | utf8 | module path + symbol (`src::auth::verify_password`, `pkg.mod.Class.method`) |
//! | symbol | utf8 | the symbol as the chunks carry it (`Point::norm`, `Class.method`) |
//! | kind | utf8 | `function`, `method`, `class`, `struct`, `impl`, … |
//! | language | utf8 | language of the file |
//! | path | utf8 | file path relative to the root |
//! | start_line, end_line | uint32 | 1-based inclusive line range of the whole definition |
//! | signature | utf8 | the definition's first code line (after docs and attributes) |
//! | parent | utf8? | the enclosing type/module symbol, when nested |
//! | doc | utf8? | first line of the leading doc comment or docstring |
//!
//! Rows are derived from the chunks of the same commit and written before them (idempotent
//! `merge_insert` keyed by `symbol_id`), so a retried commit never duplicates a symbol.

use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};

/// Chunk kinds that are places in a file, not definitions: a module's top, a document's
/// section, a data file's key or table, a PDF page, a notebook cell, CSV rows, a YAML document.
const NOT_DEFINITIONS: &[&str] = &["module", "section", "key", "table", "page", "cell", "rows", "document"];

/// Whether a chunk of this kind holds a definition (a function, method, class, struct, impl, …):
/// the one rule for the symbols table's rows and for routed search's definition boost. The
/// pieces of a definition split across chunks (`function_part`) count as their definition.
pub fn is_definition(kind: &str) -> bool {
    let base = kind.strip_suffix("_part").unwrap_or(kind);
    !base.is_empty() && !NOT_DEFINITIONS.contains(&base)
}

/// Name of the symbols table.
pub const SYMBOLS_TABLE: &str = "symbols";

/// One definition.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SymbolRow {
    pub symbol_id: String,
    pub name: String,
    pub qualified_name: String,
    pub symbol: String,
    pub kind: String,
    pub language: String,
    pub path: String,
    pub start_line: u32,
    pub end_line: u32,
    pub signature: String,
    pub parent: Option<String>,
    pub doc: Option<String>,
}

/// Schema of the symbols table.
pub fn symbols_schema() -> SchemaRef {
    let s = |n: &str| Field::new(n, DataType::Utf8, false);
    Arc::new(Schema::new(vec![
        s("symbol_id"),
        s("name"),
        s("qualified_name"),
        s("symbol"),
        s("kind"),
        s("language"),
        s("path"),
        Field::new("start_line", DataType::UInt32, false),
        Field::new("end_line", DataType::UInt32, false),
        s("signature"),
        Field::new("parent", DataType::Utf8, true),
        Field::new("doc", DataType::Utf8, true),
    ]))
}

/// Builds a record batch of symbol rows.
pub fn symbols_to_batch(rows: &[SymbolRow]) -> Result<RecordBatch, arrow_schema::ArrowError> {
    let s = |f: fn(&SymbolRow) -> &str| -> ArrayRef { Arc::new(StringArray::from_iter_values(rows.iter().map(f))) };
    let o = |f: fn(&SymbolRow) -> Option<&str>| -> ArrayRef { Arc::new(rows.iter().map(f).collect::<StringArray>()) };
    let u = |f: fn(&SymbolRow) -> u32| -> ArrayRef { Arc::new(UInt32Array::from_iter_values(rows.iter().map(f))) };
    RecordBatch::try_new(
        symbols_schema(),
        vec![
            s(|r| &r.symbol_id),
            s(|r| &r.name),
            s(|r| &r.qualified_name),
            s(|r| &r.symbol),
            s(|r| &r.kind),
            s(|r| &r.language),
            s(|r| &r.path),
            u(|r| r.start_line),
            u(|r| r.end_line),
            s(|r| &r.signature),
            o(|r| r.parent.as_deref()),
            o(|r| r.doc.as_deref()),
        ],
    )
}

/// Reads symbol rows back from record batches.
pub fn batch_to_symbols(batch: &RecordBatch) -> Vec<SymbolRow> {
    let col = |n: &str| batch.column_by_name(n).and_then(|c| c.as_any().downcast_ref::<StringArray>().cloned());
    let u = |n: &str| batch.column_by_name(n).and_then(|c| c.as_any().downcast_ref::<UInt32Array>().cloned());
    let (Some(id), Some(name), Some(q), Some(sym), Some(kind), Some(lang), Some(path), Some(sig)) = (
        col("symbol_id"),
        col("name"),
        col("qualified_name"),
        col("symbol"),
        col("kind"),
        col("language"),
        col("path"),
        col("signature"),
    ) else {
        return Vec::new();
    };
    let (Some(start), Some(end)) = (u("start_line"), u("end_line")) else { return Vec::new() };
    let (parent, doc) = (col("parent"), col("doc"));
    let opt = |a: &Option<StringArray>, i: usize| {
        a.as_ref().filter(|a| !arrow_array::Array::is_null(*a, i)).map(|a| a.value(i).to_string())
    };
    (0..batch.num_rows())
        .map(|i| SymbolRow {
            symbol_id: id.value(i).into(),
            name: name.value(i).into(),
            qualified_name: q.value(i).into(),
            symbol: sym.value(i).into(),
            kind: kind.value(i).into(),
            language: lang.value(i).into(),
            path: path.value(i).into(),
            start_line: start.value(i),
            end_line: end.value(i),
            signature: sig.value(i).into(),
            parent: opt(&parent, i),
            doc: opt(&doc, i),
        })
        .collect()
}
