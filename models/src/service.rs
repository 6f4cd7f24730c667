//! The embedding service: an [`Embedder`] on its own OS thread behind a bounded channel.
//!
//! Async callers send a request (a list of texts) and await the reply; the model thread never
//! touches the async runtime, and the async runtime never runs a forward pass. Inside a request
//! the texts are sorted by token length and cut into sub-batches whose *padded* size
//! (`texts × longest`) stays under `max_batch_tokens`, so short chunks are not padded to the
//! length of long ones.

use std::time::Instant;

use tokio::sync::{mpsc, oneshot};

use crate::{metrics as m, Embedder, ModelError};

/// Tuning of the embedding service.
#[derive(Debug, Clone)]
pub struct EmbedServiceConfig {
    /// Cap on padded tokens per forward pass.
    pub max_batch_tokens: usize,
    /// Cap on texts per forward pass.
    pub max_batch_texts: usize,
    /// Pending requests before callers wait (back-pressure).
    pub queue: usize,
}

impl Default for EmbedServiceConfig {
    fn default() -> Self {
        Self { max_batch_tokens: 8192, max_batch_texts: 64, queue: 4 }
    }
}

type Reply = oneshot::Sender<Result<Vec<Vec<f32>>, ModelError>>;

struct Job {
    texts: Vec<String>,
    /// Token embeddings ([`Embedder::forward_tokens`]) instead of pooled vectors.
    tokens: bool,
    reply: Reply,
}

/// Handle to the model thread. Cloning shares the same thread.
#[derive(Clone)]
pub struct EmbedService {
    tx: mpsc::Sender<Job>,
    model_id: String,
    dim: usize,
    backend: String,
}

/// Splits indices sorted by length into runs whose padded size stays under the caps.
/// Returns ranges into `order`.
pub fn plan_batches(lens_sorted: &[usize], cfg: &EmbedServiceConfig) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &len) in lens_sorted.iter().enumerate() {
        let count = i - start + 1;
        // Sorted ascending, so the current element is the longest of the run.
        let padded = count * len.max(1);
        if count > 1 && (padded > cfg.max_batch_tokens || count > cfg.max_batch_texts) {
            out.push(start..i);
            start = i;
        }
    }
    if start < lens_sorted.len() {
        out.push(start..lens_sorted.len());
    }
    out
}

fn run_job<E: Embedder>(
    embedder: &mut E,
    cfg: &EmbedServiceConfig,
    texts: Vec<String>,
    tokens: bool,
) -> Result<Vec<Vec<f32>>, ModelError> {
    let ids = embedder.encode(&texts)?;
    let lens: Vec<usize> = ids.iter().map(Vec::len).collect();
    let mut order: Vec<usize> = (0..texts.len()).collect();
    order.sort_by_key(|&i| lens[i]);
    let sorted_lens: Vec<usize> = order.iter().map(|&i| lens[i]).collect();
    let mut out: Vec<Option<Vec<f32>>> = vec![None; texts.len()];
    for range in plan_batches(&sorted_lens, cfg) {
        let idx = &order[range.clone()];
        let batch: Vec<Vec<u32>> = idx.iter().map(|&i| ids[i].clone()).collect();
        let started = Instant::now();
        let vectors = if tokens { embedder.forward_tokens(&batch)? } else { embedder.forward(&batch)? };
        if vectors.len() != batch.len() {
            return Err(ModelError::Count { expected: batch.len(), got: vectors.len() });
        }
        let real: usize = sorted_lens[range.clone()].iter().sum();
        let padded = embedder.padded_tokens(&sorted_lens[range.clone()]);
        let secs = started.elapsed().as_secs_f64();
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
    Ok(out.into_iter().map(|v| v.unwrap_or_default()).collect())
}

impl EmbedService {
    /// Moves `embedder` onto a new thread named `ctxd-embed` and returns a handle to it.
    /// The thread ends when every handle is dropped.
    pub fn spawn<E: Embedder>(mut embedder: E, cfg: EmbedServiceConfig) -> Self {
        let (tx, mut rx) = mpsc::channel::<Job>(cfg.queue.max(1));
        let model_id = embedder.model_id().to_string();
        let dim = embedder.dim();
        std::thread::Builder::new()
            .name("ctxd-embed".into())
            .spawn(move || {
                while let Some(job) = rx.blocking_recv() {
                    let result = run_job(&mut embedder, &cfg, job.texts, job.tokens);
                    let _ = job.reply.send(result);
                }
            })
            .expect("spawning the embedding thread");
        Self { tx, model_id, dim, backend: "custom".into() }
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

    /// Model id of the embedder behind this service.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Embeds `texts` on the model thread; waits (asynchronously) when the queue is full.
    pub async fn embed(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        self.request(texts, false).await
    }

    /// Token embeddings of `texts` ([`Embedder::forward_tokens`]: one `tokens × dim` matrix
    /// of unit rows per text), on the model thread like [`EmbedService::embed`].
    pub async fn embed_tokens(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        self.request(texts, true).await
    }

    async fn request(&self, texts: Vec<String>, tokens: bool) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, rx) = oneshot::channel();
        self.tx.send(Job { texts, tokens, reply }).await.map_err(|_| ModelError::ServiceClosed)?;
        rx.await.map_err(|_| ModelError::ServiceClosed)?
    }

    /// Blocking variant for non-async callers (benchmarks, CLI helpers). Never call it from
    /// inside the async runtime.
    pub fn embed_blocking(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, rx) = oneshot::channel();
        self.tx.blocking_send(Job { texts, tokens: false, reply }).map_err(|_| ModelError::ServiceClosed)?;
        rx.blocking_recv().map_err(|_| ModelError::ServiceClosed)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake embedder: vector = [len, first byte, 1], normalised.
    struct Fake;
    impl Embedder for Fake {
        fn model_id(&self) -> &str {
            "fake"
        }
        fn dim(&self) -> usize {
            3
        }
        fn encode(&self, texts: &[String]) -> Result<Vec<Vec<u32>>, ModelError> {
            Ok(texts.iter().map(|t| t.bytes().map(u32::from).collect()).collect())
        }
        fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
            Ok(ids.iter().map(|t| vec![t.len() as f32, t.first().copied().unwrap_or(0) as f32, 1.0]).collect())
        }
    }

    #[test]
    fn batches_respect_padded_token_cap() {
        let cfg = EmbedServiceConfig { max_batch_tokens: 100, max_batch_texts: 8, queue: 1 };
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
        let svc = EmbedService::spawn(Fake, EmbedServiceConfig { max_batch_tokens: 6, max_batch_texts: 2, queue: 1 });
        let texts: Vec<String> = ["ccc", "a", "bbbbb", "dd"].iter().map(|s| s.to_string()).collect();
        let out = svc.embed_blocking(texts.clone()).unwrap();
        for (t, v) in texts.iter().zip(&out) {
            assert_eq!(v[0] as usize, t.len());
            assert_eq!(v[1] as u8, t.as_bytes()[0]);
        }
    }
}
