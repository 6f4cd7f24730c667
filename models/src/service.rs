//! The embedding service: an [`Embedder`] on its own OS thread, fed by two lanes.
//!
//! Async callers send a request (a list of texts) and await the reply; the model thread never
//! touches the async runtime, and the async runtime never runs a forward pass. Inside a request
//! the texts are sorted by token length and cut into sub-batches whose *padded* size
//! (`texts × longest`) stays under `max_batch_tokens`, so short chunks are not padded to the
//! length of long ones.
//!
//! **Two lanes.** Queries (search, rescoring, locate, completion, evaluation) use the
//! *interactive* lane ([`EmbedService::embed`], [`EmbedService::embed_tokens`]); indexing and
//! re-embedding use the *bulk* lane ([`EmbedService::embed_documents`]). Queries and documents
//! get the model card's prompts ([`EmbedService::with_card`]); [`EmbedService::embed_bulk`]
//! embeds texts as given (what `/v1/embeddings` serves). The thread takes
//! interactive requests first — also between the sub-batches of a bulk request — so a query
//! waits for at most one bulk sub-batch, not for the queued indexing batches before it (a daemon
//! ingesting 300 files made queries wait seconds behind them). While interactive requests keep
//! coming (one within the last [`RECENT`]), indexing *yields*: its sub-batches are cut to
//! [`YIELD_BATCH_TOKENS`] (~40 ms for MiniLM on two cores instead of ~0.6 s), and after each one
//! the thread rests, answering queries as they come, so that indexing takes at most
//! `bulk_share_percent` of its time (`[model] indexing_share_percent`, default 15): the model's
//! workers take every core while they run, and a query's search needs CPU too. While queries
//! also *wait for a slot* (the serving process's admission queue, told to the service by
//! [`EmbedService::watch_queries_waiting`]) the cores are the queries' bottleneck, and indexing
//! takes at most `bulk_share_waiting_percent` (`[model] indexing_share_waiting_percent`, default
//! 5): 50 clients asking distinct questions on two cores beside an editor writing 20 files a
//! second kept their p99 within 1.43–1.59× of idle in three runs of four (2.17× in the fourth, on
//! a slower VM; 1.64–2.71× with 15 % while they waited), while one client asking without pause
//! (nothing queued) keeps the 15 % and the
//! writer's freshness (BENCHMARKS.md, "Indexing slows down further while queries wait"). The bulk lane
//! holds `queue` requests, then its senders wait (the pipeline's back-pressure); the interactive
//! lane is unbounded: its senders are queries, bounded by admission control, each awaiting its
//! reply. `ctxd_embed_queue_wait_seconds{lane}` is the time a request waited for the thread.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, Semaphore};

use crate::card::ModelCard;
use crate::embedder::{Embedder, PassOutput};
use crate::query_cache::QueryCache;
use crate::{error::ModelError, metrics as m};

/// Interactive requests this recent make indexing yield.
pub const RECENT: Duration = Duration::from_secs(1);
/// Padded tokens of a bulk sub-batch while indexing yields.
pub const YIELD_BATCH_TOKENS: usize = 512;

/// Tuning of the embedding service.
#[derive(Debug, Clone)]
pub struct EmbedServiceConfig {
    /// Cap on padded tokens per forward pass.
    pub max_batch_tokens: usize,
    /// Cap on texts per forward pass.
    pub max_batch_texts: usize,
    /// Pending bulk requests before callers wait (back-pressure).
    pub queue: usize,
    /// Percent of the thread's time bulk requests may take while queries are being answered
    /// (100: bulk never rests; see the module docs).
    pub bulk_share_percent: usize,
    /// The same while queries also wait for a slot ([`EmbedService::watch_queries_waiting`]).
    pub bulk_share_waiting_percent: usize,
}

impl Default for EmbedServiceConfig {
    fn default() -> Self {
        Self {
            max_batch_tokens: 8192,
            max_batch_texts: 64,
            queue: 4,
            bulk_share_percent: 15,
            bulk_share_waiting_percent: 5,
        }
    }
}

