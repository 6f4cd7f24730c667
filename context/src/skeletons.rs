//! The blocks that stand for what is not sent whole: **signature skeletons** of candidates that
//! did not fit the budget and **outlines** of files (the `outlines` assembly), each packed into
//! the room left and never sent twice in a session. What a skeleton shows is
//! [`crate::compress::skeleton`]'s.

use std::collections::HashMap;

use ctxd_index::{record::Chunk, record::Hit, symbols::SymbolRow};
use ctxd_search::error::SearchError;

use crate::assembler::Assembler;
use crate::block::Block;
use crate::compress::{comment, skeleton, skeleton_key, summary_key, MAX_OUTLINE_LINES, MIN_OUTLINE_LINES};
use crate::request::ContextRequest;

impl Assembler {
    /// Skeleton blocks for `overflow` (`(path, start, end, score)` of the candidates that did
    /// not fit, best first) within `room` tokens: one per distinct set of definitions, none for a
    /// range a chosen block already shows, none where no definition overlaps (text, config).
    pub(crate) async fn skeleton_blocks(
        &self,
        req: &ContextRequest,
        overflow: &[(String, u32, u32, f32)],
        chosen: &[Block],
        room: usize,
    ) -> Result<Vec<(Block, String)>, SearchError> {
        let mut paths: Vec<String> = overflow.iter().map(|o| o.0.clone()).collect();
        paths.sort();
        paths.dedup();
        let rows = self.definitions(req, &paths).await?;
        let by_path = by_path(&rows);
        let mut out: Vec<(Block, String)> = Vec::new();
        let mut used = 0;
        for (path, start, end, score) in overflow {
            let Some(defs) = by_path.get(path.as_str()) else { continue };
            let Some((text, first, last, symbol)) = skeleton(defs, *start, *end) else { continue };
            let mut sent = chosen.iter().chain(out.iter().map(|(b, _)| b));
            if sent.any(|b| b.path == *path && b.start_line <= first && last <= b.end_line) {
                continue;
            }
            let chunk = Chunk {
                path: path.clone(),
                start_line: first,
                end_line: last,
                symbol,
                language: defs[0].language.clone(),
                content: text,
                ..Chunk::default()
            };
            let mut block = Block::new(Hit { chunk, score: *score }, 0);
            block.skeleton = true;
            let key = skeleton_key(&block);
            self.admit(req, block, key, room, &mut used, &mut out);
        }
        Ok(out)
    }
}

impl Assembler {
    /// Outline blocks of `files` (best first) within `room` tokens: each file's definitions
    /// (the skeleton of the whole file, at most [`MAX_OUTLINE_LINES`] lines); none for a file
    /// without definitions, none a session was already sent.
    pub(crate) async fn outline_blocks(
        &self,
        req: &ContextRequest,
        files: &[String],
        room: usize,
    ) -> Result<Vec<(Block, String)>, SearchError> {
        let rows = self.definitions(req, files).await?;
        let by_path = by_path(&rows);
        let mut out: Vec<(Block, String)> = Vec::new();
        let mut used = 0;
        let with_defs = files.iter().filter(|f| by_path.contains_key(f.as_str())).count().max(1);
        let max_lines = (room / with_defs / 12).clamp(MIN_OUTLINE_LINES, MAX_OUTLINE_LINES);
        for path in files {
            let Some(defs) = by_path.get(path.as_str()) else { continue };
            let Some((text, first, last, _)) = skeleton(defs, 0, u32::MAX) else { continue };
            // Keyed by the whole outline: the cut below depends on the room of each answer.
            let key = summary_key("outline", path, first, last, &text);
            let lines: Vec<&str> = text.lines().collect();
            let mut content = lines.iter().take(max_lines).copied().collect::<Vec<_>>().join("\n");
            if lines.len() > max_lines {
                let c = comment(&defs[0].language);
                content.push_str(&format!("\n{c} … {} more lines of outline", lines.len() - max_lines));
            }
            let chunk = Chunk {
                path: path.clone(),
                start_line: first,
                end_line: last,
                language: defs[0].language.clone(),
                content,
                ..Chunk::default()
            };
            let mut block = Block::new(Hit { chunk, score: 0.0 }, 0);
            block.outline = true;
            self.admit(req, block, key, room, &mut used, &mut out);
        }
        Ok(out)
    }
}

impl Assembler {
    /// Adds `block` (keyed `key`; its tokens counted here) to `out` when it fits in `room` beside
    /// the `used` tokens already taken and the request's session was not already sent it (what the
    /// session has takes no room: it is not sent again).
    fn admit(
        &self,
        req: &ContextRequest,
        mut block: Block,
        key: String,
        room: usize,
        used: &mut usize,
        out: &mut Vec<(Block, String)>,
    ) {
        block.tokens = self.tokens().count(&block.render(req.format));
        if *used + block.tokens > room || self.session_has(req, &key) {
            return;
        }
        *used += block.tokens;
        out.push((block, key));
    }

    /// Whether the request's session was already sent the summary keyed `key`.
    fn session_has(&self, req: &ContextRequest, key: &str) -> bool {
        req.session.as_deref().is_some_and(|id| !self.sessions().already_sent(id, &[key]).is_empty())
    }
}

impl Assembler {
    /// The symbol-table rows of `paths` in the view the request reads (its snapshot, sources).
    async fn definitions(&self, req: &ContextRequest, paths: &[String]) -> Result<Vec<SymbolRow>, SearchError> {
        let (index, _) =
            self.searcher().retriever().current().index_as_of(req.as_of.as_deref(), req.source.as_ref()).await?;
        Ok(index.symbols().symbols_in_paths(paths).await?)
    }
}

/// `rows` grouped by path.
fn by_path(rows: &[SymbolRow]) -> HashMap<&str, Vec<&SymbolRow>> {
    let mut by_path: HashMap<&str, Vec<&SymbolRow>> = HashMap::new();
    for r in rows {
        by_path.entry(r.path.as_str()).or_default().push(r);
    }
    by_path
}
