//! Re-embedding jobs: every chunk of an index embedded again by another model, written to a
//! second chunks table while the first keeps serving, then an atomic switch.
//!
//! `ctxd reembed --db DIR --model MODEL` runs [`reembed`] (`run.rs`):
//!
//! 1. **Target table.** The active table ([`ctxd_index::active`]) is the source. The target is
//!    `chunks__<model-slug>`, or the table an earlier switch used for the same model (switching
//!    back re-uses it and only catches up). The first job records the current table in the
//!    pointer's history (seq 0), so every model the index ever had is found again.
//! 2. **Streaming pass.** A three-task pipeline with bounded queues (`reembed_read →
//!    reembed_embed → reembed_write`, the generic stage metrics and back-pressure of
//!    [`crate::stage_tasks`]): the reader streams the source rows *without* their vectors in blocks,
//!    the embedder sends each block's texts to the model thread (batched by tokens there,
//!    identical texts embedded once), the writer appends each block to the target as one
//!    commit. Memory is a few blocks whatever the table's size.
//! 3. **Resumable.** Chunk ids are stable (blake3 of path, line range and content hash), so a job
//!    that was interrupted skips every id the target already holds: `ctxd reembed` again
//!    continues where it stopped (lost work: at most the blocks in flight). Ids in the target
//!    that are gone from the source are deleted.
//! 4. **Catch-up.** A daemon keeps committing to the source during the job; the job repeats the
//!    id diff until it is empty (or `max_catch_up_rounds`), then builds the target's indexes
//!    (full-text, B-trees, the vector index once large enough).
//! 5. **Switch.** One commit to the pointer table. Readers opening the index afterwards use the
//!    new table and model; a running daemon notices within seconds, loads the new model,
//!    re-opens its writer on the new table (its start-up reconciliation indexes whatever
//!    changed between the last catch-up and the switch) and then swaps its searcher — queries
//!    are answered by the old table and model until that moment, never by a half-filled table.
//!
//! Every row is embedded from [`ctxd_models::chunk_text`] (path, symbol and content: the text the
//! indexer embeds) and stored with its [`ctxd_models::embed_key`], so an index moved to model B
//! holds the vectors a fresh index built with B would hold.
//!
//! **Distributed** (`shard.rs`): `--shard I/N` on N machines stages fragments, `--commit`
//! ([`reembed`] with `commit_shards`) publishes them in one commit and finishes as above.
//!
//! **Migration** (`migrate.rs`) of a table an older ctxd wrote uses the same job.
//!
//! While a pass reads, the source version it reads is tagged `ctxd-reembed-source` so that no cleanup
//! removes it under a long job; the tag is dropped at the end. The source table is left as it is (the rollback: `ctxd reembed` back to the old model
//! only catches up). Rows stored without a vector (`model = "none"`, full-text-only sources)
//! are copied without one (a null vector; zeros of the new dimension in a target table created
//! before `vector` was nullable: [`ctxd_index::schema::Vectorless`]).
//!
//! The files: `job.rs` (options, progress, report, the model, opening a job's source and
//! target), `pass.rs` (the streaming pass), `run.rs` (the job on one machine), `shard.rs` (the
//! distributed job), `migrate.rs`. Each uses its siblings, never this module.

mod job;
mod migrate;
mod pass;
mod run;
mod shard;

pub use job::{JobModel, Progress, Quiet, ReembedOptions, ReembedReport, SOURCE_TAG};
pub use migrate::migrate;
pub use run::reembed;
pub use shard::{reembed_shard, NotAShard, Shard, ShardReport, ROWS_PER_FRAGMENT};
