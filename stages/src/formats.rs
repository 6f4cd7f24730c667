//! The old path of the document formats, kept for callers: the extractors of PDF, notebook and
//! HTML text and the format sniffing live in [`crate::load`] (a format per file), the line-section
//! finders of Markdown, reST, JSON, YAML and TOML in [`crate::chunk::sections`].

pub use crate::chunk::sections::line_sections;
pub use crate::load::{extract, is_extracted, simple_pdf, sniff, Extracted, FormatError, Section};
