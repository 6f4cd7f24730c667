//! Late-interaction rescoring of a routed search's best candidates.
//!
//! The first stage ranks chunks by one pooled vector per chunk (plus BM25 and symbols): a
//! chunk's meaning squeezed into 384 numbers, compared with the query's. The second stage
//! looks closer at the few best candidates: the model's **token embeddings** of the query and
//! of each candidate (the same text the candidate was indexed with), and for every query token
//! its best match among the candidate's tokens, averaged — ColBERT's *MaxSim*, here computed
//! with the sentence model itself, so no second model is needed. A query word that the chunk
//! answers somewhere in its body counts even when the pooled vector is dominated by the rest.
//!
//! The final score of a candidate is the mean of its first-stage score and its MaxSim score,
//! each min-max normalised over the candidates (so neither scale dominates); candidates stay
//! ahead of everything past the rescoring depth. Cost: one forward pass over the candidates'
//! texts per query (≈ 30 chunks), so it is used for routed searches and context assembly, not
//! for completion context (its lean queries skip it). The candidates' token embeddings are
//! kept (8-bit, [`TOKEN_CACHE_ENTRIES`] chunks) by the text encoded, so a repeated or
//! overlapping query encodes only what it has not seen; and each (query, candidate text)
//! MaxSim score is kept ([`SCORE_CACHE_ENTRIES`] pairs, 16 bytes of key each), so a question
//! asked again — after a commit emptied the answer cache ([`crate::answers`]), say — whose
//! candidates are all scored already needs no forward pass at all. Both are keyed by the exact
//! texts, so they hold across index versions and give the scores a fresh encoding would.
//!
//! **Stored codes first.** Where the index holds a candidate's token states from indexing time
//! (the `late` column: [`ctxd_models::late`], 8-bit by default), its MaxSim
//! is computed from them against the query's token states, and the model encodes only the query
//! (or nothing, when the routed search's one pass over the query already gave its token states:
//! [`RerankCache::remember_query`]). Candidates without codes — an index written before the
//! column, codes turned off, a row in an overlay view whose key differs — are encoded
//! as before, in the same request as the query; both kinds of score mix freely (the codes' scores
//! differ from the model's by less than the tests' tolerance).
//!
//! Measured on the shared CoSQA dev set (see BENCHMARKS.md): rescoring the best 30 lifts routed
//! nDCG@10 above the best single signal, where fusing BM25 into the vector signal could not.
//!
//! **A cross-encoder instead** (`[rerank] model`, [`Rescorer::CrossEncoder`]): the second score
//! is the cross-encoder's relevance of each (query, candidate text) pair
//! ([`ctxd_models::cross`]), from its own model thread; the same depth, the same shedding under
//! load, the same kept scores (keyed apart by model), the same combination with the first stage.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use ctxd_index::{record::Hit, store::Index};
use ctxd_models::{chunk_text, late::LateCodec, service::EmbedService};

use crate::bounded::Bounded;
use crate::error::SearchError;

/// What rescores a routed search's best candidates.
#[derive(Clone, Copy)]
pub(crate) enum Rescorer<'a> {
    /// The sentence model's token states, by MaxSim (the default): the codes stored in the
    /// index where it has them, the model's encoding of the rest.
    LateInteraction(&'a EmbedService, Option<&'a Index>),
    /// A cross-encoder's score of each (query, candidate) pair (`[rerank] model`).
    CrossEncoder(&'a EmbedService),
}

impl Rescorer<'_> {
    /// The key of `query`'s kept scores: a cross-encoder's are kept apart from MaxSim's, by model.
    fn query_key(&self, query: &str) -> u64 {
        match self {
            Self::LateInteraction(..) => text_key(query),
            Self::CrossEncoder(c) => text_key(&format!("{}\u{1F}{query}", c.model_id())),
        }
    }

    /// Whether the candidates are scored from the codes their index stores (no model call per
    /// candidate; one stored without codes is still encoded).
    fn reads_stored_codes(&self, cache: &RerankCache) -> bool {
        matches!(self, Self::LateInteraction(embed, Some(index)) if index.has_late() && cache.codec(embed).is_some())
    }
}

