//! Context assembly: the chunks that answer a query, packed into a token budget for an LLM.
//!
//! [`Assembler::assemble`]:
//!
//! 1. retrieves candidates with the routed search (default 60, at most `max_per_file × 4`
//!    per file); when the query reads like an issue (a traceback, or a title and a few
//!    sentences), the files `locate` ranks first lift their chunks ([`ctxd_codegraph::locate::prior`])
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

use ctxd_codegraph::graph::cache::GraphCache;
use ctxd_codegraph::locate::prior::FilePrior;
use ctxd_codegraph::locate::Locator;
use ctxd_index::{record::Chunk, record::Hit};
use ctxd_models::tokens::TokenCounter;
use ctxd_search::error::SearchError;
use ctxd_search::search::{Mode, SearchRequest, SearchResponse, SearchResult};
use ctxd_search::searcher::Searcher;

use crate::assembly::{self, Assembly};
use crate::block::{render_blocks, render_heading, render_note, Block, Format};
use crate::compress;
use crate::doc_type::DocType;
use crate::draft::{Draft, Drafts};
use crate::request::{ContextRequest, ContextResponse, ValidContext, SEEN_FILE_FLOOR, SESSION_FLOOR};
use crate::session::{self, AnswerNote, Sessions, Tool};

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

    /// The same assembler locating with the ranking model `model` where a request names none.
    pub fn with_locate_model(mut self, model: ctxd_choice::RankerName) -> Self {
        self.locator = self.locator.with_model(model);
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
        req: &ValidContext,
        mut on_block: impl FnMut(&Block),
    ) -> Result<ContextResponse, SearchError> {
        // A session that was sent some candidates already looks deeper for new ones.
        let seen_before = req.session.as_deref().and_then(|id| self.sessions.usage(id)).map_or(0, |u| u.chunks_sent);
        let found = self.candidates(req, seen_before).await?;
        let candidates = found.results.len();
        let trace_files: Vec<String> =
            ctxd_search::route::stack_trace_frames(&req.query).into_iter().filter_map(|(file, _, _)| file).collect();
        let (assembly, assembly_reason) = req.assembly.resolve(found.intent, !trace_files.is_empty());
        let prior = self.file_prior(req).await;
        let mut ordered: Vec<(f32, &SearchResult)> =
            found.results.iter().map(|r| (r.score * prior.factor(&r.path), r)).collect();
        ordered.sort_by(|a, b| b.0.total_cmp(&a.0));
        // 0. What the session was already sent: cited in one line, not packed again.
        let sent = self.already_sent(req, &mut ordered);

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
            follow_up
                && (score < best * SESSION_FLOOR || (sent.seen_files.contains(path) && score < best * SEEN_FILE_FLOOR))
        };
        // 4. Per-file cap, then 5. greedy packing into the budget.
        let cited_line = sent.cited.as_ref().map(|(line, _)| render_note(line, req.format));
        let mut pack = Packing::new(req, cited_line.as_deref().map_or(0, |l| self.tokens.count(l)));
        // Thematic: room for the headings, taken back when they are written.
        let headings_room =
            if assembly == Assembly::Thematic { (pack.limit / 10).min(16 * assembly::MAX_THEMES) } else { 0 };
        pack.used += headings_room;
        // Hierarchical: the outlines of the best files first, in at most a quarter of the budget.
        let outlined = match assembly {
            Assembly::Hierarchical => self.pack_outlines(req, &kept, &mut pack, &mut on_block).await?,
            _ => HashSet::new(),
        };
        let overflow = self.pack_whole(req, kept, &mut pack, &skeletal_only, &mut on_block);
        // 5b. What did not fit whole: signature skeletons.
        if req.skeletons && !overflow.is_empty() && pack.used < pack.limit {
            self.pack_skeletons(req, &overflow, &outlined, follow_up, &mut pack, &mut on_block).await?;
        }
        // 5c. Room still left: whole blocks of the rest that fit (and no skeleton shows).
        for (block, ids) in overflow {
            let skeletal = pack.chosen.iter().any(|c| {
                c.skeleton && c.path == block.path && c.start_line <= block.start_line && block.end_line <= c.end_line
            });
            if !pack.fits(&block) || skeletal || skeletal_only(&block.path, block.score) {
                continue;
            }
            pack.take(block, ids, &mut on_block);
        }
        // 6. The layout of the assembly: attention order, outlines first, file and line order,
        // or themes under headings.
        pack.used -= headings_room;
        let (themes, headings) = match assembly {
            Assembly::Thematic if pack.chosen.len() > 1 => self.themes(req, &mut pack, &vectors),
            _ => (Vec::new(), Vec::new()),
        };
        let Packing { used, limit, chosen, sent_now, .. } = pack;
        let blocks = assembly::arrange(assembly, chosen, &trace_files, &themes);
        let mut context = render_blocks(&blocks, &headings, req.format);
        if let Some(line) = &cited_line {
            context.push_str(line);
        }
        if let Some(id) = &req.session {
            self.sessions.record(id, Tool::Context, &sent_now, used, sent.repeats);
            let mut note = AnswerNote::new(Tool::Context, &req.query);
            for b in &blocks {
                let list = if b.skeleton { &mut note.skeletons } else { &mut note.whole };
                list.push(b.citation());
            }
            note.cited = sent.cited.as_ref().map(|(_, c)| c.clone()).unwrap_or_default();
            let line = cited_line.as_deref().map_or(0, |l| self.tokens.count(l));
            (note.tokens, note.tokens_saved) = (used, sent.tokens.saturating_sub(line));
            self.sessions.note(id, note);
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
            index: found.index.clone(),
            located: prior.files,
            assembly,
            assembly_reason,
            themes: headings,
            session: req.session.clone(),
            already_sent: sent.cited.map(|(_, c)| c).unwrap_or_default(),
            blocks,
            context,
        })
    }

    /// The routed search's candidates for `req`: deeper for a session that was sent
    /// `seen_before` chunks already, and for a `doc_types` filter (applied here).
    async fn candidates(&self, req: &ContextRequest, seen_before: usize) -> Result<SearchResponse, SearchError> {
        let mut depth = req.candidates + seen_before.min(req.candidates);
        if !req.doc_types.is_empty() {
            // The filter applies to what the search returns: look deeper to make up for it.
            depth *= 3;
        }
        let depth = depth.min(ctxd_search::search::MAX_K);
        let mut search = SearchRequest::new(req.query.clone()).with(depth, req.mode);
        search.as_of = req.as_of.clone();
        search.current_file = req.current_file.clone();
        search.path_prefix = req.path_prefix.clone();
        search.source = req.source.clone();
        search.language = req.language;
        search.scope = req.scope;
        search.max_per_file = Some(req.max_per_file.max(1) * 4);
        let mut found = self.searcher.search(&search.check()?).await?;
        if !req.doc_types.is_empty() {
            found.results.retain(|r| req.doc_types.contains(&DocType::of(&r.path, &r.language)));
            found.results.truncate(req.candidates + seen_before.min(req.candidates));
        }
        Ok(found)
    }

    /// Takes the candidates the request's session was already sent out of `ordered`: their
    /// citation line, the files they are in, and how many they were.
    fn already_sent(&self, req: &ContextRequest, ordered: &mut Vec<(f32, &SearchResult)>) -> AlreadySent {
        let sent = match &req.session {
            Some(id) => {
                let ids: Vec<&str> = ordered.iter().map(|(_, r)| r.chunk_id.as_str()).collect();
                self.sessions.already_sent(id, &ids)
            }
            None => HashMap::new(),
        };
        let was_sent: Vec<&SearchResult> =
            ordered.iter().filter(|(_, r)| sent.contains_key(&r.chunk_id)).map(|(_, r)| *r).collect();
        let cited =
            session::already_sent_line(was_sent.iter().map(|r| (r.path.clone(), r.start_line, r.end_line)).collect());
        // Files the session has seen a block of (among this query's candidates).
        let seen_files: HashSet<String> = was_sent.iter().map(|r| r.path.clone()).collect();
        let repeats = was_sent.len();
        let tokens = was_sent.iter().map(|r| self.tokens.count(&r.content)).sum();
        ordered.retain(|(_, r)| !sent.contains_key(&r.chunk_id));
        AlreadySent { cited, seen_files, repeats, tokens }
    }

    /// Outline blocks of the best files (at most a quarter of the budget): the files outlined.
    async fn pack_outlines(
        &self,
        req: &ContextRequest,
        kept: &[Draft],
        pack: &mut Packing,
        on_block: &mut impl FnMut(&Block),
    ) -> Result<HashSet<String>, SearchError> {
        let mut files: Vec<String> = Vec::new();
        for d in kept {
            if !files.contains(&d.path) && files.len() < assembly::MAX_OUTLINES {
                files.push(d.path.clone());
            }
        }
        let mut outlined = HashSet::new();
        for (mut block, key) in self.outline_blocks(req, &files, (pack.limit / 4).saturating_sub(pack.used)).await? {
            pack.sent_now.push((key, block.citation()));
            outlined.insert(block.path.clone());
            block.relevance_rank = pack.chosen.len();
            pack.used += block.tokens;
            on_block(&block);
            pack.chosen.push(block);
        }
        Ok(outlined)
    }

    /// Whole blocks of the drafts, best first, while they fit in the room for whole blocks (3/4
    /// of the budget with skeletons on) and their file's cap; what does not fit, with its chunk
    /// ids, is returned for skeletons and the room left.
    fn pack_whole(
        &self,
        req: &ContextRequest,
        kept: Vec<Draft>,
        pack: &mut Packing,
        skeletal_only: &impl Fn(&str, f32) -> bool,
        on_block: &mut impl FnMut(&Block),
    ) -> Vec<(Block, Vec<String>)> {
        let terms = compress::query_terms(&req.query);
        // With skeletons on, whole blocks stop at 3/4 of the budget: the rest is for the skeletons
        // of what did not fit, then for whole blocks again if room is left.
        let full_limit = if req.skeletons { pack.limit - pack.limit / 4 } else { pack.limit };
        let mut overflow: Vec<(Block, Vec<String>)> = Vec::new();
        for d in kept {
            if pack.per_file.get(&d.path).copied().unwrap_or(0) >= pack.max_per_file {
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
            let mut block = Block::new(Hit { chunk, score: d.score }, pack.chosen.len());
            block.tokens = self.tokens.count(&block.render(req.format));
            block.highlights = compress::highlights(&d.lines, &terms);
            if pack.used + block.tokens > full_limit || skeletal_only(&block.path, d.score) {
                overflow.push((block, d.ids));
                continue;
            }
            pack.take(block, d.ids, on_block);
        }
        overflow
    }

    /// Signature skeletons of the candidates that did not fit whole (none for a file with an
    /// outline: it shows its signatures already), in the room left — a quarter of the budget at
    /// most in a follow-up.
    async fn pack_skeletons(
        &self,
        req: &ContextRequest,
        overflow: &[(Block, Vec<String>)],
        outlined: &HashSet<String>,
        follow_up: bool,
        pack: &mut Packing,
        on_block: &mut impl FnMut(&Block),
    ) -> Result<(), SearchError> {
        let spans: Vec<(String, u32, u32, f32)> = overflow
            .iter()
            .filter(|(b, _)| !outlined.contains(&b.path))
            .map(|(b, _)| (b.path.clone(), b.start_line, b.end_line, b.score))
            .collect();
        // A follow-up's skeletons are not padding either: a quarter of the budget at most.
        let (limit, used) = (pack.limit, pack.used);
        let room = if follow_up { (limit / 4).min(limit - used) } else { limit - used };
        for (mut block, key) in self.skeleton_blocks(req, &spans, &pack.chosen, room).await? {
            pack.sent_now.push((key, block.citation()));
            // Its vector (for themes): the candidate it summarises.
            let source = overflow.iter().find(|(b, _)| {
                b.path == block.path && b.start_line <= block.end_line && block.start_line <= b.end_line
            });
            if let Some((_, ids)) = source {
                pack.first_ids.insert(block.citation(), ids[0].clone());
            }
            block.relevance_rank = pack.chosen.len();
            pack.used += block.tokens;
            on_block(&block);
            pack.chosen.push(block);
        }
        Ok(())
    }

    /// Thematic assembly: the chosen blocks clustered by their vectors, with a heading per theme
    /// when the headings fit the budget (none otherwise).
    fn themes(
        &self,
        req: &ContextRequest,
        pack: &mut Packing,
        vectors: &HashMap<String, Vec<f32>>,
    ) -> (Vec<usize>, Vec<String>) {
        let vecs: Vec<Option<&[f32]>> = pack
            .chosen
            .iter()
            .map(|b| pack.first_ids.get(&b.citation()).and_then(|id| vectors.get(id)).map(|v| v.as_slice()))
            .collect();
        let paths: Vec<&str> = pack.chosen.iter().map(|b| b.path.as_str()).collect();
        let themes = assembly::cluster(&vecs, &paths);
        let headings = assembly::headings(&pack.chosen, &themes);
        let close = if req.format == Format::Xml { self.tokens.count("</theme>\n") } else { 0 };
        let cost: usize = headings.iter().map(|h| self.tokens.count(&render_heading(h, req.format)) + close).sum();
        if pack.used + cost <= pack.limit {
            pack.used += cost;
            (themes, headings)
        } else {
            (Vec::new(), Vec::new())
        }
    }
}

