//! `ctxd`: the context-indexing daemon's command-line entry point.
//!
//! A thin binary: argument parsing ([`cli`]) and one module per command family; all the work
//! happens in the library crates (`ctxd-pipeline`, `ctxd-stages`, `ctxd-models`,
//! `ctxd-index`, `ctxd-serve`). Errors are printed with their whole cause chain (`{:#}`).

mod bench;
mod cli;
mod commands;
mod mcp;
mod reembed;
mod sdnotify;
mod serve;

use clap::Parser;

/// jemalloc instead of glibc malloc: LanceDB/Arrow writes from many threads fragment glibc's
/// per-thread arenas and RSS creeps up; jemalloc's decay returns freed pages to the system
/// (`background_thread`, decay times set in `.cargo/config.toml`), which keeps a streaming run flat.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let cli = cli::Cli::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("CTXD_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if cli.verbose { "debug" } else { "info,lance=warn,lancedb=warn" })
    });
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).init();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("building the tokio runtime");
    let result = runtime.block_on(commands::run(cli));
    if let Err(err) = result {
        eprintln!("ctxd: error: {err:#}");
        std::process::exit(1);
    }
}
