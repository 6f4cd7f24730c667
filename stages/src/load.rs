//! The load stage: bytes on disk → text, or a counted reason not to index the file.
//!
//! Order of checks: the path must still be a regular file (vanished → skip), not larger than
//! `max_file_bytes` (→ skip), its blake3 hash must differ from the one the index holds
//! (unchanged → skip, nothing downstream runs), and it must not look binary (a NUL byte in the
//! first 8 KiB → skip). Invalid UTF-8 is decoded lossily and counted. A file that used to be
//! indexed and is now binary or too large is reported as removed so its stale chunks go.
//!
//! Files that are not text are turned into text here, one format per file: PDF pages
//! (`pdf.rs`), notebook cells (`notebook.rs`) and HTML sections (`html.rs`), each section
//! citing a fixed position instead of source lines (see [`Section`]); [`sniff`] names the
//! format of a file without a telling extension from its first bytes; UTF-16 with a byte-order
//! mark is decoded ([`utf16`]). Malformed input never fails a file: a corrupt PDF or notebook is
//! an error the loader counts and skips.

mod html;
mod notebook;
mod pdf;
mod section;
mod sniff;
mod utf16;

pub use pdf::simple_pdf;
#[cfg(test)]
pub(crate) use section::labels;
pub(crate) use section::{line_of_offset, line_starts};
pub use section::{Extracted, FormatError, Section};
pub use sniff::sniff;
pub use utf16::{decode_utf16, Utf16Reader};

pub mod stage;

use crate::metrics as m;
use crate::{error::StageError, lang, state::FileState, SourceFile};

/// How many leading bytes are inspected for NUL bytes.
const SNIFF_BYTES: usize = 8192;

/// Loader settings.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// Files above this size are skipped (counted as `too_large`).
    pub max_file_bytes: u64,
    /// Files above this size are not read whole: they are hashed in a streaming pass and
    /// chunked in parts (by the chunk stage's `Chunker::stream`).
    pub stream_threshold_bytes: u64,
}

impl Default for LoadConfig {
    fn default() -> Self {
        Self { max_file_bytes: 4 << 30, stream_threshold_bytes: 10 * 1024 * 1024 }
    }
}

/// A file's text, ready to chunk.
#[derive(Debug, Clone)]
pub struct LoadedFile {
    pub rel: String,
    pub language: &'static str,
    pub text: String,
    /// blake3 of the raw bytes, hex.
    pub file_hash: String,
    /// True when invalid UTF-8 was replaced.
    pub lossy: bool,
    /// For PDF, notebook and HTML files: `text` is the extracted text and these its sections.
    pub sections: Option<Vec<Section>>,
    /// For files over the streaming threshold: `text` is empty and the chunker reads this path.
    pub stream: Option<std::path::PathBuf>,
}

/// What loading a file led to.
#[derive(Debug)]
pub enum LoadOutcome {
    Loaded(LoadedFile),
    /// Not indexed, for this reason (metric label).
    Skipped(&'static str),
    /// Indexed before, not indexable now: its chunks must be removed.
    Gone(&'static str),
}

fn skip(reason: &'static str, rel: &str, state: &FileState) -> LoadOutcome {
    metrics::counter!(m::LOAD_SKIPPED_TOTAL, "reason" => reason).increment(1);
    if state.get(rel).is_some() {
        LoadOutcome::Gone(reason)
    } else {
        LoadOutcome::Skipped(reason)
    }
}

/// Formats handled by [`extract`].
pub fn is_extracted(language: &str) -> bool {
    matches!(language, "pdf" | "notebook" | "html")
}

/// Extracts text and sections from a PDF, notebook or HTML file. Notebooks and HTML are text:
/// a UTF-8 byte-order mark is dropped and UTF-16 (with its mark) decoded first.
pub fn extract(language: &str, bytes: &[u8]) -> Result<Extracted, FormatError> {
    if language == "pdf" {
        return pdf::pdf(bytes);
    }
    let decoded = decode_utf16(bytes);
    let text = match &decoded {
        Some(t) => t.as_bytes(),
        None => bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes),
    };
    match language {
        "notebook" => notebook::notebook(text),
        _ => Ok(html::html(&String::from_utf8_lossy(text))),
    }
}

/// Largest PDF, notebook or HTML file parsed whole for its format even over the streaming
/// threshold (its text is not its bytes); a larger one is streamed as lines, as any file is. A
/// DOM or JSON tree takes several times the file's size: two load workers at this size stay
/// well under a gigabyte.
pub const EXTRACTED_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// True when `bytes` look binary (a NUL byte near the start).
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(SNIFF_BYTES)].contains(&0)
}