impl EmbedServiceConfig {
    /// The caps of a bulk sub-batch while queries are being answered.
    fn yielding(&self) -> Self {
        Self { max_batch_tokens: self.max_batch_tokens.min(YIELD_BATCH_TOKENS), ..self.clone() }
    }

    /// How long bulk work rests after a sub-batch that took `ran`, while queries are answered
    /// (`waiting`: and more wait for a slot).
    fn rest_after(&self, ran: Duration, waiting: bool) -> Duration {
        let share = if waiting { self.bulk_share_waiting_percent } else { self.bulk_share_percent };
        let share = share.clamp(1, 100) as u32;
        ran * (100 - share) / share
    }
}

type Reply = oneshot::Sender<Result<Vec<Vec<f32>>, ModelError>>;

/// Tells the model thread whether queries wait for a slot now (the serving process's admission
/// queue: `ctxd_search::pressure::Pressure::waiting_probe`).
pub type QueriesWaiting = Arc<dyn Fn() -> bool + Send + Sync>;

/// Which lane a request takes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    Interactive,
    Bulk,
}

impl Lane {
    /// Metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Interactive => "interactive",
            Lane::Bulk => "bulk",
        }
    }
}

/// A text's pooled vector and token states from one forward pass
/// ([`EmbedService::embed_documents_with_tokens`], [`EmbedService::embed_query_with_tokens`]).
#[derive(Debug, Clone, PartialEq)]
pub struct TokenStates {
    /// The pooled unit vector.
    pub vector: Vec<f32>,
    /// The unit token rows ([`Embedder::forward_tokens`]'s form).
    pub tokens: Vec<f32>,
    /// Each token row's token id ([`crate::embedder::inner_ids`]).
    pub ids: Vec<u32>,
}

struct Job {
    texts: Vec<String>,
    /// What the forward pass returns per text.
    output: PassOutput,
    reply: Reply,
    queued: Instant,
}

/// The two lanes, shared by the handles and the model thread.
#[derive(Default)]
struct Lanes {
    interactive: VecDeque<Job>,
    bulk: VecDeque<Job>,
    /// False once every handle is gone: the thread finishes what is queued and ends.
    closed: bool,
    /// When the last interactive request arrived.
    last_interactive: Option<Instant>,
}

struct Shared {
    lanes: Mutex<Lanes>,
    wake: Condvar,
    /// Free places in the bulk lane.
    bulk_slots: Semaphore,
    /// Whether queries wait for a slot ([`EmbedService::watch_queries_waiting`]; none: never).
    waiting: Mutex<Option<QueriesWaiting>>,
}

impl Shared {
    fn push(&self, lane: Lane, job: Job) {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        match lane {
            Lane::Interactive => {
                lanes.last_interactive = Some(job.queued);
                lanes.interactive.push_back(job);
            }
            Lane::Bulk => lanes.bulk.push_back(job),
        }
        self.wake.notify_one();
    }

    /// The next request, interactive first; waits while both lanes are empty; `None` once
    /// every handle is gone and nothing is left.
    fn next(&self) -> Option<(Lane, Job)> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(job) = lanes.interactive.pop_front() {
                return Some((Lane::Interactive, job));
            }
            if let Some(job) = lanes.bulk.pop_front() {
                self.bulk_slots.add_permits(1);
                return Some((Lane::Bulk, job));
            }
            if lanes.closed {
                return None;
            }
            lanes = self.wake.wait(lanes).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The next interactive request, waiting for one until `until` (`None`: not at all);
    /// `None` if none came (or every handle is gone).
    fn next_interactive(&self, until: Option<Instant>) -> Option<Job> {
        let mut lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(job) = lanes.interactive.pop_front() {
                return Some(job);
            }
            let left = until.map_or(Duration::ZERO, |t| t.saturating_duration_since(Instant::now()));
            if lanes.closed || left.is_zero() {
                return None;
            }
            lanes = self.wake.wait_timeout(lanes, left).unwrap_or_else(|p| p.into_inner()).0;
        }
    }

    /// True while queries are being answered (an interactive request within [`RECENT`]).
    fn queries_active(&self) -> bool {
        let lanes = self.lanes.lock().unwrap_or_else(|p| p.into_inner());
        !lanes.interactive.is_empty() || lanes.last_interactive.is_some_and(|t| t.elapsed() < RECENT)
    }

    /// True while queries wait for a slot (as the last probe given says).
    fn queries_waiting(&self) -> bool {
        let probe = self.waiting.lock().unwrap_or_else(|p| p.into_inner()).clone();
        probe.is_some_and(|waiting| waiting())
    }

    fn close(&self) {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.wake.notify_all();
    }
}