/// Candidates rescored per query by default (the daemon's `[server] rerank_depth`).
pub const RERANK_DEPTH: usize = 30;

/// Queries whose token states are kept (~15 KB each for a 10-token query).
pub const QUERY_TOKEN_ENTRIES: usize = 1024;

/// Chunks whose token embeddings are kept (8 bits per value: ~40 KB for a 100-token chunk,
/// so ~20–50 MB in all). An agent asking the same question twice (search, then context)
/// re-encodes only the query.
pub const TOKEN_CACHE_ENTRIES: usize = 512;

/// (query, candidate text) MaxSim scores kept: ~4 MB, the candidates of a few thousand
/// questions (a routed search rescores at most [`RERANK_DEPTH`]).
pub const SCORE_CACHE_ENTRIES: usize = 65_536;

/// What rescoring keeps of its work, by hashes of the exact texts encoded: valid across
/// versions and snapshots, and replaced with the model on a switch (the router keeps one per
/// (index, model) pair).
pub(crate) struct RerankCache {
    /// Token embeddings of recently rescored chunk texts.
    tokens: Mutex<Bounded<u64, Arc<QuantRows>>>,
    /// MaxSim scores by (query text, chunk text).
    scores: Mutex<Bounded<(u64, u64), f32>>,
    /// Token states of recent queries, by query text (from the routed search's one pass).
    queries: Mutex<Bounded<u64, Arc<Vec<f32>>>>,
    /// The codec the model's codes are stored with, looked up once (`None`: codes are off).
    codec: OnceLock<Option<LateCodec>>,
}

impl Default for RerankCache {
    fn default() -> Self {
        Self {
            tokens: Mutex::new(Bounded::new(TOKEN_CACHE_ENTRIES)),
            scores: Mutex::new(Bounded::new(SCORE_CACHE_ENTRIES)),
            queries: Mutex::new(Bounded::new(QUERY_TOKEN_ENTRIES)),
            codec: OnceLock::new(),
        }
    }
}

/// Unit token rows at 8 bits: each row scaled so its largest value is ±127.
#[derive(Debug)]
pub(crate) struct QuantRows {
    scales: Vec<f32>,
    data: Vec<i8>,
}

fn quantize(rows: &[f32], dim: usize) -> QuantRows {
    let (scales, data) = ctxd_models::late::quantize_rows(rows, dim);
    QuantRows { scales, data }
}

/// [`ctxd_models::embedder::max_sim`] against 8-bit document rows.
fn max_sim_q(query: &[f32], doc: &QuantRows, dim: usize) -> f32 {
    if doc.scales.is_empty() || dim == 0 {
        return 0.0;
    }
    ctxd_models::embedder::max_sim_by(query, dim, |q| {
        doc.data
            .chunks_exact(dim)
            .zip(&doc.scales)
            .map(|(d, s)| q.iter().zip(d).map(|(a, &b)| a * f32::from(b)).sum::<f32>() * s)
            .fold(f32::MIN, f32::max)
    })
}

