//! The roles of a ctxd daemon (`ctxd serve --role both|writer|reader`): what a process does
//! between the pipeline and the query side once it serves.
//!
//! * [`generation`] — one pipeline (model + active chunks table) with its stages running,
//!   started and drained as a unit;
//! * [`writer`] — the writer's loop: a new generation when `ctxd reembed` switches the active
//!   table, the searcher moved to it only once its initial pass is committed (no query is
//!   answered from a half-filled table), and the sources a `SIGHUP` reloads applied;
//! * [`reload`] — what a `SIGHUP` applies (the sources only) and how it is reported;
//! * [`reader`] — a stateless reader following the commits of the index another process
//!   writes (local or `s3://`), model switches included;
//! * [`sdnotify`] — systemd's notify protocol (readiness, status, watchdog, stopping).
//!
//! The binary (`ctxd/src/serve.rs`) wires them: it parses arguments and opens what they name,
//! and injects what needs the command line (opening an index for reading, reading the
//! configuration file again).

pub(crate) mod error;
pub(crate) mod generation;
pub mod reader;
pub mod reload;
pub mod sdnotify;
pub(crate) mod writer;

pub use generation::Generation;
pub use writer::{follow_switches, when_ready, Writer};