/// Closes the lanes when the last handle is dropped.
struct Owner(Arc<Shared>);

impl Drop for Owner {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Handle to the model thread. Cloning shares the same thread.
#[derive(Clone)]
pub struct EmbedService {
    owner: Arc<Owner>,
    /// Vectors of recent queries ([`crate::query_cache`]).
    queries: Arc<QueryCache>,
    model_id: String,
    dim: usize,
    backend: String,
    token_states: bool,
    /// The token ids of ASCII punctuation ([`EmbedService::punctuation`]).
    punctuation: Arc<Vec<u32>>,
    /// The model card's prompts ([`EmbedService::with_card`]); none by default.
    card: Option<Arc<ModelCard>>,
}

/// Splits indices sorted by length into runs whose padded size stays under the caps.
/// Returns ranges into `order`.
pub fn plan_batches(lens_sorted: &[usize], cfg: &EmbedServiceConfig) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < lens_sorted.len() {
        let end = batch_end(lens_sorted, start, cfg);
        out.push(start..end);
        start = end;
    }
    out
}

/// The end of the run that starts at `start` (at least one text) of lengths sorted ascending.
fn batch_end(lens_sorted: &[usize], start: usize, cfg: &EmbedServiceConfig) -> usize {
    let mut end = start + 1;
    while end < lens_sorted.len() {
        let count = end - start + 1;
        // Sorted ascending, so the text at `end` is the longest of the run.
        if count * lens_sorted[end].max(1) > cfg.max_batch_tokens || count > cfg.max_batch_texts {
            break;
        }
        end += 1;
    }
    end
}

/// Answers the interactive requests waiting, and those arriving until `until` (a bulk
/// request's rest; `None`: only those waiting).
fn answer_queries<E: Embedder>(embedder: &mut E, cfg: &EmbedServiceConfig, shared: &Shared, until: Option<Instant>) {
    while let Some(query) = shared.next_interactive(until) {
        answer(embedder, cfg, query, Lane::Interactive, None);
    }
}

