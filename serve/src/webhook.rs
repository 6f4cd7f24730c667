//! `POST /v1/sources/{name}/poll`: a git source reads its refs now instead of at its next
//! poll — the URL a git host's push webhook calls.
//!
//! Who may call it: with `[server] webhook_secret_file`, a request that carries GitHub's
//! `X-Hub-Signature-256` (`sha256=` and the HMAC-SHA256 of the body under the secret) or
//! GitLab's `X-Gitlab-Token` (the secret itself) is checked against the secret (compared in
//! constant time) and needs no bearer token: git hosts cannot send one. So the route is mounted
//! outside the bearer middleware and checks a request without a signature itself
//! ([`crate::auth::authenticate`]): it needs the bearer token like any route, and a token limited
//! to some sources may poke only those. The body (the host's push event) is not read beyond the signature: the poll resolves
//! every configured ref of the source itself.
//!
//! Answers: 202 `{"source","polling":true}`; 404 for a name that is no git source; 401 for a
//! bad signature or token; 403 for a token without that source.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use hmac::{KeyInit, Mac};

use crate::auth::{authenticate, constant_time_eq};
use crate::reply::error;
use crate::state::AppState;

/// The headers of a git host's webhook.
pub(crate) const SIGNATURE_HEADERS: [&str; 2] = ["x-hub-signature-256", "x-gitlab-token"];

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether the headers sign `body` with `secret` (GitHub's HMAC or GitLab's token).
pub(crate) fn signed(secret: &str, headers: &HeaderMap, body: &[u8]) -> bool {
    if let Some(sig) = headers.get("x-hub-signature-256").and_then(|v| v.to_str().ok()) {
        let Ok(mut mac) = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()) else { return false };
        mac.update(body);
        let want = format!("sha256={}", hex(&mac.finalize().into_bytes()));
        return constant_time_eq(want.as_bytes(), sig.trim().as_bytes());
    }
    if let Some(token) = headers.get("x-gitlab-token").and_then(|v| v.to_str().ok()) {
        return constant_time_eq(secret.as_bytes(), token.trim().as_bytes());
    }
    false
}

/// The handler (mounted outside the bearer middleware: it authenticates what is not signed).
pub(crate) async fn poll_handler(
    State(state): State<AppState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let webhook = SIGNATURE_HEADERS.iter().any(|h| headers.contains_key(*h));
    match (&state.webhook_secret, webhook) {
        (Some(secret), true) => {
            if !signed(secret, &headers, &body) {
                metrics::counter!(crate::metrics::AUTH_FAILURES_TOTAL, "transport" => "webhook").increment(1);
                return error(
                    StatusCode::UNAUTHORIZED,
                    "the webhook's signature does not match server.webhook_secret_file".into(),
                );
            }
        }
        _ => {
            let caller = match authenticate(state.auth.as_ref(), &headers) {
                Ok(caller) => caller,
                Err(refused) => return refused,
            };
            if caller.sources.as_ref().is_some_and(|a| !a.contains(&name)) {
                return error(StatusCode::FORBIDDEN, format!("this token may not read source '{name}'"));
            }
        }
    }
    if !state.access.get().git.iter().any(|(g, _)| *g == name) {
        return error(StatusCode::NOT_FOUND, format!("'{name}' is not a git source of this daemon"));
    }
    let Some(poke) = &state.poll else {
        return error(
            StatusCode::NOT_FOUND,
            "this server runs no sources (a reader): send the webhook to the writer".into(),
        );
    };
    if !poke(&name) {
        return error(StatusCode::SERVICE_UNAVAILABLE, format!("git source '{name}' is not running yet; retry"));
    }
    (StatusCode::ACCEPTED, Json(serde_json::json!({"source": name, "polling": true}))).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_and_gitlab_signatures() {
        let mut h = HeaderMap::new();
        // GitHub's documented example: secret "It's a Secret to Everybody", body "Hello, World!".
        h.insert(
            "x-hub-signature-256",
            "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17".parse().unwrap(),
        );
        assert!(signed("It's a Secret to Everybody", &h, b"Hello, World!"));
        assert!(!signed("It's a Secret to Everybody", &h, b"Hello, World?"));
        assert!(!signed("another secret", &h, b"Hello, World!"));
        let mut g = HeaderMap::new();
        g.insert("x-gitlab-token", "s3cret-s3cret-s3cret".parse().unwrap());
        assert!(signed("s3cret-s3cret-s3cret", &g, b"{}") && !signed("s3cret-s3cret-s3creT", &g, b"{}"));
        assert!(!signed("x", &HeaderMap::new(), b""));
    }
}
