//! Files too large to hold in memory: read in blocks of whole lines (UTF-16 transcoded as it is
//! read), each block cut into token windows with exact file line numbers and handed on as one
//! [`Part`]; [`PartBudget`] bounds the parts read but not yet committed.

use super::chunker::Chunker;
use super::record::{self, ChunkedFile, Part};
use crate::load::{LoadedFile, Utf16Reader};
use crate::metrics as m;
use ctxd_index::PARTIAL_PREFIX;

/// Bounds the parts of streamed files that are read but not yet committed, so memory stays
/// flat however fast the reader is compared with embedding and commits (queues between stages
/// are bounded in items, and a part is a big item). Cheap to clone (shared).
#[derive(Clone)]
pub struct PartBudget {
    inner: std::sync::Arc<(std::sync::Mutex<usize>, std::sync::Condvar)>,
    max: usize,
}

impl PartBudget {
    /// At most `max` parts in flight.
    pub fn new(max: usize) -> Self {
        Self { inner: Default::default(), max: max.max(1) }
    }

    /// Blocks the calling (blocking) thread until a part may be produced, then takes a slot.
    /// A part lost without reaching the sink (a failed embedding) would hold its slot for
    /// ever, so after 30 s without progress the slot is taken anyway (slower, never stuck).
    pub fn acquire(&self) {
        let (lock, cv) = &*self.inner;
        let mut n = lock.lock().unwrap_or_else(|e| e.into_inner());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while *n >= self.max {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                tracing::warn!("stream parts not committed for 30 s; reading on");
                break;
            }
            n = cv.wait_timeout(n, left).unwrap_or_else(|e| e.into_inner()).0;
        }
        *n += 1;
    }

    /// `k` parts left the pipeline (committed, failed or dropped).
    pub fn release(&self, k: usize) {
        if k == 0 {
            return;
        }
        let (lock, cv) = &*self.inner;
        let mut n = lock.lock().unwrap_or_else(|e| e.into_inner());
        *n = n.saturating_sub(k);
        cv.notify_all();
    }
}

impl Chunker {
    /// Chunks a file too large to hold in memory: reads about `block_bytes` of whole lines at a
    /// time, cuts them into token windows (exact file line numbers) and hands each block's
    /// chunks to `emit` as a [`Part`] while reading on; returns the last part. `emit` returning
    /// false stops the read (the pipeline is shutting down). Memory stays at one block.
    pub fn stream(
        &self,
        file: &LoadedFile,
        path: &std::path::Path,
        block_bytes: usize,
        budget: &PartBudget,
        mut emit: impl FnMut(ChunkedFile) -> bool,
    ) -> std::io::Result<ChunkedFile> {
        use std::io::BufRead;
        let mut file_reader = std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(path)?);
        // UTF-16 (with a byte-order mark) is transcoded to UTF-8 as it is read.
        let bom = match file_reader.fill_buf()? {
            [0xFF, 0xFE, ..] => Some(true),
            [0xFE, 0xFF, ..] => Some(false),
            _ => None,
        };
        let mut reader: Box<dyn BufRead> = match bom {
            Some(le) => {
                file_reader.consume(2);
                let utf8 = Utf16Reader::new(file_reader, le);
                Box::new(std::io::BufReader::with_capacity(1 << 20, utf8))
            }
            None => Box::new(file_reader),
        };
        let partial = format!("{PARTIAL_PREFIX}{}", file.file_hash);
        let mut index = 0u32;
        let mut first_line = 0usize;
        let mut block: Vec<u8> = Vec::with_capacity(block_bytes + 4096);
        loop {
            // One slot per part, released by the sink when the part is committed.
            budget.acquire();
            block.clear();
            let mut eof = false;
            while block.len() < block_bytes {
                if reader.read_until(b'\n', &mut block)? == 0 {
                    eof = true;
                    break;
                }
            }
            if !eof && reader.fill_buf()?.is_empty() {
                eof = true;
            }
            metrics::counter!(m::CHUNK_STREAM_BYTES_TOTAL).increment(block.len() as u64);
            let text = String::from_utf8_lossy(&block);
            let lines = text.matches('\n').count() + usize::from(!text.ends_with('\n') && !text.is_empty());
            let mut chunks = self.chunk("text", &text);
            for c in &mut chunks {
                c.start_line += first_line as u32;
                c.end_line += first_line as u32;
            }
            first_line += lines;
            record::place(&file.rel, file.language, &mut chunks);
            let part = ChunkedFile {
                rel: file.rel.clone(),
                language: file.language,
                file_hash: partial.clone(),
                chunks,
                symbols: Vec::new(),
                edges: Vec::new(),
                part: Some(Part { index, last: eof, file_hash: file.file_hash.clone() }),
            };
            metrics::counter!(m::CHUNK_STREAM_PARTS_TOTAL).increment(1);
            if eof {
                return Ok(part);
            }
            if !emit(part) {
                budget.release(1);
                return Err(std::io::Error::new(std::io::ErrorKind::Interrupted, "pipeline shutting down"));
            }
            index += 1;
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::testing::chunker;

    /// Streams the file at `path` in 4 KB blocks; returns every part, the last included.
    fn stream_parts(path: &std::path::Path) -> Vec<ChunkedFile> {
        let file = LoadedFile {
            rel: path.file_name().unwrap().to_string_lossy().into_owned(),
            language: "text",
            text: String::new(),
            file_hash: "h".into(),
            lossy: false,
            sections: None,
            stream: Some(path.to_path_buf()),
        };
        let mut parts = Vec::new();
        let last = chunker(40)
            .stream(&file, path, 4096, &PartBudget::new(1000), |p| {
                parts.push(p);
                true
            })
            .unwrap();
        parts.push(last);
        parts
    }

    /// Every chunk is exactly its lines of `text`, and every line of `text` is in some chunk.
    fn assert_exact_cover(parts: &[ChunkedFile], text: &str) {
        let lines: Vec<&str> = text.lines().collect();
        let mut covered = std::collections::BTreeSet::new();
        for c in parts.iter().flat_map(|p| &p.chunks) {
            assert_eq!(c.content, lines[c.start_line as usize - 1..c.end_line as usize].join("\n"));
            covered.extend(c.start_line..=c.end_line);
        }
        assert_eq!(covered.len(), lines.len(), "every line is in some chunk");
    }

    #[test]
    fn streamed_utf16_is_transcoded_with_exact_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big-utf16.log");
        let text: String = (1..=1500).map(|i| format!("zeile {i} größe ✓ 𝄞\n")).collect();
        let mut bytes = vec![0xFF, 0xFE];
        bytes.extend(text.encode_utf16().flat_map(u16::to_le_bytes));
        std::fs::write(&path, &bytes).unwrap();
        let parts = stream_parts(&path);
        assert!(parts.len() > 3, "{} parts", parts.len());
        assert_exact_cover(&parts, &text);
    }

    #[test]
    fn streamed_parts_keep_exact_line_numbers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.log");
        let text: String = (1..=2000).map(|i| format!("line {i} of the log\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let parts = stream_parts(&path);
        assert!(parts.len() > 5, "{} parts", parts.len());
        assert!(parts.iter().enumerate().all(|(i, p)| p.part.as_ref().unwrap().index == i as u32));
        assert!(parts.last().unwrap().part.as_ref().unwrap().last);
        assert!(parts.iter().all(|p| p.file_hash == "partial:h"));
        assert_eq!(text.lines().count(), 2000);
        assert_exact_cover(&parts, &text);
    }
}
