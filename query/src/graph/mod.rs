//! The code graph, read side.

pub mod resolve;
