//! Poll-now triggers of git sources: the webhook endpoint (`POST /v1/sources/<name>/poll`)
//! wakes a git source's poll loop instead of waiting for `poll_interval_secs`.
//!
//! One registry per process, keyed by source name, outliving the pipeline generations a model
//! switch restarts: a source's task takes its trigger when it starts ([`for_source`]); the wire
//! pokes by name ([`poke`]). A poke while a poll runs is kept (a stored permit), so the push
//! that lands mid-poll is read right after it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use tokio::sync::Notify;

fn registry() -> &'static Mutex<HashMap<String, Arc<Notify>>> {
    static TRIGGERS: OnceLock<Mutex<HashMap<String, Arc<Notify>>>> = OnceLock::new();
    TRIGGERS.get_or_init(Default::default)
}

/// The trigger of git source `name` (created on first use).
pub(crate) fn for_source(name: &str) -> Arc<Notify> {
    let mut map = registry().lock().unwrap_or_else(|e| e.into_inner());
    map.entry(name.to_string()).or_default().clone()
}

/// Wakes git source `name`; false when no git source of that name runs in this process.
pub fn poke(name: &str) -> bool {
    let map = registry().lock().unwrap_or_else(|e| e.into_inner());
    match map.get(name) {
        Some(n) => {
            n.notify_one();
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_poke_wakes_the_source_even_when_it_lands_first() {
        assert!(!poke("not-a-source"));
        let t = for_source("lib");
        assert!(poke("lib"));
        tokio::time::timeout(std::time::Duration::from_secs(1), t.notified()).await.expect("the stored poke wakes it");
    }
}