fn text_key(text: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl RerankCache {
    /// Keeps `query`'s token states (a routed search encoded its vector and them in one pass).
    pub(crate) fn remember_query(&self, query: &str, rows: Vec<f32>) {
        lock(&self.queries).put(text_key(query), Arc::new(rows));
    }

    /// Whether `query`'s token states are kept.
    pub(crate) fn knows_query(&self, query: &str) -> bool {
        lock(&self.queries).get(&text_key(query)).is_some()
    }

    /// The codec `embed`'s model stores its codes with ([`LateCodec::for_model`]).
    fn codec(&self, embed: &EmbedService) -> Option<&LateCodec> {
        self.codec.get_or_init(|| LateCodec::for_model(embed.model_id(), embed.dim(), embed.punctuation())).as_ref()
    }

    /// True when the MaxSim score of every one of `candidates` against the query `query_key`
    /// is kept: their rescoring needs no forward pass.
    fn scored_all(&self, query_key: u64, candidates: &Texts) -> bool {
        let kept = lock(&self.scores);
        candidates.keys.iter().all(|&k| kept.get(&(query_key, k)).is_some())
    }
}

/// Candidates as rescoring sees them: the texts they were indexed with (what their token
/// embeddings are computed from) and those texts' cache keys, built once per search.
struct Texts {
    texts: Vec<String>,
    keys: Vec<u64>,
}

impl Texts {
    fn of(candidates: &[&Hit]) -> Self {
        let texts: Vec<String> =
            candidates.iter().map(|h| chunk_text(&h.path, h.symbol.as_deref(), &h.content)).collect();
        let keys = texts.iter().map(|t| text_key(t)).collect();
        Self { texts, keys }
    }

    fn truncate(&mut self, n: usize) {
        self.texts.truncate(n);
        self.keys.truncate(n);
    }
}

/// Second-stage scores of `candidates` (one each, in order) against `query`: the kept ones, and
/// for the rest one request to the rescorer's model thread (none when every score is kept) —
/// [`late_interaction`]'s forward pass or the cross-encoder's pair scores.
async fn second_stage(
    rescorer: Rescorer<'_>,
    cache: &RerankCache,
    query_key: u64,
    query: &str,
    candidates: &Texts,
) -> Result<Vec<f32>, SearchError> {
    let Texts { texts, keys } = candidates;
    let mut scores: Vec<Option<f32>> = {
        let kept = lock(&cache.scores);
        keys.iter().map(|&k| kept.get(&(query_key, k)).copied()).collect()
    };
    let unscored: Vec<usize> = (0..scores.len()).filter(|&i| scores[i].is_none()).collect();
    if !unscored.is_empty() {
        let fresh = match rescorer {
            Rescorer::LateInteraction(embed, index) => {
                late_interaction(embed, index, cache, query, candidates, &unscored).await?
            }
            Rescorer::CrossEncoder(cross) => {
                metrics::counter!(crate::metrics::RERANK_CACHE_MISSES_TOTAL).increment(unscored.len() as u64);
                let docs: Vec<String> = unscored.iter().map(|&i| texts[i].clone()).collect();
                cross.score_pairs(query, &docs).await?
            }
        };
        if fresh.len() != unscored.len() {
            let count = ctxd_models::error::ModelError::Count { expected: unscored.len(), got: fresh.len() };
            return Err(SearchError::Embed(count));
        }
        let mut kept = lock(&cache.scores);
        for (&i, score) in unscored.iter().zip(fresh) {
            kept.put((query_key, keys[i]), score);
            scores[i] = Some(score);
        }
    }
    metrics::counter!(crate::metrics::RERANK_CACHE_HITS_TOTAL).increment((scores.len() - unscored.len()) as u64);
    Ok(scores.into_iter().map(|s| s.unwrap_or(0.0)).collect())
}

/// MaxSim scores of the candidates at `unscored` against `query`: from the codes stored in
/// `index` where its model's codec wrote them, else from their token rows kept in `cache` or
/// encoded in one forward pass with the query (the query alone, or nothing when its token
/// states are kept, when every candidate is covered).
async fn late_interaction(
    embed: &EmbedService,
    index: Option<&Index>,
    cache: &RerankCache,
    query: &str,
    candidates: &Texts,
    unscored: &[usize],
) -> Result<Vec<f32>, SearchError> {
    let Texts { texts, keys } = candidates;
    let codec = cache.codec(embed);
    let stored = stored_codes(embed, index, codec, texts, unscored).await;
    let mut docs: Vec<Option<Arc<QuantRows>>> = {
        let kept = lock(&cache.tokens);
        unscored.iter().map(|&i| if stored.contains_key(&i) { None } else { kept.get(&keys[i]).cloned() }).collect()
    };
    let missing: Vec<usize> =
        (0..docs.len()).filter(|&j| docs[j].is_none() && !stored.contains_key(&unscored[j])).collect();
    metrics::counter!(crate::metrics::RERANK_STORED_TOTAL).increment(stored.len() as u64);
    metrics::counter!(crate::metrics::RERANK_CACHE_HITS_TOTAL)
        .increment((docs.len() - missing.len() - stored.len()) as u64);
    metrics::counter!(crate::metrics::RERANK_CACHE_MISSES_TOTAL).increment(missing.len() as u64);
    let kept_query = lock(&cache.queries).get(&text_key(query)).cloned();
    let mut batch = Vec::with_capacity(missing.len() + 1);
    if kept_query.is_none() {
        metrics::counter!(crate::metrics::QUERY_ENCODINGS_TOTAL).increment(1);
        batch.push(query.to_string());
    }
    batch.extend(missing.iter().map(|&j| texts[unscored[j]].clone()));
    let mut tokens = if batch.is_empty() { Vec::new() } else { embed.embed_tokens(batch).await? };
    let expected = missing.len() + usize::from(kept_query.is_none());
    if tokens.len() != expected {
        let count = ctxd_models::error::ModelError::Count { expected, got: tokens.len() };
        return Err(SearchError::Embed(count));
    }
    let q: Arc<Vec<f32>> = match kept_query {
        Some(q) => q,
        None => {
            let q = Arc::new(tokens.remove(0));
            lock(&cache.queries).put(text_key(query), q.clone());
            q
        }
    };
    let dim = embed.dim();
    {
        let mut kept = lock(&cache.tokens);
        for (&j, rows) in missing.iter().zip(&tokens) {
            let rows = Arc::new(quantize(rows, dim));
            kept.put(keys[unscored[j]], rows.clone());
            docs[j] = Some(rows);
        }
    }
    let mut prepared = codec.filter(|_| !stored.is_empty()).map(|c| c.query(&q));
    Ok(unscored
        .iter()
        .zip(&docs)
        .map(|(i, doc)| match (stored.get(i), codec, prepared.as_mut()) {
            (Some(code), Some(codec), Some(p)) => codec.max_sim(p, code).unwrap_or(0.0),
            _ => doc.as_ref().map_or(0.0, |d| max_sim_q(&q, d, dim)),
        })
        .collect())
}

/// The late-interaction codes `index` stores for the candidates at `unscored` (by the
/// candidate's position), those `codec` wrote only; none without an index or a codec, or when the
/// lookup fails (the candidates are then encoded, with a warning).
async fn stored_codes(
    embed: &EmbedService,
    index: Option<&Index>,
    codec: Option<&LateCodec>,
    texts: &[String],
    unscored: &[usize],
) -> HashMap<usize, Vec<u8>> {
    let (Some(index), Some(codec)) = (index, codec) else { return HashMap::new() };
    let keys: Vec<String> = unscored.iter().map(|&i| ctxd_models::embed_key(embed.model_id(), &texts[i])).collect();
    let mut found = match index.vectors().late_for(&keys).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!("reading stored late-interaction codes failed, encoding the candidates: {e}");
            return HashMap::new();
        }
    };
    unscored
        .iter()
        .zip(&keys)
        .filter_map(|(&i, key)| found.remove(key).filter(|code| codec.reads(code)).map(|code| (i, code)))
        .collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rescores the best `depth` hits that pass the filters by late interaction and re-sorts
