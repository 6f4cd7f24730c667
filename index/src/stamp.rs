//! Which index version an answer read and how fresh it is — the `"index"` field of search,
//! context and locate answers: `{"version", "committed_at", "changed_since"}`.
//!
//! `version` and `committed_at` (the commit's time, RFC 3339, from the version's manifest, so no
//! listing of versions) come from the index; `changed_since` — files of the sources changed since
//! that commit and not yet in it — only a process that runs the pipeline knows (a daemon's writer:
//! the files its watcher has seen and not committed yet). It is absent elsewhere (a one-shot CLI
//! query, a reader process, an `as_of` answer), meaning unknown, not zero.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::IndexError;
use crate::reader::Reads;

/// The index an answer read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct IndexStamp {
    pub version: u64,
    /// When that version was committed (RFC 3339, UTC, milliseconds).
    pub committed_at: String,
    /// Files changed in the sources since that commit, where the answering process knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_since: Option<u64>,
}

/// Counts the files changed since the last commit (a daemon's pipeline: in flight, not committed).
pub type ChangedSince = Arc<dyn Fn() -> u64 + Send + Sync>;

impl IndexStamp {
    /// One line for an agent when the answer may miss recent edits (`changed_since` > 0), else
    /// `None`.
    pub fn stale_note(&self) -> Option<String> {
        match self.changed_since {
            Some(n) if n > 0 => Some(format!(
                "note: {n} file{} changed since this index version ({}, committed {}) and {} not in it yet; \
                 answers may miss those edits",
                if n == 1 { "" } else { "s" },
                self.version,
                self.committed_at,
                if n == 1 { "is" } else { "are" },
            )),
            _ => None,
        }
    }
}

impl Reads<'_> {
    /// The version this handle reads and its commit time (`changed_since` unknown).
    pub async fn stamp(self) -> Result<IndexStamp, IndexError> {
        let table = self.index.table();
        let version = table.version().await.map_err(|e| self.index.lance(e))?;
        let committed_at = match table.as_native() {
            Some(native) => {
                let manifest = native.manifest().await.map_err(|e| self.index.lance(e))?;
                manifest.timestamp().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            }
            None => String::new(),
        };
        Ok(IndexStamp { version, committed_at, changed_since: None })
    }
}

#[cfg(test)]
mod tests {
    use super::IndexStamp;

    #[test]
    fn a_stale_answer_says_so_in_one_line_and_a_fresh_or_unknown_one_does_not() {
        let mut s = IndexStamp { version: 12, committed_at: "2026-11-27T01:00:00.000Z".into(), changed_since: Some(3) };
        let note = s.stale_note().unwrap();
        assert!(note.contains("3 files changed") && note.contains("12") && note.contains("are not in it"), "{note}");
        assert!(!note.contains('\n'));
        s.changed_since = Some(1);
        assert!(s.stale_note().unwrap().contains("1 file changed since"));
        s.changed_since = Some(0);
        assert_eq!(s.stale_note(), None);
        s.changed_since = None;
        assert_eq!(s.stale_note(), None);
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json, serde_json::json!({"version": 12, "committed_at": "2026-11-27T01:00:00.000Z"}));
    }
}
