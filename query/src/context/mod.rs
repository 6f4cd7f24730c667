//! Context assembly: the chunks that answer a query, packed into a token budget for an LLM.
//!
//! [`Assembler::assemble`]:
//!
//! 1. retrieves candidates with the routed search (default 60, at most `max_per_file × 4`
//!    per file); when the query reads like an issue (a traceback, or a title and a few
//!    sentences), the files `locate` ranks first lift their chunks ([`crate::locate::prior`])
//!    and the answer lists them as `located`;
//! 2. drops **exact duplicates** (same text, e.g. a vendored copy of a file);
//! 3. **merges** chunks of the same file whose line ranges overlap or touch into one block
//!    (token windows overlap by design; the merged block keeps the best score);
//! 4. drops **near-duplicates**: a block whose embedding has cosine ≥ 0.9 (configurable) with a
//!    more relevant block already kept (steps 2–4: [`draft`]);
//! 5. keeps at most `max_per_file` blocks per file;
//! 6. packs blocks by relevance into `budget − reserve` tokens, counted by the index's
//!    tokenizer on the rendered block (citation header included), skipping blocks that no
//!    longer fit and trying the next ones;
//!    with `skeletons` on (the default) whole blocks stop at 3/4 of it, the candidates that did
//!    not fit are sent as **signature skeletons** (definition lines, doc lines, member
//!    signatures) and what room is left takes whole blocks again; full blocks carry
//!    **highlights**, the line ranges holding the query's words ([`compress`]);
//! 7. orders the chosen blocks for long-context attention: the most relevant first, the
//!    second most relevant last, and so on inwards (Liu et al., "Lost in the middle").
//!
//! In a `session`, candidates the session was already sent are left out before step 2 and
//! cited in one line (`already sent: path:start-end, …`, its tokens counted), the search looks
//! deeper to make up for them, after its first answer new candidates scoring below
//! [`SESSION_FLOOR`] of the best one come only as skeletons (no padding: a follow-up whose
//! answer was mostly sent stays short), and the chunks packed are remembered
//! ([`crate::session`]).
//!
//! Every block is cited `path:start-end` with its symbol. The response reports tokens used,
//! budget utilisation and the share of candidates dropped as duplicates.

use std::collections::{HashMap, HashSet};

use ctxd_index::{Chunk, Hit, Language};
use ctxd_models::TokenCounter;
use serde::{Deserialize, Serialize};

mod assembly;
mod block;
mod compress;
mod draft;

pub use assembly::{attention_order, Assembly};
use block::{render_blocks, render_heading, render_note};
pub use block::{Block, Format};
pub use compress::one_line;
pub use draft::indexed_lines;
use draft::Drafts;

use crate::doc_type::DocType;
use crate::graph::GraphCache;
use crate::locate::{FilePrior, Locator};
use crate::route::{Intent, Route};
use crate::search::{Mode, Scope, SearchRequest, SearchResult};
use crate::searcher::Searcher;
use crate::session::{self, Sessions, Tool};
use crate::SearchError;

/// In a session's follow-ups, candidates scoring below this share of the best candidate are
/// sent as skeletons only.
pub const SESSION_FLOOR: f32 = 0.7;
/// In a session's follow-ups, new blocks of a file the session has seen come whole only above
/// this share of the best candidate (skeletons otherwise: the file is known, its other parts
/// are a `get_symbols` away).
pub const SEEN_FILE_FLOOR: f32 = 0.9;

/// Largest budget accepted, in tokens.
pub const MAX_BUDGET: usize = 1_000_000;

fn default_candidates() -> usize {
    60
}
fn default_per_file() -> usize {
    3
}
fn default_near_dup() -> f32 {
    0.9
}