/// Loads one file (blocking I/O: call it from a blocking thread).
pub fn load(file: &SourceFile, state: &FileState, cfg: &LoadConfig) -> Result<LoadOutcome, StageError> {
    let meta = match std::fs::metadata(&file.abs) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(skip("vanished", &file.rel, state)),
        Err(source) => return Err(StageError::Read { path: file.abs.clone(), source }),
    };
    if !meta.is_file() {
        return Ok(skip("vanished", &file.rel, state));
    }
    if meta.len() > cfg.max_file_bytes {
        return Ok(skip("too_large", &file.rel, state));
    }
    let mut language = lang::detect(&file.rel);
    let parse_whole = is_extracted(language) && meta.len() <= EXTRACTED_MAX_BYTES;
    if meta.len() > cfg.stream_threshold_bytes && !parse_whole {
        return load_streamed(file, state);
    }
    let bytes = match std::fs::read(&file.abs) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(skip("vanished", &file.rel, state)),
        Err(source) => return Err(StageError::Read { path: file.abs.clone(), source }),
    };
    metrics::counter!(m::LOAD_BYTES_TOTAL).increment(bytes.len() as u64);
    let file_hash = blake3::hash(&bytes).to_hex().to_string();
    if state.is_current(&file.rel, &file_hash) {
        metrics::counter!(m::LOAD_SKIPPED_TOTAL, "reason" => "unchanged").increment(1);
        return Ok(LoadOutcome::Skipped("unchanged"));
    }
    if language == "text" && std::path::Path::new(&file.rel).extension().is_none() {
        language = sniff(&bytes).unwrap_or("text");
    }
    if is_extracted(language) {
        return Ok(match extract(language, &bytes) {
            Ok(e) => LoadOutcome::Loaded(LoadedFile {
                rel: file.rel.clone(),
                language,
                text: e.text,
                file_hash,
                lossy: false,
                sections: Some(e.sections),
                stream: None,
            }),
            Err(e) => {
                // Counted and skipped, but a previously indexed version is kept: a file caught
                // half-written must not wipe what was good.
                metrics::counter!(m::LOAD_INVALID_TOTAL, "format" => language).increment(1);
                metrics::counter!(m::LOAD_SKIPPED_TOTAL, "reason" => "invalid").increment(1);
                tracing::warn!("{}: {e}; skipped", file.abs.display());
                LoadOutcome::Skipped("invalid")
            }
        });
    }
    if let Some(text) = decode_utf16(&bytes) {
        return Ok(LoadOutcome::Loaded(LoadedFile {
            rel: file.rel.clone(),
            language,
            text,
            file_hash,
            lossy: false,
            sections: None,
            stream: None,
        }));
    }
    if looks_binary(&bytes) {
        return Ok(skip("binary", &file.rel, state));
    }
    let (mut text, lossy) = match String::from_utf8(bytes) {
        Ok(s) => (s, false),
        Err(e) => {
            metrics::counter!(m::LOAD_LOSSY_UTF8_TOTAL).increment(1);
            tracing::warn!("{}: invalid utf-8, decoded lossily", file.abs.display());
            (String::from_utf8_lossy(e.as_bytes()).into_owned(), true)
        }
    };
    if text.starts_with('\u{feff}') {
        text.drain(..'\u{feff}'.len_utf8());
    }
    Ok(LoadOutcome::Loaded(LoadedFile {
        rel: file.rel.clone(),
        language,
        text,
        file_hash,
        lossy,
        sections: None,
        stream: None,
    }))
}

