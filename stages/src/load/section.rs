//! Sections of a document: labelled line ranges, as the chunker's line-section finders and the
//! extractors of PDF, notebook and HTML files produce them; the text an extractor produces with
//! its sections (each citing a fixed position: page, cell, source line), or the reason the file
//! could not be read; and the offset ↔ line arithmetic both sides use.

/// A labelled range of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// First line (0-based) of the section in the text being chunked.
    pub start: usize,
    /// Last line (0-based, inclusive).
    pub end: usize,
    /// Citation path: heading path, key path, page, cell.
    pub label: Option<String>,
    /// Chunk kind (`section`, `key`, `table`, `page`, `cell`).
    pub kind: &'static str,
    /// For extracted formats: the position every chunk of this section cites (page number,
    /// cell number, source line) instead of lines of the extracted text.
    pub fixed_line: Option<u32>,
}

/// Text extracted from a non-text format, with its sections.
#[derive(Debug, Clone)]
pub struct Extracted {
    pub text: String,
    pub sections: Vec<Section>,
}

/// Why a file of an extracted format could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    #[error("corrupt pdf: {0}")]
    Pdf(String),
    #[error("invalid notebook: {0}")]
    Notebook(String),
}

/// Appends `text` as a section citing `fixed`.
pub(super) fn push_section(out: &mut Extracted, text: &str, label: String, kind: &'static str, fixed: u32) {
    let text = text.trim_end();
    if text.trim().is_empty() {
        return;
    }
    let start = if out.text.is_empty() { 0 } else { out.text.matches('\n').count() + 1 };
    if !out.text.is_empty() {
        out.text.push('\n');
    }
    out.text.push_str(text);
    let end = start + text.matches('\n').count();
    out.sections.push(Section { start, end, label: Some(label), kind, fixed_line: Some(fixed) });
}

/// The 0-based line holding byte `offset`, given the [`line_starts`] of the text.
pub(crate) fn line_of_offset(line_starts: &[usize], offset: usize) -> usize {
    line_starts.partition_point(|&s| s <= offset).saturating_sub(1)
}

/// Byte offsets at which the lines of `text` start.
pub(crate) fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0).chain(text.match_indices('\n').map(|(i, _)| i + 1)).collect()
}

/// The labels of `s` (empty for an unlabelled section), for tests.
#[cfg(test)]
pub(crate) fn labels(s: &[Section]) -> Vec<String> {
    s.iter().map(|s| s.label.clone().unwrap_or_default()).collect()
}
