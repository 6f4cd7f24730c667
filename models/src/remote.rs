//! Embedding through an embedding server (`[model] endpoint`): an OpenAI-compatible
//! `POST /v1/embeddings` or Hugging Face text-embeddings-inference's `POST /embed` — another ctxd
//! (`ctxd serve` answers both), a GPU host's TEI, a hosted API.
//!
//! The model is still named by `[model] name` and resolved locally for its tokenizer and
//! configuration (token budgets, the window, the vector size); its weights are not loaded. What
//! the index stores is the same as a local embedding would store: the same model id, vectors of
//! the configured size, unit length. The endpoint's model is checked on first contact (TEI's
//! `GET /info`, an OpenAI answer's `model`) against `[model] name`'s last path part, so an
//! endpoint serving another model is refused, not mixed into the index.
//!
//! A batch from the embedding service is cut into requests of `endpoint_batch` texts sent
//! `endpoint_in_flight` at a time. A request that fails for a reason that may pass (no
//! connection, a timeout, 429, 5xx) is retried with back-off (0.25 s doubling to 30 s) until it
//! succeeds: the pipeline waits — back-pressure pauses it, nothing is dropped — and each failed
//! try is counted (`ctxd_embed_endpoint_errors_total`) and logged. Any other answer (400, 401,
//! a wrong model, a malformed body) fails the batch with the endpoint's words.

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokenizers::Tokenizer;

use crate::embedder::Embedder;
use crate::error::ModelError;
use crate::loaded::LoadedModel;
use ctxd_choice::EndpointKind;

/// Where and how to reach an embedding server (the `[model] endpoint*` keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Base URL (`http://host:port`; a trailing `/v1/embeddings` or `/embed` is accepted).
    pub url: String,
    pub kind: EndpointKind,
    /// Texts per request.
    pub batch: usize,
    /// Requests in flight at once.
    pub in_flight: usize,
    /// Seconds a request may take before it is retried.
    pub timeout_secs: u64,
    /// Name of the environment variable holding a bearer token (empty: none is sent).
    pub token_env: String,
}

impl Endpoint {
    /// An endpoint with the default batching (32 texts, 4 in flight, 60 s): the `[model]`
    /// defaults.
    pub fn new(url: &str, kind: EndpointKind) -> Self {
        Self { url: url.into(), kind, batch: 32, in_flight: 4, timeout_secs: 60, token_env: String::new() }
    }

    /// The URL requests go to.
    pub fn request_url(&self) -> String {
        let base = self.url.trim_end_matches('/');
        let base = base.strip_suffix("/v1/embeddings").or_else(|| base.strip_suffix("/embed")).unwrap_or(base);
        match self.kind {
            EndpointKind::OpenAi => format!("{base}/v1/embeddings"),
            EndpointKind::Tei => format!("{base}/embed"),
        }
    }

    fn info_url(&self) -> String {
        let embed = self.request_url();
        format!("{}/info", embed.trim_end_matches("/embed"))
    }

    /// Checks the settings (URL scheme, sizes).
    pub fn validate(&self) -> Vec<String> {
        let mut errs = Vec::new();
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            errs.push(format!("endpoint {:?} must start with http:// or https://", self.url));
        }
        if self.batch == 0 || self.in_flight == 0 || self.timeout_secs == 0 {
            errs.push("endpoint_batch, endpoint_in_flight and endpoint_timeout_secs must be above 0".into());
        }
        errs
    }
}

/// Why one request failed.
enum Failure {
    /// Worth another try (no connection, timeout, 429, 5xx).
    Retry(String),
    /// Not worth another try.
    Fatal(String),
}

/// An [`Embedder`] whose forward pass is an embedding server's.
pub struct RemoteEmbedder {
    endpoint: Endpoint,
    agent: ureq::Agent,
    token: Option<String>,
    tokenizer: Tokenizer,
    model_id: String,
    /// The name the endpoint should report (`[model] name`'s last path part).
    served_name: String,
    dim: usize,
    checked: bool,
}

impl RemoteEmbedder {
    /// An embedder of `loaded`'s model through `endpoint` (no request is made yet).
    pub fn new(loaded: &LoadedModel, endpoint: Endpoint) -> Result<Self, ModelError> {
        if let Some(e) = endpoint.validate().into_iter().next() {
            return Err(ModelError::Runtime(e));
        }
        let token = (!endpoint.token_env.is_empty()).then(|| std::env::var(&endpoint.token_env).ok()).flatten();
        if !endpoint.token_env.is_empty() && token.is_none() {
            return Err(ModelError::Runtime(format!(
                "endpoint_token_env names {} but it is not set: export it, or set endpoint_token_env = \"\"",
                endpoint.token_env
            )));
        }
        let agent = ureq::AgentBuilder::new().timeout(Duration::from_secs(endpoint.timeout_secs)).build();
        let model_id = loaded.model_id();
        let served_name = model_id.rsplit('/').next().unwrap_or(&model_id).to_string();
        Ok(Self {
            agent,
            token,
            tokenizer: loaded.tokenizer()?,
            dim: loaded.dim()?,
            served_name,
            model_id,
            endpoint,
            checked: false,
        })
    }

