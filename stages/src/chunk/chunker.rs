//! The chunker value: its settings, the token count, the line context of one text, and the
//! primitive every chunking method ends in: token windows with overlap on line boundaries over
//! a range of lines, a single line longer than the budget cut into pieces that keep its line
//! number.

use std::ops::RangeInclusive;
use std::sync::Arc;

use super::record::make_chunk;
use ctxd_index::record::Chunk;

/// Counts tokens in a text.
pub type TokenCountFn = Arc<dyn Fn(&str) -> usize + Send + Sync>;

/// Chunker settings.
#[derive(Debug, Clone)]
pub struct ChunkConfig {
    /// Upper bound of tokens per chunk.
    pub max_tokens: usize,
    /// Tokens repeated between consecutive windows.
    pub overlap_tokens: usize,
    /// Whole definitions below this many tokens are merged with their sibling definitions…
    pub min_tokens: usize,
    /// …while the merged chunk stays within this many tokens (0: never merge).
    pub merge_tokens: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        Self { max_tokens: 240, overlap_tokens: 32, min_tokens: 48, merge_tokens: 120 }
    }
}

/// The chunk budget of a long-context model (a window of at least [`LONG_CONTEXT_WINDOW`]
/// tokens) when `[chunk] max_tokens` is left at its default.
pub const LONG_CONTEXT_TOKENS: usize = 512;
/// The window from which a model counts as long-context.
pub const LONG_CONTEXT_WINDOW: usize = 1024;
/// Tokens of a model's window kept for its special tokens and a document prompt.
const WINDOW_RESERVE: usize = 16;

impl ChunkConfig {
    /// The settings fitted to a model whose inputs are truncated to `window` tokens (0: not
    /// known, nothing changes): a budget the window cannot hold is cut to it (the truncated
    /// tail would never be embedded), and a long-context model gets [`LONG_CONTEXT_TOKENS`]
    /// when the budget is the default. Returns the settings and, when they changed, why.
    pub fn fitted_to(mut self, window: usize) -> (Self, Option<String>) {
        let default = Self::default().max_tokens;
        let budget = if window >= LONG_CONTEXT_WINDOW && self.max_tokens == default {
            LONG_CONTEXT_TOKENS
        } else if window > 0 {
            self.max_tokens.min(window.saturating_sub(WINDOW_RESERVE).max(16))
        } else {
            self.max_tokens
        };
        if budget == self.max_tokens {
            return (self, None);
        }
        let why = if budget > self.max_tokens {
            format!("the model reads {window} tokens: chunks of up to {budget} tokens instead of {}", self.max_tokens)
        } else {
            format!(
                "the model reads {window} tokens: chunks cut to {budget} tokens from [chunk] max_tokens = {}",
                self.max_tokens
            )
        };
        self.max_tokens = budget;
        self.overlap_tokens = self.overlap_tokens.min(budget / 4);
        self.merge_tokens = self.merge_tokens.min(budget);
        (self, Some(why))
    }
}

/// Cuts files into chunks.
#[derive(Clone)]
pub struct Chunker {
    pub(super) count: TokenCountFn,
    pub(super) cfg: ChunkConfig,
}

/// One text split into lines, with the token count of every line.
pub(super) struct Ctx<'a> {
    pub(super) lines: Vec<&'a str>,
    pub(super) line_tokens: Vec<usize>,
    pub(super) lang: &'a str,
    pub(super) src: &'a [u8],
}

impl Chunker {
    /// A chunker counting tokens with `count`.
    pub fn new(count: TokenCountFn, cfg: ChunkConfig) -> Self {
        Self { count, cfg }
    }

    /// A chunker counting tokens with the embedding model's tokenizer.
    pub fn with_tokenizer(counter: ctxd_models::tokens::TokenCounter, cfg: ChunkConfig) -> Self {
        Self::new(Arc::new(move |s: &str| counter.count(s)), cfg)
    }