/// The body of `POST /v1/context`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextRequest {
    pub query: String,
    /// Tokens available for the context.
    pub budget: usize,
    /// Tokens of the budget kept free (for the question, the answer, …).
    #[serde(default)]
    pub reserve: usize,
    #[serde(default)]
    pub format: Format,
    /// Candidates retrieved before deduplication and packing.
    #[serde(default = "default_candidates")]
    pub candidates: usize,
    /// Blocks per file at most.
    #[serde(default = "default_per_file")]
    pub max_per_file: usize,
    /// Cosine similarity at or above which a less relevant block is dropped.
    #[serde(default = "default_near_dup")]
    pub near_duplicate: f32,
    #[serde(default)]
    pub mode: Mode,
    #[serde(default)]
    pub as_of: Option<String>,
    #[serde(default)]
    pub current_file: Option<String>,
    #[serde(default)]
    pub path_prefix: Option<String>,
    /// Only these named sources (see [`crate::sources`]).
    #[serde(default, deserialize_with = "crate::sources::de_sources")]
    pub source: Option<ctxd_index::SourceScope>,
    /// A git source's branch, tag or commit to read (default: each git source's first ref).
    #[serde(default, rename = "ref")]
    pub git_ref: Option<String>,
    #[serde(default)]
    pub language: Option<Language>,
    #[serde(default)]
    pub scope: Option<Scope>,
    /// The caller's session: what it was already sent is cited in one line, not repeated.
    #[serde(default)]
    pub session: Option<String>,
    /// Candidates that do not fit whole are sent as signature skeletons in the room left
    /// (`false`: dropped, as before).
    #[serde(default = "yes")]
    pub skeletons: bool,
    /// How the blocks are laid out; `auto` (the default) picks by the query's intent.
    #[serde(default)]
    pub assembly: Assembly,
    /// Only chunks of files of these types (`code`, `docs`, `config`, `tests`); all when empty.
    #[serde(default)]
    pub doc_types: Vec<DocType>,
}

fn yes() -> bool {
    true
}

impl ContextRequest {
    /// A request with defaults.
    pub fn new(query: impl Into<String>, budget: usize) -> Self {
        Self {
            query: query.into(),
            budget,
            reserve: 0,
            format: Format::default(),
            candidates: default_candidates(),
            max_per_file: default_per_file(),
            near_duplicate: default_near_dup(),
            mode: Mode::default(),
            as_of: None,
            current_file: None,
            path_prefix: None,
            source: None,
            git_ref: None,
            language: None,
            scope: None,
            session: None,
            skeletons: true,
            assembly: Assembly::default(),
            doc_types: Vec::new(),
        }
    }
}

/// The assembled context.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ContextResponse {
    /// In attention order (most relevant first and last).
    pub blocks: Vec<Block>,
    pub tokens_used: usize,
    pub budget: usize,
    pub reserve: usize,
    /// `tokens_used / (budget − reserve)`.
    pub utilization: f64,
    /// Candidates retrieved.
    pub candidates: usize,
    /// Share of candidates dropped as exact or near duplicates (merged overlaps not counted).
    pub dedup_rate: f64,
    pub exact_duplicates: usize,
    pub near_duplicates: usize,
    /// Candidates merged into a neighbouring block of the same file.
    pub merged: usize,
    pub route: Option<Route>,
    pub intent: Option<Intent>,
    /// The session the answer was given in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Candidates the session was already sent, cited (`path:start-end`) instead of repeated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub already_sent: Vec<String>,
    /// The files localization ranked first for an issue-like query (their chunks were lifted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub located: Vec<String>,
    /// The assembly used (for `auto`, the one it picked).
    pub assembly: Assembly,
    /// Why `auto` picked it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assembly_reason: Option<String>,
    /// Thematic assembly: each theme's heading (blocks carry their theme's index).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub themes: Vec<String>,
    /// The blocks rendered in `format`, concatenated.
    pub context: String,
}

/// Packs retrieval results into a token budget.
#[derive(Clone)]
pub struct Assembler {
    searcher: Searcher,
    tokens: TokenCounter,
    locator: Locator,
    sessions: Sessions,
}

impl Assembler {
    /// An assembler searching with `searcher` and counting with `tokens`.
    pub fn new(searcher: Searcher, tokens: TokenCounter) -> Self {
        let locator = Locator::new(searcher.retriever().clone(), GraphCache::default());
        Self { searcher, tokens, locator, sessions: Sessions::default() }
    }

    /// The same assembler keeping its sessions in `sessions` (bounds from the configuration).
    pub fn with_sessions(mut self, sessions: Sessions) -> Self {
        self.sessions = sessions;
        self
    }

    /// The sessions this assembler remembers.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// The localization of this assembler's index (its graph cache is shared with whoever
    /// clones it: the graph tools of the same server).
    pub fn locator(&self) -> &Locator {
        &self.locator
    }

    /// The token counter budgets are measured with.
    pub fn tokens(&self) -> &TokenCounter {
        &self.tokens
    }

    /// The searcher used.
    pub fn searcher(&self) -> &Searcher {
        &self.searcher
    }