    /// `request` with the bearer token, where one is configured.
    fn authorized(&self, request: ureq::Request) -> ureq::Request {
        match &self.token {
            Some(token) => request.set("Authorization", &format!("Bearer {token}")),
            None => request,
        }
    }

    fn error(&self, message: String) -> ModelError {
        ModelError::Endpoint { url: self.endpoint.request_url(), message }
    }

    /// One request, answered or failed.
    fn post(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, Failure> {
        let body = match self.endpoint.kind {
            EndpointKind::OpenAi => json!({ "model": self.model_id, "input": texts }),
            EndpointKind::Tei => json!({ "inputs": texts, "normalize": true, "truncate": true }),
        };
        let request = self.authorized(self.agent.post(&self.endpoint.request_url()));
        let answer: Value = match request.send_json(body) {
            Ok(response) => response.into_json().map_err(|e| Failure::Retry(format!("reading the answer: {e}")))?,
            Err(ureq::Error::Status(code, response)) => {
                let text = response.into_string().unwrap_or_default();
                let text = text.chars().take(300).collect::<String>();
                return Err(if code == 429 || code == 408 || code >= 500 {
                    Failure::Retry(format!("HTTP {code}: {text}"))
                } else {
                    Failure::Fatal(format!("HTTP {code}: {text}"))
                });
            }
            Err(e) => return Err(Failure::Retry(e.to_string())),
        };
        let vectors =
            parse_answer(self.endpoint.kind, &answer, texts.len(), &self.served_name).map_err(Failure::Fatal)?;
        if let Some(v) = vectors.iter().find(|v| v.len() != self.dim) {
            return Err(Failure::Fatal(format!(
                "vectors of {} numbers, but model {} has {}: the endpoint serves another model",
                v.len(),
                self.model_id,
                self.dim
            )));
        }
        Ok(vectors.into_iter().map(unit).collect())
    }

    /// One request, retried with back-off while its failure may pass.
    fn post_until_answered(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let (mut wait, started) = (Duration::from_millis(250), Instant::now());
        loop {
            match self.post(texts) {
                Ok(v) => return Ok(v),
                Err(Failure::Fatal(message)) => return Err(self.error(message)),
                Err(Failure::Retry(message)) => {
                    metrics::counter!(crate::metrics::EMBED_ENDPOINT_ERRORS_TOTAL, "kind" => self.endpoint.kind.as_str())
                        .increment(1);
                    tracing::warn!(
                        url = %self.endpoint.request_url(), waited_s = started.elapsed().as_secs(),
                        "embedding endpoint failed ({message}); retrying in {:.2} s (indexing waits, nothing is dropped)",
                        wait.as_secs_f64()
                    );
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_secs(30));
                }
            }
        }
    }

    /// TEI's `GET /info` names the model it serves: checked once.
    fn check_model(&mut self) -> Result<(), ModelError> {
        if self.checked || self.endpoint.kind != EndpointKind::Tei {
            return Ok(());
        }
        let request = self.authorized(self.agent.get(&self.endpoint.info_url()));
        // An endpoint that is down is waited for by the first request; one without /info
        // (some TEI-compatible servers) is taken at its word.
        if let Ok(info) =
            request.call().map_err(|e| e.to_string()).and_then(|r| r.into_json::<Value>().map_err(|e| e.to_string()))
        {
            let served = info["model_id"].as_str().unwrap_or_default();
            if !served.is_empty() && !same_model(served, &self.served_name) {
                return Err(self.error(format!(
                    "it serves model {served}, but [model] name is {} (the index's model): point it at that model \
                     or change [model] name (which re-embeds the index)",
                    self.model_id
                )));
            }
            self.checked = true;
        }
        Ok(())
    }

    /// One request and no retry — whether the endpoint answers now, with the configured model
    /// and vector size (what `ctxd doctor` reports; the embedder itself waits for an endpoint).
    pub fn probe(&mut self) -> Result<(), ModelError> {
        self.check_model()?;
        match self.post(&["ctxd doctor".to_string()]) {
            Ok(_) => Ok(()),
            Err(Failure::Retry(message) | Failure::Fatal(message)) => Err(self.error(message)),
        }
    }

    /// Embeds `texts` through the endpoint: requests of `batch` texts, `in_flight` at once.
    fn embed_remote(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.check_model()?;
        let chunks: Vec<&[String]> = texts.chunks(self.endpoint.batch).collect();
        let mut out = Vec::with_capacity(texts.len());
        for wave in chunks.chunks(self.endpoint.in_flight) {
            let this = &*self;
            let answers: Vec<Result<Vec<Vec<f32>>, ModelError>> = std::thread::scope(|s| {
                let handles: Vec<_> = wave.iter().map(|part| s.spawn(move || this.post_until_answered(part))).collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err(this.error("a request thread panicked".into()))))
                    .collect()
            });
            for answer in answers {
                out.extend(answer?);
            }
        }
        Ok(out)
    }
}