/// What a request's session was already sent among the candidates.
struct AlreadySent {
    /// The one-line citation of those chunks and the citations themselves.
    cited: Option<(String, Vec<String>)>,
    /// The files they are in.
    seen_files: HashSet<String>,
    /// How many candidates were left out for it.
    repeats: usize,
    /// Their tokens (what repeating them would have cost).
    tokens: usize,
}

/// What is packed so far: the blocks chosen (in relevance order), the tokens they take of the
/// budget, blocks per file, what the session will record as sent, and the first chunk of each
/// block (thematic assembly clusters their vectors).
struct Packing {
    limit: usize,
    max_per_file: usize,
    used: usize,
    chosen: Vec<Block>,
    per_file: HashMap<String, usize>,
    sent_now: Vec<(String, String)>,
    first_ids: HashMap<String, String>,
}

impl Packing {
    fn new(req: &ContextRequest, used: usize) -> Self {
        Packing {
            limit: req.budget - req.reserve,
            max_per_file: req.max_per_file.max(1),
            used,
            chosen: Vec::new(),
            per_file: HashMap::new(),
            sent_now: Vec::new(),
            first_ids: HashMap::new(),
        }
    }

    /// Whether `block` fits the budget and its file's cap.
    fn fits(&self, block: &Block) -> bool {
        self.used + block.tokens <= self.limit
            && self.per_file.get(&block.path).copied().unwrap_or(0) < self.max_per_file
    }

    /// Takes `block` (made of the chunks `ids`) as the next most relevant one.
    fn take(&mut self, mut block: Block, ids: Vec<String>, on_block: &mut impl FnMut(&Block)) {
        self.used += block.tokens;
        *self.per_file.entry(block.path.clone()).or_default() += 1;
        block.relevance_rank = self.chosen.len();
        self.first_ids.insert(block.citation(), ids[0].clone());
        self.sent_now.extend(ids.into_iter().map(|id| (id, block.citation())));
        on_block(&block);
        self.chosen.push(block);
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