    /// Checks a request.
    pub fn validate(req: &ContextRequest) -> Result<(), SearchError> {
        if req.budget == 0 || req.budget > MAX_BUDGET {
            return Err(SearchError::BadRequest(format!("budget must be between 1 and {MAX_BUDGET} tokens")));
        }
        if req.reserve >= req.budget {
            return Err(SearchError::BadRequest(format!(
                "reserve ({}) must be below the budget ({})",
                req.reserve, req.budget
            )));
        }
        if req.candidates == 0 || req.candidates > crate::search::MAX_K {
            return Err(SearchError::BadK { got: req.candidates, max: crate::search::MAX_K });
        }
        if let Some(id) = &req.session {
            session::validate_id(id)?;
        }
        Ok(())
    }

    /// The localization prior of an issue-like routed query (empty otherwise, and when
    /// localization fails: the context is then assembled as for any query, and the failure logged).
    async fn file_prior(&self, req: &ContextRequest) -> FilePrior {
        if req.mode != Mode::Routed {
            return FilePrior::default();
        }
        match self.locator.file_prior(&req.query, req.as_of.as_deref()).await {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(error = %e, "context: localization of an issue-like query failed; assembling without it");
                FilePrior::default()
            }
        }
    }

    /// Assembles a context; `on_block` sees each block as it is chosen (in relevance order),
    /// for streaming.
    pub async fn assemble(
        &self,
        req: &ContextRequest,
        mut on_block: impl FnMut(&Block),
    ) -> Result<ContextResponse, SearchError> {
        Self::validate(req)?;
        // A session that was sent some candidates already looks deeper for new ones.
        let seen_before = req.session.as_deref().and_then(|id| self.sessions.usage(id)).map_or(0, |u| u.chunks_sent);
        let mut depth = req.candidates + seen_before.min(req.candidates);
        if !req.doc_types.is_empty() {
            // The filter applies to what the search returns: look deeper to make up for it.
            depth *= 3;
        }
        let depth = depth.min(crate::search::MAX_K);
        let mut search = SearchRequest::new(req.query.clone()).with(depth, req.mode);
        search.as_of = req.as_of.clone();
        search.current_file = req.current_file.clone();
        search.path_prefix = req.path_prefix.clone();
        search.source = req.source.clone();
        search.language = req.language;
        search.scope = req.scope;
        search.max_per_file = Some(req.max_per_file.max(1) * 4);
        let mut found = self.searcher.search(&search).await?;
        if !req.doc_types.is_empty() {
            found.results.retain(|r| req.doc_types.contains(&DocType::of(&r.path, &r.language)));
            found.results.truncate(req.candidates + seen_before.min(req.candidates));
        }
        let candidates = found.results.len();
        let trace_files: Vec<String> =
            crate::route::stack_trace_frames(&req.query).into_iter().filter_map(|(file, _, _)| file).collect();
        let (assembly, assembly_reason) = req.assembly.resolve(found.intent, !trace_files.is_empty());
        let prior = self.file_prior(req).await;
        let mut ordered: Vec<(f32, &SearchResult)> =
            found.results.iter().map(|r| (r.score * prior.factor(&r.path), r)).collect();
        ordered.sort_by(|a, b| b.0.total_cmp(&a.0));
        // 0. What the session was already sent: cited in one line, not packed again.
        let sent = match &req.session {
            Some(id) => {
                let ids: Vec<&str> = ordered.iter().map(|(_, r)| r.chunk_id.as_str()).collect();
                self.sessions.already_sent(id, &ids)
            }
            None => HashMap::new(),
        };
        let repeats = ordered.iter().filter(|(_, r)| sent.contains_key(&r.chunk_id)).count();
        let cited = session::already_sent_line(
            ordered
                .iter()
                .filter(|(_, r)| sent.contains_key(&r.chunk_id))
                .map(|(_, r)| (r.path.clone(), r.start_line, r.end_line))
                .collect(),
        );
        // Files the session has seen a block of (among this query's candidates).
        let seen_files: HashSet<String> =
            ordered.iter().filter(|(_, r)| sent.contains_key(&r.chunk_id)).map(|(_, r)| r.path.clone()).collect();
        ordered.retain(|(_, r)| !sent.contains_key(&r.chunk_id));

        // 1.–3. Exact duplicates, merges, near-duplicates.
        let index = self.searcher.index();
        let Drafts { kept, vectors, exact_duplicates, merged, near_duplicates } =
            Drafts::of(ordered, &index, req.near_duplicate).await;
        // In a session that was sent something before, the budget is not padded: new candidates
        // far below the best one (sent or not) do not come whole — only as skeletons — so a
        // follow-up whose answer was mostly sent stays short. (A session's first answer is the
        // answer without a session.)
        // Likewise the rest of a file the session has seen comes whole only when it is close to the
        // best ([`SEEN_FILE_FLOOR`]).
        let best = found.results.iter().map(|r| r.score * prior.factor(&r.path)).fold(0.0f32, f32::max);
        let follow_up = req.session.is_some() && seen_before > 0;
        let skeletal_only = |path: &str, score: f32| {
            follow_up && (score < best * SESSION_FLOOR || (seen_files.contains(path) && score < best * SEEN_FILE_FLOOR))
        };
        // 4. Per-file cap, then 5. greedy packing into the budget.
        let limit = req.budget - req.reserve;
        let mut per_file: HashMap<String, usize> = HashMap::new();
        let mut chosen: Vec<Block> = Vec::new();
        let cited_line = cited.as_ref().map(|(line, _)| render_note(line, req.format));
        let mut used = cited_line.as_deref().map_or(0, |l| self.tokens.count(l));
        let mut sent_now: Vec<(String, String)> = Vec::new();
        // Thematic: room for the headings, taken back when they are written.
        let headings_room =
            if assembly == Assembly::Thematic { (limit / 10).min(16 * assembly::MAX_THEMES) } else { 0 };
        used += headings_room;
        // Hierarchical: the outlines of the best files first, in at most a quarter of the budget.
        let mut outlined: HashSet<String> = HashSet::new();
        if assembly == Assembly::Hierarchical {
            let mut files: Vec<String> = Vec::new();
            for d in &kept {
                if !files.contains(&d.path) && files.len() < assembly::MAX_OUTLINES {
                    files.push(d.path.clone());
                }
            }
            for (mut block, key) in self.outline_blocks(req, &files, (limit / 4).saturating_sub(used)).await? {
                sent_now.push((key, block.citation()));
                outlined.insert(block.path.clone());
                block.relevance_rank = chosen.len();
                used += block.tokens;
                on_block(&block);
                chosen.push(block);
            }
        }
        let terms = compress::query_terms(&req.query);
        // With skeletons on, whole blocks stop at 3/4 of the budget: the rest is for the skeletons
        // of what did not fit, then for whole blocks again if room is left.
        let full_limit = if req.skeletons { limit - limit / 4 } else { limit };
        let mut overflow: Vec<(Block, Vec<String>)> = Vec::new();
        // The first chunk of each chosen block (thematic assembly clusters their vectors).
        let mut first_ids: HashMap<String, String> = HashMap::new();
        for d in kept {
            let n = per_file.entry(d.path.clone()).or_default();
            if *n >= req.max_per_file.max(1) {
                continue;
            }
            let (start_line, end_line) = (d.start(), d.end());
            let content = d.lines.values().cloned().collect::<Vec<_>>().join("\n");
            let chunk = Chunk {
                start_line,
                end_line,
                path: d.path,
                symbol: d.symbol,
                language: d.language,
                content,
                ..Chunk::default()
            };
            let mut block = Block::new(Hit { chunk, score: d.score }, chosen.len());
            block.tokens = self.tokens.count(&block.render(req.format));
            block.highlights = compress::highlights(&d.lines, &terms);
            if used + block.tokens > full_limit || skeletal_only(&block.path, d.score) {
                overflow.push((block, d.ids));
                continue;
            }
            used += block.tokens;
            *n += 1;
            first_ids.insert(block.citation(), d.ids[0].clone());
            sent_now.extend(d.ids.into_iter().map(|id| (id, block.citation())));
            on_block(&block);
            chosen.push(block);
        }
        // 5b. What did not fit whole: signature skeletons.
        if req.skeletons && !overflow.is_empty() && used < limit {
            // (A file with an outline shows its signatures already.)
            let spans: Vec<(String, u32, u32, f32)> = overflow
                .iter()
                .filter(|(b, _)| !outlined.contains(&b.path))
                .map(|(b, _)| (b.path.clone(), b.start_line, b.end_line, b.score))
                .collect();
            // A follow-up's skeletons are not padding either: a quarter of the budget at most.
            let room = if follow_up { (limit / 4).min(limit - used) } else { limit - used };
            for (mut block, key) in self.skeleton_blocks(req, &spans, &chosen, room).await? {
                sent_now.push((key, block.citation()));
                // Its vector (for themes): the candidate it summarises.
                let source = overflow.iter().find(|(b, _)| {
                    b.path == block.path && b.start_line <= block.end_line && block.start_line <= b.end_line
                });
                if let Some((_, ids)) = source {
                    first_ids.insert(block.citation(), ids[0].clone());
                }
                block.relevance_rank = chosen.len();
                used += block.tokens;
                on_block(&block);
                chosen.push(block);
            }
        }
        // 5c. Room still left: whole blocks of the rest that fit (and no skeleton shows).
        for (mut block, ids) in overflow {
            let n = per_file.entry(block.path.clone()).or_default();
            let skeletal = chosen.iter().any(|c| {
                c.skeleton && c.path == block.path && c.start_line <= block.start_line && block.end_line <= c.end_line
            });
            if used + block.tokens > limit
                || *n >= req.max_per_file.max(1)
                || skeletal
                || skeletal_only(&block.path, block.score)
            {
                continue;
            }
            used += block.tokens;
            *n += 1;
            block.relevance_rank = chosen.len();
            first_ids.insert(block.citation(), ids[0].clone());
            sent_now.extend(ids.into_iter().map(|id| (id, block.citation())));
            on_block(&block);
            chosen.push(block);
        }
        // 6. The layout of the assembly: attention order, outlines first, file and line order,
        // or themes under headings.
        used -= headings_room;
        let (mut themes, mut headings) = (Vec::new(), Vec::new());
        if assembly == Assembly::Thematic && chosen.len() > 1 {
            let vecs: Vec<Option<&[f32]>> = chosen
                .iter()
                .map(|b| first_ids.get(&b.citation()).and_then(|id| vectors.get(id)).map(|v| v.as_slice()))
                .collect();
            let paths: Vec<&str> = chosen.iter().map(|b| b.path.as_str()).collect();
            themes = assembly::cluster(&vecs, &paths);
            headings = assembly::headings(&chosen, &themes);
            let close = if req.format == Format::Xml { self.tokens.count("</theme>\n") } else { 0 };
            let cost: usize = headings.iter().map(|h| self.tokens.count(&render_heading(h, req.format)) + close).sum();
            if used + cost <= limit {
                used += cost;
            } else {
                (themes, headings) = (Vec::new(), Vec::new());
            }
        }
        let blocks = assembly::arrange(assembly, chosen, &trace_files, &themes);
        let mut context = render_blocks(&blocks, &headings, req.format);
        if let Some(line) = &cited_line {
            context.push_str(line);
        }
        if let Some(id) = &req.session {
            self.sessions.record(id, Tool::Context, &sent_now, used, repeats);
        }
        let context = match req.format {
            Format::Xml => format!("<context>\n{context}</context>\n"),
            _ => context,
        };
        Ok(ContextResponse {
            tokens_used: used,
            budget: req.budget,
            reserve: req.reserve,
            utilization: used as f64 / limit.max(1) as f64,
            candidates,
            dedup_rate: if candidates == 0 {
                0.0
            } else {
                (exact_duplicates + near_duplicates) as f64 / candidates as f64
            },
            exact_duplicates,
            near_duplicates,
            merged,
            route: found.route,
            intent: found.intent,
            located: prior.files,
            assembly,
            assembly_reason,
            themes: headings,
            session: req.session.clone(),
            already_sent: cited.map(|(_, c)| c).unwrap_or_default(),
            blocks,
            context,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendering_cites_every_block() {
        let chunk = Chunk {
            path: "src/a.rs".into(),
            start_line: 3,
            end_line: 9,
            symbol: Some("A::b".into()),
            language: "rust".into(),
            content: "fn b() {}".into(),
            ..Chunk::default()
        };
        let b = Block::new(Hit { chunk, score: 1.0 }, 0);
        assert!(b.render(Format::Xml).starts_with("<block source=\"src/a.rs:3-9\" symbol=\"A::b\">"));
        assert!(b.render(Format::Markdown).starts_with("### src/a.rs:3-9 (A::b)\n```rust\n"));
        assert!(b.render(Format::Plain).starts_with("--- src/a.rs:3-9 A::b\n"));
        assert_eq!("md".parse::<Format>().unwrap(), Format::Markdown);
    }
}
