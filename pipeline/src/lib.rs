//! The ctxd pipeline: its stage tasks and the daemon wiring.
//!
//! [`stage_tasks`] runs pipelines of async stages, typed:
//!
//! * every queue is a **bounded** `async-channel`; a full queue blocks its producer (back-pressure)
//!   and the time spent blocked is counted per stage (`ctxd_stage_blocked_seconds_total`);
//! * a stage runs `workers` copies; a [`ctxd_stages::stage::Stage`] maps one item to zero or one item, a
//!   [`ctxd_stages::stage::BatchStage`] takes batches capped by a weight (e.g. tokens) and a wait, and a
//!   [`ctxd_stages::stage::Sink`] consumes batches (commits); the traits and each stage's impl live in
//!   `ctxd-stages` ([`ctxd_stages::stage`]);
//! * a failing item is counted by error kind and skipped: it never ends the pipeline;
//! * drain is ordered by construction: when the source stops, it drops its sender, each stage
//!   finishes what is queued and in flight and then drops its own sender, down to the sink,
//!   which commits its last batch;
//! * a [`stage_tasks::Tracker`] counts files in flight so callers can wait until everything the
//!   source emitted has been committed or skipped (readiness, one-shot indexing).
//!
//! The daemon: [`pipeline`] opens model, index and state; [`daemon`] builds the ctxd pipeline
//! `watch → load → chunk → embed → upsert` from a [`ctxd_config::Config`] and runs it one-shot
//! (`ctxd index`) or as a daemon (`ctxd serve`); `source` drives the watcher or a git source,
//! `bucket` an S3 source's listing, `reconcile` removes what a completed start-up scan did not find; [`progress`] reads how
//! far a run is (files, chunks, rates, time left); `writer_threads` runs a daemon's pipeline on
//! threads of its own at a lower priority than the queries (`[pipeline] writer_nice`).
//!
//! [`adapt`] fits an index's query adapter on its recorded git history (`ctxd adapt`, the end
//! of `ctxd index`); `adapt_job` does so in a daemon's background whenever the history changed.
//!
//! [`reembed`] re-embeds an index with another model into a second table and switches to it;
//! `reembed::migrate` does so once for a table an older ctxd wrote; `reembed::shard` splits such a job over
//! many processes (uncommitted fragments per shard, one commit); `build` does the same for a first
//! build (`ctxd index --shard I/N`, then `--commit`).

pub mod adapt;
mod adapt_job;
mod bucket;
mod build;
pub mod daemon;
mod emit;
pub mod error;
mod freshness;
mod history_recorder;
pub mod metrics;
pub mod pipeline;
pub mod progress;
mod reconcile;
pub mod reembed;
mod source;
pub(crate) mod stage_tasks;
#[cfg(test)]
mod testkit;
pub mod trigger;
mod writer_threads;
