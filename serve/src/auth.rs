//! Bearer-token authentication of the HTTP API, the MCP HTTP transport and Arrow Flight.
//!
//! Off unless a token is configured (`CTXD_AUTH_TOKEN`, or `[server] auth_token_file`). When
//! set, every request but `GET /healthz` (liveness probes carry no secrets) must send
//! `Authorization: Bearer <token>`; anything else is answered 401 with
//! `WWW-Authenticate: Bearer` (Flight: `UNAUTHENTICATED`). Tokens are compared in constant
//! time. Failures are counted in `ctxd_auth_failures_total`.

use std::sync::Arc;

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

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// axum middleware: lets `/healthz` and authenticated requests through.
pub async fn require_bearer(State(token): State<Option<Token>>, req: Request, next: Next) -> Response {
    let Some(token) = token else { return next.run(req).await };
    if req.uri().path() == "/healthz" {
        return next.run(req).await;
    }
    let given = req.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if token.accepts(given) {
        return next.run(req).await;
    }
    metrics::counter!(m::AUTH_FAILURES_TOTAL, "transport" => "http").increment(1);
    let body = axum::Json(serde_json::json!({ "error": "missing or wrong bearer token" }));
    (StatusCode::UNAUTHORIZED, [(header::WWW_AUTHENTICATE, "Bearer")], body).into_response()
}

/// tonic interceptor for Arrow Flight (metadata `authorization: Bearer <token>`).
pub fn flight_interceptor(
    token: Option<Token>,
) -> impl FnMut(tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> + Clone {
    move |req: tonic::Request<()>| {
        let Some(token) = &token else { return Ok(req) };
        let given = req.metadata().get("authorization").and_then(|v| v.to_str().ok());
        if token.accepts(given) {
            Ok(req)
        } else {
            metrics::counter!(m::AUTH_FAILURES_TOTAL, "transport" => "flight").increment(1);
            Err(tonic::Status::unauthenticated("missing or wrong bearer token"))
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
}
