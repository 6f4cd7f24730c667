//! The one-shot commands, one module each (the daemon, MCP, re-embedding and benchmarks have
//! their own modules at the crate root).

pub(crate) mod adapt;
pub(crate) mod admin;
pub(crate) mod build;
pub(crate) mod chunk;
pub(crate) mod doctor;
pub(crate) mod eval;
pub(crate) mod files;
pub(crate) mod graph;
pub(crate) mod index;
pub(crate) mod progress;
pub(crate) mod query;
