//! Bearer-token authentication of the HTTP API, the MCP HTTP transport and Arrow Flight, and
//! which sources each token may read.
//!
//! Off unless a token is configured: `CTXD_AUTH_TOKEN` or `[server] auth_token_file` (one token
//! that reads everything), and/or `[server] source_tokens_file` (tokens limited to some named
//! sources, [`SourceTokens`]). When any is set, every request but `GET /healthz` (liveness
//! probes carry no secrets) must send `Authorization: Bearer <token>`; anything else is
//! answered 401 with `WWW-Authenticate: Bearer` (Flight: `UNAUTHENTICATED`). Tokens are
//! compared in constant time. Failures are counted in `ctxd_auth_failures_total`.
//!
//! An accepted request carries its [`Caller`] (as a request extension): the sources its token
//! may read (`None`: all). Handlers narrow every request to them (`ctxd_search::sources`); a
//! request naming another source is answered 403. `/metrics` and `/v1/sessions` are for
//! operators: only a token that reads every source may read them.

use std::sync::Arc;

use ctxd_index::scope::SourceScope;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::metrics as m;

/// The configured token (cheap to clone).
#[derive(Clone)]
pub struct Token(Arc<[u8]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// A token from its text (surrounding whitespace, e.g. a file's final newline, dropped).
    /// `None` for an empty text.
    pub fn new(text: &str) -> Option<Self> {
        let t = text.trim();
        (!t.is_empty()).then(|| Self(t.as_bytes().into()))
    }

    /// True when `header_value` is `Bearer <this token>`.
    pub fn accepts(&self, header_value: Option<&str>) -> bool {
        let Some(given) = header_value.and_then(|v| v.strip_prefix("Bearer ")) else { return false };
        constant_time_eq(given.trim().as_bytes(), &self.0)
    }
}

/// Whether `a` equals `b`, in a time that depends on their lengths only (tokens, webhook
/// signatures).
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who is asking: the sources the request's token may read (`None`: every source; also
/// the caller of a server without tokens).
#[derive(Debug, Clone, Default)]
pub struct Caller {
    pub sources: Option<SourceScope>,
}

/// Every accepted token with the sources it may read (cheap to clone).
#[derive(Clone, Default)]
pub struct Auth(Arc<Vec<(Token, Option<SourceScope>)>>);

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Auth({} tokens)", self.0.len())
    }
}

impl Auth {
    /// The tokens: `full` reads everything; each of `limited` its sources.
    pub fn new(full: Option<Token>, limited: Vec<(Token, SourceScope)>) -> Option<Self> {
        let mut all: Vec<(Token, Option<SourceScope>)> = full.into_iter().map(|t| (t, None)).collect();
        all.extend(limited.into_iter().map(|(t, s)| (t, Some(s))));
        (!all.is_empty()).then(|| Self(Arc::new(all)))
    }

    /// One token that reads everything.
    pub fn single(token: Token) -> Self {
        Self(Arc::new(vec![(token, None)]))
    }

    /// The caller an `Authorization` header value authenticates, if any. Every token is
    /// compared (in constant time each), so the time taken does not tell which one matched.
    pub fn caller(&self, header_value: Option<&str>) -> Option<Caller> {
        let mut found = None;
        for (token, sources) in self.0.iter() {
            if token.accepts(header_value) && found.is_none() {
                found = Some(Caller { sources: sources.clone() });
            }
        }
        found
    }
}

/// `[server] source_tokens_file`: tokens limited to named sources, one `[[token]]` each.
///
/// ```toml
/// [[token]]
/// token = "d0cs-team-5ecret"      # the bearer token (≥ 16 characters)
/// sources = ["docs", "web"]       # the named sources it may read
/// ```
pub struct SourceTokens;