    /// The lines of `text` (`\r` dropped; a final newline ends the last line, it does not
    /// start one) with the tokens of each line, its newline counted as one.
    pub(super) fn ctx<'a>(&self, language: &'a str, text: &'a str) -> Ctx<'a> {
        let mut lines: Vec<&str> = text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l)).collect();
        // The "line" after a final newline does not exist.
        if lines.len() > 1 && lines.last() == Some(&"") {
            lines.pop();
        }
        let line_tokens = lines.iter().map(|l| (self.count)(l) + 1).collect();
        Ctx { lines, line_tokens, lang: language, src: text.as_bytes() }
    }

    /// Token windows with overlap over the lines `lines` (0-based, inclusive).
    pub(super) fn windows(
        &self,
        ctx: &Ctx,
        lines: RangeInclusive<usize>,
        symbol: Option<String>,
        kind: Option<&str>,
        out: &mut Vec<Chunk>,
    ) {
        let (start, end) = lines.into_inner();
        let max = self.cfg.max_tokens.max(8);
        let mut a = start;
        while a <= end {
            if ctx.line_tokens[a] > max {
                self.long_line(ctx, a, symbol.clone(), kind, out);
                a += 1;
                continue;
            }
            let mut b = a;
            let mut tokens = ctx.line_tokens[a];
            while b < end && ctx.line_tokens[b + 1] <= max && tokens + ctx.line_tokens[b + 1] <= max {
                b += 1;
                tokens += ctx.line_tokens[b];
            }
            self.push(ctx, a..=b, symbol.clone(), kind, out);
            if b >= end {
                break;
            }
            // Next window starts early enough to repeat ~overlap tokens, but always moves on.
            let mut next = b + 1;
            let mut overlap = 0;
            while next > a + 1 && overlap + ctx.line_tokens[next - 1] <= self.cfg.overlap_tokens {
                next -= 1;
                overlap += ctx.line_tokens[next];
            }
            a = next;
        }
    }

    pub(super) fn long_line(
        &self,
        ctx: &Ctx,
        line: usize,
        symbol: Option<String>,
        kind: Option<&str>,
        out: &mut Vec<Chunk>,
    ) {
        let text = ctx.lines[line];
        // Start from ~3 bytes per token and shrink a piece until it fits.
        let max = self.cfg.max_tokens.max(8);
        let mut rest = text;
        while !rest.is_empty() {
            let mut take = (max * 3).min(rest.len());
            loop {
                while !rest.is_char_boundary(take) {
                    take -= 1;
                }
                let piece = &rest[..take];
                let n = (self.count)(piece);
                if n <= max || take <= 16 {
                    if !piece.trim().is_empty() {
                        out.push(make_chunk(piece.to_string(), line, line, symbol.clone(), kind, n));
                    }
                    rest = &rest[take..];
                    break;
                }
                take = take * max / n.max(1) * 9 / 10;
                take = take.max(16).min(rest.len());
            }
        }
    }

    /// One chunk of the lines `lines` (0-based, inclusive), unless they are blank.
    pub(super) fn push(
        &self,
        ctx: &Ctx,
        lines: RangeInclusive<usize>,
        symbol: Option<String>,
        kind: Option<&str>,
        out: &mut Vec<Chunk>,
    ) {
        let (start, end) = (*lines.start(), *lines.end());
        let content = ctx.lines[lines].join("\n");
        if content.trim().is_empty() {
            return;
        }
        let tokens = (self.count)(&content);
        out.push(make_chunk(content, start, end, symbol, kind, tokens));
    }
}
#[cfg(test)]
mod tests {
    use super::{ChunkConfig, LONG_CONTEXT_TOKENS};
    use crate::chunk::testing::chunker;

    #[test]
    fn the_budget_fits_the_models_window() {
        let (same, why) = ChunkConfig::default().fitted_to(256);
        assert_eq!((same.max_tokens, why), (240, None), "MiniLM's window holds the default");
        let (long, why) = ChunkConfig::default().fitted_to(8192);
        assert_eq!(long.max_tokens, LONG_CONTEXT_TOKENS);
        assert!(why.unwrap().contains("8192"));
        let set = ChunkConfig { max_tokens: 300, ..ChunkConfig::default() };
        assert_eq!(set.clone().fitted_to(8192).0.max_tokens, 300, "a budget set in the config stays");
        let (cut, why) = set.fitted_to(128);
        assert_eq!((cut.max_tokens, cut.merge_tokens), (112, 112));
        assert!(cut.overlap_tokens < cut.max_tokens && why.unwrap().contains("cut to 112"));
        assert_eq!(ChunkConfig::default().fitted_to(0).0.max_tokens, 240);
    }

    #[test]
    fn windows_overlap_and_cover_everything() {
        let text: String = (1..=40).map(|i| format!("line {i} has five words\n")).collect();
        let chunks = chunker(25).chunk("text", &text);
        assert!(chunks.len() > 5);
        assert_eq!(chunks.first().unwrap().start_line, 1);
        assert_eq!(chunks.last().unwrap().end_line, 40);
        for pair in chunks.windows(2) {
            assert!(pair[1].start_line <= pair[0].end_line + 1, "gap between windows");
            assert!(pair[1].start_line > pair[0].start_line, "no progress");
        }
        assert!(chunks.iter().all(|c| c.token_count <= 25));
    }

    #[test]
    fn huge_single_line_is_split_and_keeps_its_line() {
        let line = "word ".repeat(5000);
        let chunks = chunker(50).chunk("text", &format!("first\n{line}\nlast"));
        assert!(chunks.len() > 50);
        assert!(chunks.iter().all(|c| c.token_count <= 50));
        assert!(chunks.iter().filter(|c| c.start_line == 2).count() > 50);
    }
}
