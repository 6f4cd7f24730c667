//! End-to-end tests of the `ctxd` binary with the real model, real LanceDB on disk, real
//! tree-sitter grammars and a real HTTP server on 127.0.0.1. One test binary (each extra one
//! re-links LanceDB): the harness is `integration/support.rs`, the scenarios are one file per
//! feature under `integration/`. Needs the default model (`scripts/fetch-model.sh`), moto and
//! the Python clients (`scripts/test.sh` installs them all; a scenario that misses one says which).
//!
//! A scenario is one story — start a daemon, change files, ask, check, fault, ask again — told in
//! order with its assertions inline, so the function-length limit the libraries and the binary
//! keep (100 lines) does not apply to the scenario functions here.
#![allow(clippy::too_many_lines)]

#[path = "integration/support.rs"]
mod support;

#[path = "integration/adapt.rs"]
mod adapt;
#[path = "integration/aggregate.rs"]
mod aggregate;
#[path = "integration/api_fuzz.rs"]
mod api_fuzz;
#[path = "integration/architectures.rs"]
mod architectures;
#[path = "integration/assembly.rs"]
mod assembly;
#[path = "integration/bench.rs"]
mod bench;
#[path = "integration/build_shards.rs"]
mod build_shards;
#[path = "integration/chunk.rs"]
mod chunk;
#[path = "integration/compat.rs"]
mod compat;
#[path = "integration/deploy.rs"]
mod deploy;
#[path = "integration/doctor.rs"]
mod doctor;
#[path = "integration/endpoint.rs"]
mod endpoint;
#[path = "integration/fencing.rs"]
mod fencing;
#[path = "integration/git.rs"]
mod git;
#[path = "integration/graph.rs"]
mod graph;
#[path = "integration/indexing.rs"]
mod indexing;
#[path = "integration/mcp.rs"]
mod mcp;
#[path = "integration/object_store.rs"]
mod object_store;
#[path = "integration/reembed.rs"]
mod reembed;
#[path = "integration/reference.rs"]
mod reference;
#[path = "integration/roles.rs"]
mod roles;
#[path = "integration/search.rs"]
mod search;
#[path = "integration/sessions.rs"]
mod sessions;
#[path = "integration/setup.rs"]
mod setup;
#[path = "integration/sources.rs"]
mod sources;
#[path = "integration/ui.rs"]
mod ui;