/// `fused` (sorted by score on entry). Under load the caller passes a smaller `shed` depth
/// (0: none; see [`crate::pressure`]): it is used unless the scores of all `depth` candidates
/// are kept, in which case the full rescoring costs no forward pass and is done. Returns true
/// when the order is the one the full depth gives (what an idle process answers). On a model
/// error the first-stage order stays, with a warning: rescoring refines an answer, it never
/// costs one.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn rescore(
    rescorer: Rescorer<'_>,
    cache: &RerankCache,
    query: &str,
    fused: &mut [Hit],
    passes: &impl Fn(&Hit) -> bool,
    depth: usize,
    shed: usize,
) -> bool {
    // An embedding server gives no token states: the first-stage order is the answer.
    if let Rescorer::LateInteraction(embed, _) = rescorer {
        if !embed.token_states() {
            return true;
        }
    }
    let query_key = rescorer.query_key(query);
    let mut chosen: Vec<usize> = (0..fused.len()).filter(|&i| passes(&fused[i])).take(depth).collect();
    let all = chosen.len();
    if all < 2 {
        return true;
    }
    let candidates: Vec<&Hit> = chosen.iter().map(|&i| &fused[i]).collect();
    let mut texts = Texts::of(&candidates);
    // Shedding saves the model's passes over the candidates; scoring stored codes costs a few
    // milliseconds of reads and arithmetic, so it is never shed.
    if shed < all && !rescorer.reads_stored_codes(cache) && !cache.scored_all(query_key, &texts) {
        chosen.truncate(shed);
        texts.truncate(shed);
    }
    if chosen.len() < 2 {
        return false;
    }
    let started = Instant::now();
    let second = match second_stage(rescorer, cache, query_key, query, &texts).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("rescoring failed, keeping the first-stage order: {e}");
            return false;
        }
    };
    let first: Vec<f32> = chosen.iter().map(|&i| fused[i].score).collect();
    let top = fused.first().map_or(1.0, |h| h.score.max(1e-6));
    for h in fused.iter_mut() {
        h.score /= top;
    }
    for (&i, s) in chosen.iter().zip(combine(&first, &second)) {
        fused[i].score = s;
    }
    fused.sort_by(|x, y| y.score.total_cmp(&x.score));
    metrics::histogram!(crate::metrics::RERANK_SECONDS).record(started.elapsed().as_secs_f64());
    chosen.len() == all
}

