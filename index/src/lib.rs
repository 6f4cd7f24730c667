//! The storage layer of ctxd: one LanceDB database directory with a `chunks` table, a
//! `symbols` table ([`symbols`]: one row per definition, written with the chunks) and a
//! `streams` table ([`streams`]: which files committed in parts are complete).
//!
//! * [`active`] names the chunks table in use (a re-embedding job switches it atomically).
//! * [`schema`] defines the Arrow schema of a chunk row (the on-disk format is part of the API:
//!   pyarrow/pylance can read it directly).
//! * [`store::Index`] opens or creates the table and checks the model it was built with.
//! * [`writer`] applies a [`CommitBatch`] as **one** LanceDB commit (`merge_insert` that inserts
//!   the new chunks and deletes the stale chunks of the same files in a single version).
//! * [`reader`] tells which files are indexed with which content hash (the incremental state
//!   lives here, not in memory) and looks chunks and symbols up; [`search`] answers vector and
//!   BM25 queries; [`vectors`] reads stored vectors (the embedding cache).
//! * [`indices`] keeps a full-text index on `content` and B-tree indexes; [`maintenance`]
//!   compacts and prunes; [`snapshots`] tags and reads past versions.
//! * [`scope`] narrows a view of the index to some named sources (every read filtered);
//!   [`overlay`] stores a git source's second ref as the files it does not share with the first.
//! * [`lease`] keeps one writer per index (a lock file, or a lease object in the bucket);
//!   within the writer, `write_gate.rs` makes its commits and its own upkeep take turns.
//! * [`fragments`] writes rows as uncommitted data fragments and publishes many sets in one
//!   commit; [`staged`] records which shard of a distributed job wrote which;
//!   [`build_shard`] is a sharded first build's shard and commit, [`source_objects`] the S3
//!   objects it read (what the writer's first start needs not to download them again).
//! * [`connection`] opens every table with one process-wide LanceDB session; its index cache
//!   is [`index_cache::ExpiringCache`] (a byte budget, and superseded segments dropped).
//! * [`columns`] and [`sql`] are the leaf helpers: typed columns of a batch, filter text.
//!
//! Every commit is a LanceDB version; nothing here ever rewrites a chunk row in place.

pub mod active;
pub mod adapters;
pub mod build_shard;
pub mod changes;
pub(crate) mod columns;
pub mod connection;
pub mod edges;
pub mod error;
mod fence;
pub(crate) mod format;
pub(crate) mod fragments;
pub mod history;
pub(crate) mod index_cache;
pub(crate) mod indices;
pub mod language;
pub mod lease;
pub mod maintenance;
pub mod metrics;
pub mod overlay;
pub(crate) mod reader;
pub mod record;
pub mod schema;
pub mod scope;
pub(crate) mod scoped;
pub mod search;
pub(crate) mod share;
pub mod snapshots;
pub mod source_objects;
pub(crate) mod sql;
pub mod staged;
pub mod stamp;
pub mod store;
pub(crate) mod streams;
pub mod symbols;
#[cfg(test)]
pub(crate) mod testing;
pub mod vectors;
mod write_gate;
pub mod writer;

pub use columns::typed_col;
pub use fragments::Fragments;
pub use share::RowShare;
pub use streams::PARTIAL_PREFIX;

/// `model` of rows stored without a vector (full-text-only sources): a null vector (zeros in
/// tables created before the column was nullable, [`schema::Vectorless`]) that vector search
/// skips and the model check ignores.
pub const NO_MODEL: &str = "none";

/// Name of the chunks table inside the database directory.
pub const CHUNKS_TABLE: &str = "chunks";
