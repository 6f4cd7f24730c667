//! `SIGHUP`: a running writer re-reads its configuration file and applies its sources.
//!
//! Only the sources are reloaded — the `[source]` table and the `[[source]]` entries (names,
//! roots, git refs, include/exclude, …). Adding a source indexes it, removing one drops its
//! files from the index, a changed one is read again; the files of the others are unchanged
//! and not indexed again (their content hashes match). Every other section (`[index]`,
//! `[model]`, `[server]`, `[pipeline]`, …) keeps its running value; a change there is logged as
//! needing a restart. Queries are answered throughout: the pipeline is drained, then started
//! again on the new sources, and the HTTP, MCP and Flight surfaces learn the new source names
//! at that moment. A file that does not parse, or a source that cannot be opened (a missing
//! folder, a path that is no git repository), is logged and counted and changes nothing.
//!
//! Counted in `ctxd_pipeline_source_reloads_total{result="applied"|"unchanged"|"failed"}`.

use ctxd_config::Config;

use crate::error::Injected;
use crate::sdnotify::notify;

/// `running` with the sources of `fresh`, and the sections of `fresh` that differ from
/// `running` but are not applied (they need a restart). `None`: the sources are the same.
pub fn with_sources(running: &Config, fresh: &Config) -> (Option<Config>, Vec<&'static str>) {
    let same = |a: &dyn std::fmt::Debug, b: &dyn std::fmt::Debug| format!("{a:?}") == format!("{b:?}");
    // `--listen` and `--flight-listen` on the command line are not in the file.
    let mut server = fresh.server.clone();
    (server.listen, server.flight_listen) = (running.server.listen.clone(), running.server.flight_listen.clone());
    let mut ignored = Vec::new();
    for (name, differs) in [
        ("[index]", !same(&running.index, &fresh.index)),
        ("[model]", !same(&running.model, &fresh.model)),
        ("[chunk]", !same(&running.chunk, &fresh.chunk)),
        ("[pipeline]", !same(&running.pipeline, &fresh.pipeline)),
        ("[server]", !same(&running.server, &server)),
        ("[aggregate]", !same(&running.aggregate, &fresh.aggregate)),
    ] {
        if differs {
            ignored.push(name);
        }
    }
    if same(&running.source, &fresh.source) && same(&running.named, &fresh.named) {
        return (None, ignored);
    }
    let mut next = running.clone();
    next.source = fresh.source.clone();
    next.named = fresh.named.clone();
    (Some(next), ignored)
}

/// The source names, git sources and work trees the query surfaces know of `cfg`.
pub fn access_of(cfg: &Config) -> ctxd_search::sources::Access {
    ctxd_search::sources::Access {
        known: cfg.source_names(),
        git: cfg.git_sources(),
        worktrees: cfg.worktree_sources(),
    }
}

/// Re-reads the configuration a `SIGHUP` applies (the binary's: the file and the command-line
/// overrides it was started with).
pub type ReadAgain = Box<dyn Fn() -> Result<Config, Injected> + Send + Sync>;

/// Sends the configuration `read` gives to `reloads` on every `SIGHUP`, until the receiver is
/// gone. A file that fails to read or validate is logged and counted. Without `read` (a reader,
/// or a daemon started without `--config`) each `SIGHUP` is logged and ignored — it never ends
/// the process, as it would by default.
pub async fn on_hangup(
    mut hangup: tokio::signal::unix::Signal,
    read: Option<ReadAgain>,
    reloads: tokio::sync::mpsc::Sender<Config>,
) {
    while hangup.recv().await.is_some() {
        let Some(read) = &read else {
            tracing::info!("SIGHUP: nothing to reload (a reader, or a daemon started without --config); ignored");
            continue;
        };
        tracing::info!("SIGHUP: reading the configuration again");
        match read() {
            Ok(cfg) => {
                if reloads.send(cfg).await.is_err() {
                    tracing::info!("SIGHUP: the daemon is stopping; not reloaded");
                }
            }
            Err(e) => failed(&ctxd_index::error::with_causes(&*e)),
        }
    }
}

/// Listens for `SIGHUP` from now on (before the model loads: its default action would end the
/// process); `None` when the handler cannot be installed.
pub fn listen() -> Option<tokio::signal::unix::Signal> {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(h) => Some(h),
        Err(e) => {
            tracing::warn!("cannot listen for SIGHUP ({e}): reloading the sources needs a restart");
            None
        }
    }
}

/// A reload that changed nothing: logged and counted.
pub fn failed(why: &str) {
    metrics::counter!(ctxd_pipeline::metrics::SOURCE_RELOADS_TOTAL, "result" => "failed").increment(1);
    tracing::error!("reloading the sources failed, the running ones stay: {why}");
    notify(&format!("STATUS=serving; the last reload failed: {why}"));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Config {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctxd.toml");
        std::fs::write(&path, text).unwrap();
        Config::load_with_env(Some(&path)).unwrap()
    }

    #[test]
    fn only_the_sources_are_taken_and_other_changes_are_named() {
        let a = parse("[[source]]\nname = \"a\"\nroot = \"/a\"\n[index]\ndb = \"/db\"\n");
        let b = parse("[[source]]\nname = \"a\"\nroot = \"/a\"\n[[source]]\nname = \"b\"\nroot = \"/b\"\n[index]\ndb = \"/other\"\n");
        let (next, ignored) = with_sources(&a, &b);
        let next = next.expect("a source was added");
        assert_eq!(next.source_names(), ["a", "b"]);
        assert_eq!(next.index.db, std::path::PathBuf::from("/db"), "[index] keeps its running value");
        assert_eq!(ignored, ["[index]"]);
        assert!(with_sources(&a, &a).0.is_none(), "nothing changed");
    }
}