/// New scores for rescored candidates: `1 + (first + second) / 2` with both stages min-max
/// normalised over the candidates, so a rescored candidate (1..=2) stays ahead of any hit past
/// the rescoring depth (whose scores the caller scales into 0..1).
pub fn combine(first: &[f32], second: &[f32]) -> Vec<f32> {
    let (a, b) = (min_max(first), min_max(second));
    a.iter().zip(&b).map(|(x, y)| 1.0 + (x + y) / 2.0).collect()
}

/// Scores scaled to 0..=1 (all 1 when they are equal).
fn min_max(xs: &[f32]) -> Vec<f32> {
    let (lo, hi) = xs.iter().fold((f32::MAX, f32::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    xs.iter().map(|&x| if hi > lo { (x - lo) / (hi - lo) } else { 1.0 }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_bit_rows_score_like_the_floats() {
        let dim = 16;
        // Deterministic unit rows: 3 query tokens, 9 document tokens.
        let unit = |seed: usize, n: usize| -> Vec<f32> {
            let raw: Vec<f32> = (0..n * dim).map(|i| (((i + seed) * 2654435761) % 1000) as f32 / 500.0 - 1.0).collect();
            ctxd_models::embedder::unit_token_rows(&[vec![0.0; dim], raw, vec![0.0; dim]].concat(), dim)
        };
        let (q, d) = (unit(1, 3), unit(7, 9));
        let exact = ctxd_models::embedder::max_sim(&q, &d, dim);
        let quantized = max_sim_q(&q, &quantize(&d, dim), dim);
        assert!((exact - quantized).abs() < 0.01, "{exact} vs {quantized}");
        assert_eq!(max_sim_q(&q, &quantize(&[], dim), dim), 0.0);
        assert_ne!(text_key("a.rs f\nfn f() {}"), text_key("a.rs f\nfn f() { }"));
    }

    #[test]
    fn both_stages_count_and_rescored_candidates_stay_on_top() {
        // Candidate 0 leads the first stage, candidate 2 the second; candidate 1 is second in both.
        let s = combine(&[0.9, 0.8, 0.1], &[0.2, 0.6, 0.7]);
        assert!(s.iter().all(|&x| (1.0..=2.0).contains(&x)), "{s:?}");
        // 0: (1 + 0) / 2, 1: (0.875 + 0.8) / 2, 2: (0 + 1) / 2.
        assert!(s[1] > s[0] && s[1] > s[2], "agreement wins: {s:?}");
        assert_eq!(combine(&[0.5, 0.5], &[0.3, 0.3]), vec![2.0, 2.0]);
    }

    /// Token rows from bytes (one 4-dimension row per byte), counting the texts encoded.
    struct Bytes(Arc<Mutex<Vec<usize>>>);

    impl ctxd_models::embedder::Embedder for Bytes {
        fn model_id(&self) -> &str {
            "bytes"
        }
        fn dim(&self) -> usize {
            4
        }
        fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ctxd_models::error::ModelError> {
            Ok(texts.iter().map(|t| t.bytes().map(u32::from).collect()).collect())
        }
        fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ctxd_models::error::ModelError> {
            Ok(ids.iter().map(|_| vec![0.5; 4]).collect())
        }
        fn forward_tokens(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ctxd_models::error::ModelError> {
            self.0.lock().unwrap().push(ids.len());
            let row = |b: u32| {
                let v = [(b % 7) as f32 + 1.0, (b % 5) as f32, (b % 3) as f32, 1.0];
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                v.map(|x| x / n)
            };
            Ok(ids.iter().map(|t| t.iter().flat_map(|&b| row(b)).collect()).collect())
        }
    }

    fn hit(path: &str, content: &str) -> Hit {
        let chunk = ctxd_index::record::Chunk { path: path.into(), content: content.into(), ..Default::default() };
        Hit { chunk, score: 0.0 }
    }

    /// [`second_stage`] by late interaction of `query` over `refs`.
    async fn late(embed: &EmbedService, cache: &RerankCache, query: &str, refs: &[&Hit]) -> Vec<f32> {
        second_stage(Rescorer::LateInteraction(embed, None), cache, text_key(query), query, &Texts::of(refs))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn a_question_scored_before_needs_no_forward_pass() {
        let passes = Arc::new(Mutex::new(Vec::new()));
        let embed = EmbedService::spawn(Bytes(passes.clone()), Default::default());
        let cache = RerankCache::default();
        let hits = [hit("a.py", "def add(a, b)"), hit("b.py", "class Stack"), hit("c.py", "import os")];
        let refs: Vec<&Hit> = hits.iter().collect();
        let first = late(&embed, &cache, "push onto a stack", &refs).await;
        assert_eq!(*passes.lock().unwrap(), vec![4], "the query and three candidates");
        assert!(first.iter().all(|s| s.is_finite() && *s > 0.0), "{first:?}");

        // Asked again (a new index version, same candidates): the kept scores, no pass.
        let again = late(&embed, &cache, "push onto a stack", &refs).await;
        assert_eq!(again, first);
        assert_eq!(passes.lock().unwrap().len(), 1, "no forward pass for kept scores");

        // One new candidate: the query and it only; the others' scores are the kept ones.
        let more = [hits[0].clone(), hit("d.py", "def pop(self)"), hits[2].clone()];
        let refs: Vec<&Hit> = more.iter().collect();
        let mixed = late(&embed, &cache, "push onto a stack", &refs).await;
        assert_eq!(passes.lock().unwrap()[1], 1, "the new candidate alone: the query's token states are kept");
        assert_eq!((mixed[0], mixed[2]), (first[0], first[2]));

        // Another question over the same chunks: their token rows are kept, only it is encoded,
        // and its scores are its own.
        let other = late(&embed, &cache, "sum two numbers", &refs).await;
        assert_eq!(passes.lock().unwrap()[2], 1);
        assert_ne!(other, mixed);
    }

    /// A cross-encoder stand-in: a pair's score is the number of query words its document holds.
    struct Overlap(Arc<Mutex<usize>>);

    impl ctxd_models::embedder::Embedder for Overlap {
        fn model_id(&self) -> &str {
            "overlap"
        }
        fn dim(&self) -> usize {
            1
        }
        fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ctxd_models::error::ModelError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let (q, d) = t.split_once(ctxd_models::cross::PAIR_SEP).unwrap_or((t, ""));
                    vec![q.split_whitespace().filter(|w| d.contains(w)).count() as u32]
                })
                .collect())
        }
        fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ctxd_models::error::ModelError> {
            *self.0.lock().unwrap() += ids.len();
            Ok(ids.iter().map(|i| vec![i[0] as f32]).collect())
        }
        fn has_token_states(&self) -> bool {
            false
        }
    }

    #[tokio::test]
    async fn a_cross_encoder_rescores_with_its_pair_scores_and_keeps_them() {
        let pairs = Arc::new(Mutex::new(0));
        let cross = EmbedService::spawn(Overlap(pairs.clone()), Default::default());
        let cache = RerankCache::default();
        let mut hits = vec![hit("a.py", "import os"), hit("c.py", "def push onto stack"), hit("b.py", "class Stack")];
        for (h, s) in hits.iter_mut().zip([0.9, 0.8, 0.1]) {
            h.score = s;
        }
        let all = |_: &Hit| true;
        let mut ranked = hits.clone();
        assert!(rescore(Rescorer::CrossEncoder(&cross), &cache, "push onto stack", &mut ranked, &all, 3, 3).await);
        assert_eq!(ranked[0].path, "c.py", "the pair scores lift the candidate the query describes");
        assert_eq!(*pairs.lock().unwrap(), 3);
        // Asked again: every pair's score is kept, nothing is scored.
        let mut again = hits.clone();
        assert!(rescore(Rescorer::CrossEncoder(&cross), &cache, "push onto stack", &mut again, &all, 3, 0).await);
        assert_eq!(*pairs.lock().unwrap(), 3);
        // MaxSim's kept scores for the same texts are not the cross-encoder's.
        let key = Rescorer::CrossEncoder(&cross).query_key("push onto stack");
        assert_ne!(key, text_key("push onto stack"));
    }

    #[tokio::test]
    async fn under_load_the_full_depth_is_rescored_when_its_scores_are_kept() {
        let passes = Arc::new(Mutex::new(Vec::new()));
        let embed = EmbedService::spawn(Bytes(passes.clone()), Default::default());
        let cache = RerankCache::default();
        let mut hits = vec![hit("a.py", "import os"), hit("b.py", "class Stack"), hit("c.py", "def push(x)")];
        for (h, s) in hits.iter_mut().zip([0.9, 0.8, 0.7]) {
            h.score = s;
        }
        let all = |_: &Hit| true;
        let order = |f: &[Hit]| f.iter().map(|h| h.path.clone()).collect::<Vec<_>>();

        // Loaded, nothing kept: rescoring is shed (no forward pass), the first-stage order stays.
        let mut loaded = hits.clone();
        assert!(!rescore(Rescorer::LateInteraction(&embed, None), &cache, "stack push", &mut loaded, &all, 3, 0).await);
        assert!(passes.lock().unwrap().is_empty());
        assert_eq!(order(&loaded), ["a.py", "b.py", "c.py"]);

        // Idle: the full depth, one pass.
        let mut idle = hits.clone();
        assert!(rescore(Rescorer::LateInteraction(&embed, None), &cache, "stack push", &mut idle, &all, 3, 3).await);
        assert_eq!(*passes.lock().unwrap(), vec![4]);

        // Loaded again (a new index version): every score is kept, so the full depth is rescored
        // without a pass and the answer is the idle one.
        let mut again = hits.clone();
        assert!(rescore(Rescorer::LateInteraction(&embed, None), &cache, "stack push", &mut again, &all, 3, 0).await);
        assert_eq!(passes.lock().unwrap().len(), 1);
        assert_eq!(order(&again), order(&idle));
        assert_eq!(again.iter().map(|h| h.score).collect::<Vec<_>>(), idle.iter().map(|h| h.score).collect::<Vec<_>>());

        // A new candidate among them: shed again (a partial depth of 1 rescores nothing).
        let mut changed = vec![hits[0].clone(), hit("d.py", "def pop()"), hits[2].clone()];
        assert!(
            !rescore(Rescorer::LateInteraction(&embed, None), &cache, "stack push", &mut changed, &all, 3, 1).await
        );
        assert_eq!(passes.lock().unwrap().len(), 1);
    }
}