/// Runs one request. A bulk request (`shared` given) runs the interactive requests that arrive
/// meanwhile between its sub-batches, and yields while queries are active (small sub-batches,
/// each followed by a rest that answers queries).
fn run_job<E: Embedder>(
    embedder: &mut E,
    cfg: &EmbedServiceConfig,
    job: &Job,
    shared: Option<&Shared>,
) -> Result<Vec<Vec<f32>>, ModelError> {
    let (texts, output) = (&job.texts, job.output);
    let ids = embedder.encode(texts)?;
    let lens: Vec<usize> = ids.iter().map(Vec::len).collect();
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| lens[i]);
    let sorted_lens: Vec<usize> = order.iter().map(|&i| lens[i]).collect();
    let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
    // Each sub-batch is cut from `done` on with the caps in force, so its size follows queries
    // starting or stopping.
    let (mut done, mut yielding, mut rest_until) = (0, false, None);
    while done < order.len() {
        if let Some(shared) = shared {
            answer_queries(embedder, cfg, shared, rest_until);
            yielding = shared.queries_active();
        }
        let caps = if yielding { cfg.yielding() } else { cfg.clone() };
        let range = done..batch_end(&sorted_lens, done, &caps);
        done = range.end;
        let idx = &order[range.clone()];
        let batch: Vec<Vec<u32>> = idx.iter().map(|&i| ids[i].clone()).collect();
        let started = Instant::now();
        let vectors = match output {
            PassOutput::Tokens => embedder.forward_tokens(&batch)?,
            PassOutput::Both => with_ids(embedder.forward_both(&batch)?, &batch),
            PassOutput::Pooled if embedder.takes_texts() => {
                embedder.forward_texts(&idx.iter().map(|&i| texts[i].clone()).collect::<Vec<_>>())?
            }
            PassOutput::Pooled => embedder.forward(&batch)?,
        };
        if vectors.len() != batch.len() {
            return Err(ModelError::Count { expected: batch.len(), got: vectors.len() });
        }
        let real: usize = sorted_lens[range.clone()].iter().sum();
        let padded = embedder.padded_tokens(&sorted_lens[range.clone()]);
        let ran = started.elapsed();
        rest_until =
            yielding.then(|| Instant::now() + cfg.rest_after(ran, shared.is_some_and(Shared::queries_waiting)));
        let secs = ran.as_secs_f64();
        metrics::histogram!(m::EMBED_BATCH_SECONDS).record(secs);
        if secs > 0.0 {
            metrics::gauge!(m::EMBED_THROUGHPUT).set(real as f64 / secs);
        }
        metrics::histogram!(m::EMBED_BATCH_SIZE).record(batch.len() as f64);
        metrics::counter!(m::EMBED_TEXTS_TOTAL).increment(batch.len() as u64);
        metrics::counter!(m::EMBED_TOKENS_TOTAL).increment(real as u64);
        metrics::counter!(m::EMBED_PADDED_TOKENS_TOTAL).increment(padded as u64);
        for (&i, v) in idx.iter().zip(vectors) {
            out[i] = Some(v);
        }
    }
    // The last sub-batch's rest too, or back-to-back requests would never rest.
    if let (Some(shared), Some(_)) = (shared, rest_until) {
        answer_queries(embedder, cfg, shared, rest_until);
    }
    Ok(out.into_iter().map(|v| v.unwrap_or_default()).collect())
}

/// [`PassOutput::Both`]'s rows with each sequence's token ids (those of its token rows, as floats:
/// exact below 2^24) after them, for [`EmbedService::split_both`].
fn with_ids(mut both: Vec<Vec<f32>>, batch: &[Vec<u32>]) -> Vec<Vec<f32>> {
    for (v, seq) in both.iter_mut().zip(batch) {
        v.extend(crate::embedder::inner_ids(seq).iter().map(|&id| id as f32));
    }
    both
}

/// Runs `job` and sends its reply (a caller that gave up is not an error).
fn answer<E: Embedder>(embedder: &mut E, cfg: &EmbedServiceConfig, job: Job, lane: Lane, shared: Option<&Shared>) {
    metrics::histogram!(m::EMBED_QUEUE_WAIT_SECONDS, "lane" => lane.as_str())
        .record(job.queued.elapsed().as_secs_f64());
    let result = run_job(embedder, cfg, &job, shared);
    let _ = job.reply.send(result);
}

impl EmbedService {
    /// Moves `embedder` onto a new thread named `ctxd-embed` and returns a handle to it.
    /// The thread ends when every handle is dropped (after answering what is queued).
    pub fn spawn<E: Embedder>(mut embedder: E, cfg: EmbedServiceConfig) -> Self {
        let shared = Arc::new(Shared {
            lanes: Mutex::new(Lanes::default()),
            wake: Condvar::new(),
            bulk_slots: Semaphore::new(cfg.queue.max(1)),
            waiting: Mutex::new(None),
        });
        let model_id = embedder.model_id().to_string();
        let dim = embedder.dim();
        let token_states = embedder.has_token_states();
        let punctuation = Arc::new(if token_states { crate::embedder::punctuation_ids(&embedder) } else { Vec::new() });
        let thread_shared = shared.clone();
        std::thread::Builder::new()
            .name("ctxd-embed".into())
            .spawn(move || {
                while let Some((lane, job)) = thread_shared.next() {
                    let preempt = (lane == Lane::Bulk).then_some(&*thread_shared);
                    answer(&mut embedder, &cfg, job, lane, preempt);
                }
            })
            .expect("spawning the embedding thread");
        Self {
            owner: Arc::new(Owner(shared)),
            queries: Arc::default(),
            model_id,
            dim,
            backend: "custom".into(),
            token_states,
            punctuation,
            card: None,
        }
    }

