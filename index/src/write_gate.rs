//! One process's writes to a database take turns: its commits and its own upkeep never race.
//!
//! A daemon commits from its pipeline while its maintenance task compacts fragments, folds
//! and merges the full-text index and tidies the side tables — all of them commits of the same
//! tables. LanceDB resolves some concurrent commits by rebasing, but not these: a compaction's
//! `Rewrite` of fragments that a concurrent `Update` (a file replaced: its old rows deleted)
//! touched, or two `CreateIndex` commits of the full-text index, fail with a "retryable commit
//! conflict". Under a steady stream of edits the upkeep then lost every time (`benches/soak.py`,
//! two commits a second: all 4 passes of an 11-minute run failed, and fragments, index segments,
//! versions, open files and memory kept growing). Retrying only loses again while edits
//! keep coming.
//!
//! So every write to a database from this process holds its gate, one per database URI,
//! shared by every handle opened on it: a commit ([`crate::writer::Writes::commit`]), a
//! compaction, an index fold or merge, a side table's upkeep. A long step the writer need not
//! wait for — building the vector index, which commits rebase past — does not take it. The
//! pipeline is back-pressured, so edits wait (a few seconds at most, a compaction's time) and
//! nothing is dropped; readers never take it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use tokio::sync::OwnedMutexGuard;

use crate::error::IndexError;

/// The gates by database URI.
static GATES: LazyLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = LazyLock::new(Default::default);

/// This process's turn to write to one database: it lasts as long as this value.
pub(crate) struct Turn {
    _guard: OwnedMutexGuard<()>,
    uri: String,
}

impl Turn {
    /// Confirms, before each further table write of a turn, that the writer lease is still this
    /// process's ([`crate::fence`]; free while its last proof is recent).
    pub(crate) async fn fence(&self) -> Result<(), IndexError> {
        crate::fence::confirm(&self.uri).await
    }
}

/// Waits for this process's turn to write to the database at `uri`, then confirms that its
/// writer lease is still its own ([`crate::fence`]): refused, the turn is not taken and nothing
/// is written.
pub(crate) async fn turn(uri: &str) -> Result<Turn, IndexError> {
    let gate = {
        let mut gates = GATES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        gates.entry(uri.to_string()).or_default().clone()
    };
    let turn = Turn { _guard: gate.lock_owned().await, uri: uri.to_string() };
    turn.fence().await?;
    Ok(turn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn writes_to_one_database_take_turns_and_other_databases_do_not_wait() {
        let first = turn("db-a").await.unwrap();
        let waiting = tokio::spawn(async { turn("db-a").await.is_ok() });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "a second write to db-a waits for the first");
        let other = tokio::time::timeout(Duration::from_secs(1), turn("db-b")).await;
        assert!(other.is_ok(), "another database has its own gate");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(1), waiting).await;
        assert!(second.is_ok_and(|j| j.is_ok_and(|taken| taken)), "the second write runs once the first is done");
    }
}
