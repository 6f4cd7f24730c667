//! A one-shot indexing run's progress on stderr (`ctxd index`, its shards): files done of those
//! found, chunks, rates, time left ([`ctxd_pipeline::progress`]) — a live line on a terminal, a
//! log line every 5 s otherwise (`CTXD_PROGRESS_MS`).

use std::io::IsTerminal;
use std::time::Duration;

use ctxd_pipeline::progress::ProgressHandle;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A run's progress on stderr until [`Shown::finish`].
pub(crate) struct Shown {
    task: tokio::task::JoinHandle<()>,
    bar: Option<ProgressBar>,
}

impl Shown {
    pub(crate) fn finish(self) {
        self.task.abort();
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// On a terminal, a live line (spinner until the total is known, then a bar) redrawn 4 times a
/// second; otherwise a log line every 5 s (`CTXD_PROGRESS_MS` sets another interval; none for a
/// run that ends sooner).
pub(crate) fn show(progress: ProgressHandle) -> Shown {
    if !std::io::stderr().is_terminal() {
        let every = std::env::var("CTXD_PROGRESS_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(5000).max(50);
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(every)).await;
                tracing::info!("indexing: {}", progress.read().describe());
            }
        });
        return Shown { task, bar: None };
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
    bar.set_style(ProgressStyle::with_template("{spinner} [{elapsed_precise}] {wide_msg}").expect("progress template"));
    let shown = bar.clone();
    let task = tokio::spawn(async move {
        let mut counted = false;
        loop {
            let p = progress.read();
            if p.scan_done && !counted {
                counted = true;
                bar.set_style(
                    ProgressStyle::with_template("[{elapsed_precise}] {bar:30} {wide_msg}")
                        .expect("progress template")
                        .progress_chars("=> "),
                );
            }
            bar.set_length(p.files_seen);
            bar.set_position(p.files_done);
            bar.set_message(p.describe());
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    Shown { task, bar: Some(shown) }
}