    /// Puts the model card's prompts before texts: the query prompt in [`EmbedService::embed`],
    /// the document prompt in [`EmbedService::embed_documents`] ([`crate::card`]).
    pub fn with_card(mut self, card: ModelCard) -> Self {
        self.card = Some(Arc::new(card));
        self
    }

    /// The model card's prompts and pooling, if the service has them.
    pub fn card(&self) -> Option<&ModelCard> {
        self.card.as_deref()
    }

    /// Names the backend (for logs and `/metrics` info).
    pub fn with_backend(mut self, backend: String) -> Self {
        self.backend = backend;
        self
    }

    /// What runs the model, e.g. `onednn 3.2.0 (...), 2 workers, bf16`.
    pub fn backend(&self) -> &str {
        &self.backend
    }

    /// True while queries are being answered (an interactive request within [`RECENT`]): what
    /// indexing yields to, here and elsewhere (the upsert sink folds new rows sooner).
    pub fn queries_active(&self) -> bool {
        self.owner.0.queries_active()
    }

    /// Makes indexing take its smaller share while `probe` says queries wait for a slot (see the
    /// module docs); the last probe given is the one asked (a model switch gives the new service one).
    pub fn watch_queries_waiting(&self, probe: QueriesWaiting) {
        *self.owner.0.waiting.lock().unwrap_or_else(|p| p.into_inner()) = Some(probe);
    }

    /// Model id of the embedder behind this service.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Whether the model gives token states ([`EmbedService::embed_tokens`]; a server does not).
    pub fn token_states(&self) -> bool {
        self.token_states
    }

    /// The sorted token ids of ASCII punctuation, which late-interaction codes may leave out
    /// ([`crate::late::LateCodec::words`]); empty for a model without token states.
    pub fn punctuation(&self) -> &[u32] {
        &self.punctuation
    }