/// A file over the streaming threshold: hashed in one pass with bounded memory; the chunker
/// reads it again in parts.
fn load_streamed(file: &SourceFile, state: &FileState) -> Result<LoadOutcome, StageError> {
    use std::io::Read;
    let read_err = |source: std::io::Error| StageError::Read { path: file.abs.clone(), source };
    let mut f = match std::fs::File::open(&file.abs) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(skip("vanished", &file.rel, state)),
        Err(e) => return Err(read_err(e)),
    };
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut first = true;
    loop {
        let n = f.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            break;
        }
        // A UTF-16 byte-order mark explains the NUL bytes (checked without decoding the block).
        let utf16_bom = matches!(buf[..n], [0xFF, 0xFE, ..] | [0xFE, 0xFF, ..]);
        if first && looks_binary(&buf[..n]) && !utf16_bom {
            return Ok(skip("binary", &file.rel, state));
        }
        first = false;
        hasher.update(&buf[..n]);
        metrics::counter!(m::LOAD_BYTES_TOTAL).increment(n as u64);
    }
    let file_hash = hasher.finalize().to_hex().to_string();
    if state.is_current(&file.rel, &file_hash) {
        metrics::counter!(m::LOAD_SKIPPED_TOTAL, "reason" => "unchanged").increment(1);
        return Ok(LoadOutcome::Skipped("unchanged"));
    }
    Ok(LoadOutcome::Loaded(LoadedFile {
        rel: file.rel.clone(),
        language: lang::detect(&file.rel),
        text: String::new(),
        file_hash,
        lossy: false,
        sections: None,
        stream: Some(file.abs.clone()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(dir: &std::path::Path, name: &str, bytes: &[u8]) -> SourceFile {
        let abs = dir.join(name);
        std::fs::write(&abs, bytes).unwrap();
        SourceFile { rel: name.to_string(), abs }
    }

    #[test]
    fn structured_files_with_a_bom_over_the_threshold_or_without_pages() {
        let dir = tempfile::tempdir().unwrap();
        let state = FileState::default();
        let nb = br##"{"cells":[{"cell_type":"markdown","source":["# Title words"]}],"metadata":{},"nbformat":4,"nbformat_minor":5}"##;
        // A notebook with a UTF-8 byte-order mark, and one in UTF-16: both read.
        let bom = src(dir.path(), "bom.ipynb", &[b"\xEF\xBB\xBF".as_slice(), nb].concat());
        let LoadOutcome::Loaded(f) = load(&bom, &state, &LoadConfig::default()).unwrap() else { panic!("bom") };
        assert!(f.text.contains("Title words"), "{}", f.text);
        let mut utf16 = vec![0xFF, 0xFE];
        utf16.extend(String::from_utf8_lossy(nb).encode_utf16().flat_map(u16::to_le_bytes));
        let u = src(dir.path(), "u16.ipynb", &utf16);
        let LoadOutcome::Loaded(f) = load(&u, &state, &LoadConfig::default()).unwrap() else { panic!("utf-16") };
        assert!(f.text.contains("Title words"));
        // Over the streaming threshold a notebook is still parsed as a notebook, not streamed.
        let small = LoadConfig { max_file_bytes: 1 << 20, stream_threshold_bytes: 10 };
        let LoadOutcome::Loaded(f) = load(&bom, &state, &small).unwrap() else { panic!("big notebook") };
        assert!(f.stream.is_none() && f.sections.is_some());
        // A PDF without pages (what lopdf recovers of a truncated file): invalid, so an indexed
        // version is kept rather than replaced by nothing.
        let cut = src(dir.path(), "cut.pdf", &pdf::simple_pdf(&[]));
        let outcome = load(&cut, &state, &LoadConfig::default()).unwrap();
        assert!(matches!(outcome, LoadOutcome::Skipped("invalid")), "{outcome:?}");
    }

    #[test]
    fn binary_lossy_unchanged_vanished_and_large() {
        let dir = tempfile::tempdir().unwrap();
        let state = FileState::default();
        let cfg = LoadConfig { max_file_bytes: 100, stream_threshold_bytes: 1000 };
        let bin = src(dir.path(), "a.dat", b"abc\0def");
        assert!(matches!(load(&bin, &state, &cfg).unwrap(), LoadOutcome::Skipped("binary")));
        let bad = src(dir.path(), "b.txt", b"ok \xff\xfe end");
        let LoadOutcome::Loaded(f) = load(&bad, &state, &cfg).unwrap() else { panic!("not loaded") };
        assert!(f.lossy);
        assert!(f.text.starts_with("ok ") && f.text.ends_with(" end"));
        state.set("b.txt", &f.file_hash);
        assert!(matches!(load(&bad, &state, &cfg).unwrap(), LoadOutcome::Skipped("unchanged")));
        let big = src(dir.path(), "c.txt", &[b'x'; 200]);
        assert!(matches!(load(&big, &state, &cfg).unwrap(), LoadOutcome::Skipped("too_large")));
        // An indexed file that turns binary is reported gone.
        std::fs::write(&bad.abs, b"\0\0\0").unwrap();
        assert!(matches!(load(&bad, &state, &cfg).unwrap(), LoadOutcome::Gone("binary")));
        // Over the streaming threshold: hashed in one pass, not read into memory.
        let log = src(dir.path(), "big.log", &b"a log line\n".repeat(500));
        let streamed = LoadConfig { max_file_bytes: 1 << 20, stream_threshold_bytes: 1000 };
        let LoadOutcome::Loaded(f) = load(&log, &state, &streamed).unwrap() else { panic!("streamed") };
        assert!(f.text.is_empty() && f.stream.is_some());
        assert_eq!(f.file_hash, blake3::hash(&b"a log line\n".repeat(500)).to_hex().to_string());
        state.set("big.log", &f.file_hash);
        assert!(matches!(load(&log, &state, &streamed).unwrap(), LoadOutcome::Skipped("unchanged")));
        let vanished = SourceFile { rel: "zz.txt".into(), abs: dir.path().join("zz.txt") };
        // UTF-16 with a BOM is decoded, not taken for binary.
        let mut utf16 = vec![0xFF, 0xFE];
        utf16.extend("héllo wörld".encode_utf16().flat_map(u16::to_le_bytes));
        let u = src(dir.path(), "u16.txt", &utf16);
        let LoadOutcome::Loaded(f) = load(&u, &state, &LoadConfig::default()).unwrap() else { panic!("utf-16") };
        assert_eq!(f.text, "héllo wörld");
        // A corrupt PDF or notebook is a counted skip.
        let pdf = src(dir.path(), "bad.pdf", b"%PDF-1.4\n1 0 obj <<");
        assert!(matches!(load(&pdf, &state, &LoadConfig::default()).unwrap(), LoadOutcome::Skipped("invalid")));
        let nb = src(dir.path(), "bad.ipynb", b"{\"cells\": [");
        assert!(matches!(load(&nb, &state, &LoadConfig::default()).unwrap(), LoadOutcome::Skipped("invalid")));
        // An extension-less PDF is sniffed, a good notebook is extracted into cells.
        let good = src(dir.path(), "REPORT", &simple_pdf(&["annual figures"]));
        let LoadOutcome::Loaded(f) = load(&good, &state, &LoadConfig::default()).unwrap() else { panic!("pdf") };
        assert_eq!(f.language, "pdf");
        assert!(f.text.contains("annual figures") && f.sections.is_some());
        assert!(matches!(load(&vanished, &state, &cfg).unwrap(), LoadOutcome::Skipped("vanished")));
    }
}
