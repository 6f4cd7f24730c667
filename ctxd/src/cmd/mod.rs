//! The one-shot commands, one module each (the daemon, MCP, re-embedding and benchmarks have
//! their own modules at the crate root).

pub mod adapt;
pub mod admin;
pub mod chunk;
pub mod doctor;
pub mod eval;
pub mod files;
pub mod graph;
pub mod index;
pub mod query;