    /// Embeds queries on the model thread, each after the model card's query prompt, in the
    /// interactive lane (see the module docs; a single query text asked recently comes from [`crate::query_cache`]); indexing
    /// uses [`EmbedService::embed_bulk`].
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        let texts = self.query_texts(texts);
        if let Some(vector) = self.queries.get(&texts) {
            return Ok(vec![vector]);
        }
        let vectors = self.request(texts.clone(), PassOutput::Pooled, Lane::Interactive).await?;
        self.queries.put(&texts, &vectors);
        Ok(vectors)
    }

    /// Whether [`EmbedService::embed`] would answer the query `text` from its cache, without a
    /// forward pass.
    pub fn query_cached(&self, text: &str) -> bool {
        self.queries.contains(&self.query_texts(vec![text.to_string()]))
    }

    /// Embeds `texts` as they are in the bulk lane (an embedding request served to another
    /// process, a benchmark): after any waiting query, and waiting (asynchronously) while
    /// `queue` bulk requests are pending.
    pub async fn embed_bulk(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        self.request(texts, PassOutput::Pooled, Lane::Bulk).await
    }

    /// [`EmbedService::embed`] in the bulk lane, uncached: a background job's many queries.
    pub async fn embed_queries_bulk(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        self.request(self.query_texts(texts), PassOutput::Pooled, Lane::Bulk).await
    }

    /// Embeds documents (indexing, re-embedding) in the bulk lane, each after the model card's
    /// document prompt.
    pub async fn embed_documents(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        let texts = self.document_texts(texts);
        self.request(texts, PassOutput::Pooled, Lane::Bulk).await
    }

    /// Embeds documents (indexing, re-embedding) like [`EmbedService::embed_documents`], each
    /// with its token embeddings from the same forward pass ([`Embedder::forward_both`]): per
    /// text its pooled vector, token rows and those rows' token ids.
    pub async fn embed_documents_with_tokens(&self, texts: Vec<String>) -> Result<Vec<TokenStates>, ModelError> {
        let texts = self.document_texts(texts);
        let both = self.request(texts, PassOutput::Both, Lane::Bulk).await?;
        Ok(self.split_both(both))
    }

    /// A query's pooled vector and token embeddings from one forward pass, in the interactive
    /// lane (what a routed search that rescores needs of its query), or `None` where one pass
    /// cannot give both: the model card puts a prompt before queries (the pooled vector is of the
    /// prompted text, the token states of the query alone) or the model has no token states.
    /// The pooled vector joins the query cache [`EmbedService::embed`] reads.
    pub async fn embed_query_with_tokens(&self, query: &str) -> Result<Option<TokenStates>, ModelError> {
        if !self.token_states || self.card.as_ref().is_some_and(|c| c.query_prompt.is_some()) {
            return Ok(None);
        }
        let texts = vec![query.to_string()];
        let both = self.request(texts.clone(), PassOutput::Both, Lane::Interactive).await?;
        let Some(states) = self.split_both(both).pop() else {
            return Err(ModelError::Count { expected: 1, got: 0 });
        };
        self.queries.put(&texts, std::slice::from_ref(&states.vector));
        Ok(Some(states))
    }

    /// `texts` after the model card's query prompt, where it has one.
    fn query_texts(&self, texts: Vec<String>) -> Vec<String> {
        match &self.card {
            Some(card) if card.query_prompt.is_some() => texts.iter().map(|t| card.query_text(t)).collect(),
            _ => texts,
        }
    }

    /// `texts` after the model card's document prompt, where it has one.
    fn document_texts(&self, texts: Vec<String>) -> Vec<String> {
        match &self.card {
            Some(card) if card.document_prompt.is_some() => texts.iter().map(|t| card.document_text(t)).collect(),
            _ => texts,
        }
    }

    /// [`PassOutput::Both`]'s rows ([`with_ids`]) split into their parts.
    fn split_both(&self, both: Vec<Vec<f32>>) -> Vec<TokenStates> {
        let dim = self.dim();
        both.into_iter()
            .map(|mut v| {
                // dim + n rows of dim + n ids.
                let n = v.len().saturating_sub(dim) / (dim + 1);
                let ids = v.split_off((dim + n * dim).min(v.len())).into_iter().map(|id| id as u32).collect();
                let tokens = v.split_off(dim.min(v.len()));
                TokenStates { vector: v, tokens, ids }
            })
            .collect()
    }

    /// Scores (query, document) pairs on a cross-encoder's service ([`crate::cross`]), in the
    /// interactive lane: one score per document, in order.
    pub async fn score_pairs(&self, query: &str, documents: &[String]) -> Result<Vec<f32>, ModelError> {
        let texts = documents.iter().map(|d| crate::cross::pair_text(query, d)).collect();
        let scores = self.request(texts, PassOutput::Pooled, Lane::Interactive).await?;
        Ok(scores.into_iter().map(|s| s.first().copied().unwrap_or(f32::MIN)).collect())
    }

    /// Token embeddings of `texts` ([`Embedder::forward_tokens`]: one `tokens × dim` matrix
    /// of unit rows per text), in the interactive lane like [`EmbedService::embed`].
    pub async fn embed_tokens(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        self.request(texts, PassOutput::Tokens, Lane::Interactive).await
    }

    fn send(
        &self,
        texts: Vec<String>,
        output: PassOutput,
        lane: Lane,
    ) -> oneshot::Receiver<Result<Vec<Vec<f32>>, ModelError>> {
        let (reply, rx) = oneshot::channel();
        self.owner.0.push(lane, Job { texts, output, reply, queued: Instant::now() });
        rx
    }

    async fn request(&self, texts: Vec<String>, output: PassOutput, lane: Lane) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        if lane == Lane::Bulk {
            // The thread gives the place back when it takes the request.
            self.owner.0.bulk_slots.acquire().await.map_err(|_| ModelError::ServiceClosed)?.forget();
        }
        self.send(texts, output, lane).await.map_err(|_| ModelError::ServiceClosed)?
    }

    /// Blocking variant for non-async callers (benchmarks, CLI helpers), in the interactive
    /// lane (it waits for its reply, so it cannot flood it). Never call it from inside the
    /// async runtime.
    pub fn embed_blocking(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        self.send(texts, PassOutput::Pooled, Lane::Interactive)
            .blocking_recv()
            .map_err(|_| ModelError::ServiceClosed)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake embedder: vector = [len, first byte, 1]; records each forward pass (the first
    /// byte of each text) and takes `pause` per pass.
    struct Recorder {
        passes: Arc<Mutex<Vec<Vec<u8>>>>,
        pause: Duration,
    }
    impl Embedder for Recorder {
        fn model_id(&self) -> &str {
            "recorder"
        }
        fn dim(&self) -> usize {
            3
        }
        fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
            Ok(texts.iter().map(|t| t.bytes().map(u32::from).collect()).collect())
        }
        fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
            std::thread::sleep(self.pause);
            self.passes.lock().unwrap().push(ids.iter().map(|t| t[0] as u8).collect());
            Ok(ids.iter().map(|t| vec![t.len() as f32, t[0] as f32, 1.0]).collect())
        }
    }

    fn recorder(pause_ms: u64, cfg: EmbedServiceConfig) -> (EmbedService, Arc<Mutex<Vec<Vec<u8>>>>) {
        let passes = Arc::new(Mutex::new(Vec::new()));
        let svc = EmbedService::spawn(Recorder { passes: passes.clone(), pause: Duration::from_millis(pause_ms) }, cfg);
        (svc, passes)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_query_runs_between_the_sub_batches_of_indexing() {
        // 20 bulk texts of 5 tokens, one per pass (cap 5 tokens), 30 ms each: 600 ms of work.
        let cfg = EmbedServiceConfig {
            max_batch_tokens: 5,
            max_batch_texts: 64,
            queue: 4,
            bulk_share_percent: 100,
            bulk_share_waiting_percent: 100,
        };
        let (svc, passes) = recorder(30, cfg);
        let bulk_texts: Vec<String> = (0..20).map(|_| "bbbbb".to_string()).collect();
        let (s1, s2) = (svc.clone(), svc.clone());
        let first = tokio::spawn(async move { s1.embed_bulk(bulk_texts.clone()).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let second = tokio::spawn(async move { s2.embed_bulk(vec!["ccccc".to_string()]).await });
        tokio::time::sleep(Duration::from_millis(80)).await;
        let t = Instant::now();
        let v = svc.embed(vec!["q".to_string()]).await.unwrap();
        assert_eq!(v, vec![vec![1.0, b'q' as f32, 1.0]]);
        // One pass (30 ms) at most before it, not the rest of the bulk requests (~500 ms).
        assert!(t.elapsed() < Duration::from_millis(250), "query waited {:?}", t.elapsed());
        assert_eq!(first.await.unwrap().unwrap().len(), 20);
        assert_eq!(second.await.unwrap().unwrap().len(), 1);
        let order: Vec<u8> = passes.lock().unwrap().iter().map(|p| p[0]).collect();
        let q = order.iter().position(|&b| b == b'q').unwrap();
        assert!(q > 0 && order[q + 1..].iter().filter(|&&b| b == b'b').count() > 5, "{order:?}");
        assert_eq!(order.last(), Some(&b'c'), "bulk requests keep their order: {order:?}");
    }

    #[test]
    fn indexing_yields_while_queries_come() {
        // 16 texts of 100 tokens under a 1,600-token cap: one pass; a query within the last
        // second cuts the cap to YIELD_BATCH_TOKENS (512): passes of 5.
        let cfg = EmbedServiceConfig { max_batch_tokens: 1600, max_batch_texts: 64, ..Default::default() };
        let texts: Vec<String> = (0..16).map(|_| "b".repeat(100)).collect();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (svc, passes) = recorder(0, cfg.clone());
        rt.block_on(svc.embed_bulk(texts.clone())).unwrap();
        assert_eq!(passes.lock().unwrap().iter().map(Vec::len).collect::<Vec<_>>(), vec![16]);
        let (svc, passes) = recorder(0, cfg.clone());
        svc.embed_blocking(vec!["q".into()]).unwrap();
        rt.block_on(svc.embed_bulk(texts)).unwrap();
        let sizes: Vec<usize> = passes.lock().unwrap().iter().skip(1).map(Vec::len).collect();
        assert_eq!(sizes, vec![5, 5, 5, 1]);
        // With a 50% share, each 20 ms pass is followed by a 20 ms rest: 8 passes take ≥ 320 ms
        // (160 ms when indexing does not yield).
        let big: Vec<String> = (0..8).map(|_| "b".repeat(400)).collect();
        for (share, at_least) in [(50, 300), (100, 160)] {
            let (svc, _) = recorder(20, EmbedServiceConfig { bulk_share_percent: share, ..cfg.clone() });
            svc.embed_blocking(vec!["q".into()]).unwrap();
            let t = Instant::now();
            rt.block_on(svc.embed_bulk(big.clone())).unwrap();
            let took = t.elapsed();
            assert!(took >= Duration::from_millis(at_least), "share {share}%: {took:?}");
            if share == 100 {
                assert!(took < Duration::from_millis(300), "share 100% must not rest: {took:?}");
            }
        }
    }

    #[test]
    fn indexing_takes_its_smaller_share_while_queries_wait_for_a_slot() {
        // Each 20 ms pass of 8 is followed by no rest while no query waits for a slot (share
        // 100 %), by a 20 ms one while some do (50 %): ≥ 320 ms against ~160 ms.
        let cfg = EmbedServiceConfig {
            max_batch_tokens: 1600,
            bulk_share_percent: 100,
            bulk_share_waiting_percent: 50,
            ..Default::default()
        };
        let big: Vec<String> = (0..8).map(|_| "b".repeat(400)).collect();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let waiting = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (svc, _) = recorder(20, cfg);
        let probe = waiting.clone();
        svc.watch_queries_waiting(Arc::new(move || probe.load(std::sync::atomic::Ordering::Relaxed)));
        let mut took = Vec::new();
        for now in [false, true] {
            waiting.store(now, std::sync::atomic::Ordering::Relaxed);
            svc.embed_blocking(vec!["q".into()]).unwrap();
            let t = Instant::now();
            rt.block_on(svc.embed_bulk(big.clone())).unwrap();
            took.push(t.elapsed());
        }
        assert!(took[0] < Duration::from_millis(300), "nobody waits: no rest, {:?}", took[0]);
        assert!(took[1] >= Duration::from_millis(300), "queries wait: a rest per pass, {:?}", took[1]);
    }

    #[test]
    fn batches_respect_padded_token_cap() {
        let cfg = EmbedServiceConfig { max_batch_tokens: 100, max_batch_texts: 8, ..Default::default() };
        let lens = [5, 10, 10, 20, 30, 60, 90];
        let plan = plan_batches(&lens, &cfg);
        for r in &plan {
            let longest = lens[r.end - 1];
            assert!(r.len() == 1 || r.len() * longest <= 100, "{r:?}");
        }
        assert_eq!(plan.iter().map(|r| r.len()).sum::<usize>(), lens.len());
        assert_eq!(plan.first().unwrap().start, 0);
    }

    #[test]
    fn results_come_back_in_input_order() {
        let (svc, _) =
            recorder(0, EmbedServiceConfig { max_batch_tokens: 6, max_batch_texts: 2, ..Default::default() });
        let texts: Vec<String> = ["ccc", "a", "bbbbb", "dd"].iter().map(|s| s.to_string()).collect();
        let out = svc.embed_blocking(texts.clone()).unwrap();
        for (t, v) in texts.iter().zip(&out) {
            assert_eq!(v[0] as usize, t.len());
            assert_eq!(v[1] as u8, t.as_bytes()[0]);
        }
    }
}