/// Why a `source_tokens_file` was refused.
#[derive(Debug, thiserror::Error)]
pub enum SourceTokensError {
    /// Not TOML of the expected shape.
    #[error("{}", .0.to_string().trim().replace('\n', " "))]
    Toml(#[source] toml::de::Error),
    /// Entries that cannot be used, each with its number.
    #[error("{}", .0.join("; "))]
    Entries(Vec<String>),
}

impl SourceTokens {
    /// Parses the file's text; every problem (with the entry's number) in one error.
    pub fn parse(text: &str, known: &[String]) -> Result<Vec<(Token, SourceScope)>, SourceTokensError> {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Entry {
            token: String,
            sources: Vec<String>,
        }
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        struct File {
            #[serde(default)]
            token: Vec<Entry>,
        }
        let file: File = toml::from_str(text).map_err(SourceTokensError::Toml)?;
        let mut out = Vec::new();
        let mut problems = Vec::new();
        for (i, e) in file.token.into_iter().enumerate() {
            let n = i + 1;
            if e.token.trim().len() < 16 {
                problems.push(format!("token {n}: a token must be at least 16 characters"));
                continue;
            }
            if e.sources.is_empty() {
                problems.push(format!("token {n}: `sources` is empty (list the sources it may read)"));
                continue;
            }
            if let Some(bad) = e.sources.iter().find(|s| !known.contains(s)) {
                problems.push(format!("token {n}: unknown source '{bad}' (configured: {})", known.join(", ")));
                continue;
            }
            let Some(token) = Token::new(&e.token) else { continue };
            out.push((token, SourceScope::new(e.sources)));
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(SourceTokensError::Entries(problems))
        }
    }
}

/// The caller a request with `headers` is (every source when no token is configured), or the
/// answer to a request without a valid token: 401 with `WWW-Authenticate: Bearer`, counted.
pub(crate) fn authenticate(auth: Option<&Auth>, headers: &axum::http::HeaderMap) -> Result<Caller, Response> {
    let Some(auth) = auth else { return Ok(Caller::default()) };
    let given = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    auth.caller(given).ok_or_else(|| {
        metrics::counter!(m::AUTH_FAILURES_TOTAL, "transport" => "http").increment(1);
        let body = axum::Json(serde_json::json!({ "error": "missing or wrong bearer token" }));
        (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
    })
}

/// Routes for operators: they tell about every source at once (`/metrics`' counts, the live
/// sessions' citations), so only a token that reads every source gets them.
const OPERATOR_ROUTES: [&str; 2] = ["/metrics", "/v1/sessions"];

/// axum middleware: lets `/healthz` and authenticated requests through, each with its
/// [`Caller`]; [`OPERATOR_ROUTES`] only with a token that reads every source. (A git host's
/// signed webhook, which carries no bearer token, is routed outside this layer: `crate::webhook`.)
pub async fn require_bearer(State(auth): State<Option<Auth>>, mut req: Request, next: Next) -> Response {
    if auth.is_some() && req.uri().path() == "/healthz" {
        return next.run(req).await;
    }
    match authenticate(auth.as_ref(), req.headers()) {
        Ok(caller) if caller.sources.is_some() && OPERATOR_ROUTES.contains(&req.uri().path()) => {
            let body = axum::Json(serde_json::json!({
                "error": format!("{} is for operators: ask with a token that reads every source", req.uri().path())
            }));
            (StatusCode::FORBIDDEN, body).into_response()
        }
        Ok(caller) => {
            req.extensions_mut().insert(caller);
            next.run(req).await
        }
        Err(refused) => refused,
    }
}

/// tonic interceptor for Arrow Flight (metadata `authorization: Bearer <token>`); an accepted
/// request carries its [`Caller`] as an extension.
pub fn flight_interceptor(
    auth: Option<Auth>,
) -> impl FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Clone {
    move |mut req: tonic::Request<()>| {
        let Some(auth) = &auth else {
            req.extensions_mut().insert(Caller::default());
            return Ok(req);
        };
        let given = req.metadata().get("authorization").and_then(|v| v.to_str().ok());
        match auth.caller(given) {
            Some(caller) => {
                req.extensions_mut().insert(caller);
                Ok(req)
            }
            None => {
                metrics::counter!(m::AUTH_FAILURES_TOTAL, "transport" => "flight").increment(1);
                Err(tonic::Status::unauthenticated("missing or wrong bearer token"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_exact_bearer_token_is_accepted() {
        let t = Token::new("s3cret\n").unwrap();
        assert!(t.accepts(Some("Bearer s3cret")));
        assert!(!t.accepts(Some("Bearer s3cre")));
        assert!(!t.accepts(Some("Bearer s3cret2")));
        assert!(!t.accepts(Some("Basic s3cret")));
        assert!(!t.accepts(Some("s3cret")));
        assert!(!t.accepts(None));
        assert!(Token::new("  \n").is_none());
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
    }

    #[test]
    fn source_tokens_map_each_token_to_its_sources() {
        let known = vec!["api".to_string(), "docs".to_string()];
        let text = "[[token]]\ntoken = \"docs-team-0123456789\"\nsources = [\"docs\"]\n";
        let tokens = SourceTokens::parse(text, &known).unwrap();
        let auth = Auth::new(Token::new("admin-0123456789abcdef"), tokens).unwrap();
        let docs = auth.caller(Some("Bearer docs-team-0123456789")).unwrap();
        assert_eq!(docs.sources.unwrap().names(), ["docs"]);
        assert!(auth.caller(Some("Bearer admin-0123456789abcdef")).unwrap().sources.is_none());
        assert!(auth.caller(Some("Bearer nope")).is_none());
        let bad = SourceTokens::parse("[[token]]\ntoken = \"short\"\nsources = [\"web\"]\n[[token]]\ntoken = \"long-enough-0123456\"\nsources = [\"web\"]\n", &known)
            .unwrap_err()
            .to_string();
        assert!(bad.contains("token 1") && bad.contains("unknown source 'web'"), "{bad}");
    }
}