/// Whether two model names name the same model: `org/name`, `name` alone, or a path ending in
/// it (the last path parts are compared). Also what `ctxd serve`'s embedding routes check a
/// client's `model` with.
pub fn same_model(a: &str, b: &str) -> bool {
    let last = |s: &str| s.trim_end_matches('/').rsplit('/').next().unwrap_or_default().to_string();
    last(a) == last(b)
}

/// The vectors of an answer, in input order.
fn parse_answer(kind: EndpointKind, answer: &Value, expected: usize, name: &str) -> Result<Vec<Vec<f32>>, String> {
    let floats =
        |v: &Value| -> Option<Vec<f32>> { v.as_array()?.iter().map(|x| x.as_f64().map(|f| f as f32)).collect() };
    let vectors: Vec<Vec<f32>> = match kind {
        EndpointKind::Tei => answer
            .as_array()
            .ok_or("expected a JSON array of vectors")?
            .iter()
            .map(|v| floats(v).ok_or("a vector is not an array of numbers"))
            .collect::<Result<_, _>>()?,
        EndpointKind::OpenAi => {
            let served = answer["model"].as_str().unwrap_or_default();
            if !served.is_empty() && !same_model(served, name) {
                return Err(format!("it answered with model {served}, but [model] name is {name}"));
            }
            let data = answer["data"].as_array().ok_or("expected {\"data\": [...]}")?;
            let mut items: Vec<(usize, Vec<f32>)> = data
                .iter()
                .enumerate()
                .map(|(i, d)| {
                    let index = d["index"].as_u64().map_or(i, |x| x as usize);
                    floats(&d["embedding"]).map(|v| (index, v)).ok_or("an embedding is not an array of numbers")
                })
                .collect::<Result<_, _>>()?;
            items.sort_by_key(|(i, _)| *i);
            items.into_iter().map(|(_, v)| v).collect()
        }
    };
    if vectors.len() != expected {
        return Err(format!("{} vectors for {expected} texts", vectors.len()));
    }
    Ok(vectors)
}

/// `v` scaled to unit length (as a local embedding is; TEI normalises, OpenAI-style servers may not).
fn unit(mut v: Vec<f32>) -> Vec<f32> {
    crate::embedder::scale_to_unit(&mut v);
    v
}

impl Embedder for RemoteEmbedder {
    crate::embedder::identity_from_fields!();

    fn forward(&mut self, ids: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, ModelError> {
        // The endpoint takes texts: token ids are decoded back (the service sends texts to
        // `forward_texts`; this serves callers that tokenized themselves).
        let texts = ids
            .iter()
            .map(|row| self.tokenizer.decode(row, true).map_err(|e| ModelError::Encode(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        self.embed_remote(&texts)
    }

    fn takes_texts(&self) -> bool {
        true
    }

    fn has_token_states(&self) -> bool {
        false
    }

    fn forward_texts(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.embed_remote(texts)
    }

    fn embed(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.embed_remote(texts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_follow_the_kind_and_accept_a_full_path() {
        let e = Endpoint::new("http://h:8080/", EndpointKind::OpenAi);
        assert_eq!(e.request_url(), "http://h:8080/v1/embeddings");
        let e = Endpoint::new("http://h:8080/v1/embeddings", EndpointKind::OpenAi);
        assert_eq!(e.request_url(), "http://h:8080/v1/embeddings");
        let e = Endpoint::new("https://h/embed", EndpointKind::Tei);
        assert_eq!(e.request_url(), "https://h/embed");
        assert_eq!(e.info_url(), "https://h/info");
        assert!(!Endpoint::new("h:80", EndpointKind::Tei).validate().is_empty());
    }

    #[test]
    fn answers_are_read_in_input_order_and_checked() {
        let openai = json!({"model": "all-MiniLM-L6-v2", "data": [
            {"index": 1, "embedding": [0.0, 2.0]}, {"index": 0, "embedding": [3.0, 4.0]}]});
        let v = parse_answer(EndpointKind::OpenAi, &openai, 2, "all-MiniLM-L6-v2").unwrap();
        assert_eq!(v, vec![vec![3.0, 4.0], vec![0.0, 2.0]]);
        let other = json!({"model": "text-embedding-3-small", "data": []});
        let err = parse_answer(EndpointKind::OpenAi, &other, 0, "all-MiniLM-L6-v2").unwrap_err();
        assert!(err.contains("text-embedding-3-small"), "{err}");
        let tei = json!([[1.0, 0.0]]);
        assert!(parse_answer(EndpointKind::Tei, &tei, 2, "m").unwrap_err().contains("1 vectors for 2 texts"));
        assert_eq!(unit(vec![3.0, 4.0]), vec![0.6, 0.8]);
        assert!(same_model("sentence-transformers/all-MiniLM-L6-v2", "all-MiniLM-L6-v2"));
        assert!(!same_model("BAAI/bge-small-en", "all-MiniLM-L6-v2"));
        // As `ctxd serve` checks a client's `model`: with or without the organisation.
        assert!(same_model("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"));
        assert!(same_model("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"));
        assert!(!same_model("text-embedding-3-small", "sentence-transformers/all-MiniLM-L6-v2"));
    }
}
