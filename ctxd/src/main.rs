//! `ctxd`: the context-indexing daemon's command-line entry point.
//!
//! A thin binary: argument parsing ([`cli`]), one call per subcommand ([`run`], below), one
//! module per command ([`cmd`], [`serve`], [`mcp`], [`reembed`], [`bench`]); what they share is
//! how an index, its model and the configuration are opened ([`open`], which imports no
//! command). All the work happens in the library crates (`ctxd-roles`, `ctxd-pipeline`,
//! `ctxd-stages`, `ctxd-models`, `ctxd-index`, `ctxd-search`, `ctxd-codegraph`, `ctxd-context`,
//! `ctxd-serve`). Errors are printed with their whole
//! cause chain (`{:#}`).

mod bench;
mod cli;
mod cmd;
mod embed_cmd;
mod fit_late;
mod forward_bench;
mod mcp;
mod metrics;
mod model_args;
mod open;
mod reembed;
mod reload;
mod serve;
mod session_file;
mod setup;
mod setup_clients;
mod staleness;
mod vector_recall;

use anyhow::Result;
use clap::Parser;
use ctxd_context::request::ContextRequest;
use ctxd_context::symbols::{GetSymbolsRequest, ListSymbolsRequest};

use crate::cli::{Cli, Command, ConfigAction, SnapshotAction};

/// jemalloc instead of glibc malloc: LanceDB/Arrow writes from many threads fragment glibc's
/// per-thread arenas and RSS creeps up; jemalloc's decay returns freed pages to the system
/// (`background_thread`, decay times set in `.cargo/config.toml`), which keeps a streaming run flat.
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// oneDNN's OpenMP threads sleep when idle unless the environment says otherwise: the candle
/// transformer (non-BERT models, cross-encoders) runs its matmuls on them between element-wise
/// operations on other threads, and GNU OpenMP's default spinning took a core from those on a
/// 2-core machine (NomicBERT at full size: 4.1 chunks/s spinning, 4.8 passive). BERT's fast path
/// runs single-threaded workers and is not affected. Set first, while the process has one thread.
fn quiet_openmp() {
    if std::env::var_os("OMP_WAIT_POLICY").is_none() {
        std::env::set_var("OMP_WAIT_POLICY", "passive");
    }
}

/// LanceDB counts two of a machine's cores as reserved for I/O and computes on the rest, at
/// least one: on 2–3 cores its CPU pool has a single thread, which every read and write of the
/// process shares. `ctxd index` waits for the full-text folds it runs there (a streamed file's rows
/// are merged and folded every 64,000 rows): a 1 GB log on 2 cores took 225 s instead of 280 s with
/// every core. A daemon's queries (their vector partition and BM25 searches) wait on that one
/// thread behind the writer's encoding and folds while files change: on 2 cores, with the writer
/// editing 20 files a second, a distinct question's p99 was 1.4–2.0 s with one thread and
/// 0.84–0.94 s with two (BENCHMARKS.md, "Lance's CPU pool on two cores"). So every command lets
/// LanceDB compute on every core unless `LANCE_CPU_THREADS` says otherwise. Read once by LanceDB;
/// set while the process has one thread.
fn lance_on_every_core() {
    if std::env::var_os("LANCE_CPU_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        std::env::set_var("LANCE_CPU_THREADS", cores.to_string());
    }
}

fn main() {
    quiet_openmp();
    let cli = cli::Cli::parse();
    lance_on_every_core();
    quiet_on_closed_pipe(&cli.command);
    let filter = tracing_subscriber::EnvFilter::try_from_env("CTXD_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(if cli.verbose { "debug" } else { "info,lance=warn,lancedb=warn" })
    });
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).init();
    more_open_files();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("building the tokio runtime");
    let result = runtime.block_on(run(cli));
    if let Err(err) = result {
        eprintln!("ctxd: error: {err:#}");
        std::process::exit(1);
    }
}

/// Raises the soft limit on open files to the hard one, as Go's runtime does for every program:
/// LanceDB keeps a file open per full-text index segment its index cache holds — a writer
/// folding a stream of commits under queries held ~350 after 30 minutes of the soak before the
/// cache dropped superseded segments (`ctxd_index::index_cache`), ~100 since (`benches/soak.py`;
/// `ctxd_process_open_files`) — while systemd starts services with a soft limit of 1,024 (hard:
/// 524,288).
fn more_open_files() {
    let Some(mut limit) = crate::metrics::open_files_limit().filter(|l| l.rlim_cur < l.rlim_max) else { return };
    let soft = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    // SAFETY: setrlimit only reads the struct passed.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } == 0 {
        tracing::debug!(from = soft, to = limit.rlim_max, "raised the soft limit on open files");
    }
}

/// A command that only reads and prints ends quietly when its output pipe closes
/// (`ctxd snapshots --json | head`), as `cat` does, instead of panicking in `println!`: Rust
/// ignores SIGPIPE, so the default action is restored for these commands. The daemon, MCP and
/// indexing commands keep ignoring it (a client or child going away is handled, not fatal).
fn quiet_on_closed_pipe(command: &Command) {
    let prints_only = matches!(
        command,
        Command::Locate { .. }
            | Command::History { .. }
            | Command::Graph { .. }
            | Command::Search { .. }
            | Command::Context { .. }
            | Command::Snapshots { .. }
            | Command::Symbols { .. }
            | Command::ListSymbols { .. }
            | Command::GetSymbols { .. }
    );
    if prints_only {
        // SAFETY: called first thing in `main`, before any thread is started; setting a
        // signal's disposition to its default has no other precondition.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
}

/// Dispatches a parsed command line: queries, code-graph commands and the index's upkeep go
/// through their family's dispatch (below), every other command straight to its module.
async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        command @ (Command::Search { .. }
        | Command::Context { .. }
        | Command::Symbols { .. }
        | Command::ListSymbols { .. }
        | Command::GetSymbols { .. }) => run_query(command).await,
        command @ (Command::Locate { .. } | Command::Graph { .. } | Command::History { .. }) => {
            run_graph(command).await
        }
        command @ (Command::Snapshots { .. }
        | Command::Reembed { .. }
        | Command::Compact { .. }
        | Command::Snapshot { .. }
        | Command::Config { .. }) => run_upkeep(command).await,
        Command::Index { path, db, config, no_embed, model, step, json } => {
            let run =
                cmd::index::Run { path: path.as_deref(), db: db.as_deref(), config: config.as_deref(), no_embed, json };
            cmd::index::run(run, &model, step).await
        }
        Command::Adapt(args) => cmd::adapt::run(&args).await,
        Command::Mcp { db, root, config, tools, model } => mcp::run(db, root, config, tools, model).await,
        Command::Setup(args) => setup::run(args),
        Command::Doctor(args) => cmd::doctor::run(args).await,
        Command::LsFiles { path, config, explain, json } => {
            cmd::files::ls_files(path.as_deref(), config.as_deref(), explain, json).await
        }
        Command::Serve { config, watch, db, listen, flight_listen, role, model } => {
            serve::serve(serve::ServeArgs { config, watch, db, listen, flight_listen, role }, model).await
        }
        Command::Eval { db, queries, k, mode, context_budgets, assemblies, model, json } => {
            let context = cmd::eval::ContextEval { budgets: &context_budgets, assemblies: &assemblies };
            cmd::eval::run(&db, &queries, k, &mode, context, &model, json).await
        }
        Command::Embed { jsonl, query, model } => {
            tokio::task::spawn_blocking(move || embed_cmd::run(&model, query, jsonl)).await?
        }
        Command::Chunk { config, model } => {
            tokio::task::spawn_blocking(move || cmd::chunk::run(config.as_deref(), &model)).await?
        }
        // Loads and runs the model on this thread: off the async runtime.
        Command::Bench { forward, model, .. } if forward.forward => {
            let base = model.runtime()?;
            tokio::task::spawn_blocking(move || forward_bench::run(&forward, model.model.as_deref(), base)).await?
        }
        Command::Bench { corpus, embed_chunks, fit_late: Some(out), late_dims, model, .. } => {
            fit_late::run(&corpus, embed_chunks, late_dims, &out, &model).await
        }
        Command::Bench { vector_recall: Some(db), recall_queries, .. } => vector_recall::run(&db, recall_queries).await,
        Command::Bench { integrity, max_files, model, .. } if !integrity.is_empty() => {
            bench::integrity(&integrity, max_files, &model)
        }
        Command::Bench { corpus, embed_chunks, skip_e2e, export, model, .. } => {
            bench::run(&corpus, embed_chunks, skip_e2e, export.as_deref(), &model).await
        }
    }
}

/// A query of the index (`ctxd search`, `context`, `symbols`, `list-symbols`, `get-symbols`).
async fn run_query(command: Command) -> Result<()> {
    match command {
        Command::Search { query, db, k, mode, as_of, sources, no_rerank, model, json } => {
            let source = sources.scope();
            let mode: ctxd_search::search::Mode = mode.parse()?;
            let mut req = ctxd_search::search::SearchRequest::new(query).with(k, mode);
            (req.as_of, req.source, req.rerank) = (as_of, source, Some(!no_rerank));
            cmd::query::search(req, &db, &model, json).await
        }
        Command::Context {
            query,
            db,
            budget,
            reserve,
            format,
            candidates,
            max_per_file,
            mode,
            current_file,
            as_of,
            sources,
            no_skeletons,
            assembly,
            doc_types,
            session,
            model,
            json,
        } => {
            let mut req = ContextRequest::new(query, budget);
            req.assembly = assembly.parse()?;
            req.doc_types =
                doc_types.as_deref().map(ctxd_context::doc_type::parse_list).transpose()?.unwrap_or_default();
            req.session = session;
            req.skeletons = !no_skeletons;
            req.reserve = reserve;
            req.format = format.parse()?;
            req.candidates = candidates;
            req.max_per_file = max_per_file;
            req.mode = mode.parse()?;
            req.current_file = current_file;
            req.as_of = as_of;
            req.source = sources.scope();
            cmd::query::context(req, &db, &model, json).await
        }
        Command::Symbols { name, db, prefix, limit, json } => {
            cmd::query::symbols(&name, &db, prefix, limit, json).await
        }
        Command::ListSymbols { target, db, kinds, as_of, json } => {
            let req = ListSymbolsRequest { target, kinds, as_of, session: None, source: None, git_ref: None };
            cmd::query::list_symbols(&req, &db, json).await
        }
        Command::GetSymbols { names, db, budget, as_of, session, json } => {
            let req = GetSymbolsRequest { names, budget, as_of, session, source: None, git_ref: None };
            cmd::query::get_symbols(&req, &db, json).await
        }
        _ => unreachable!("run sends only query commands here"),
    }
}

/// A code-graph command (`ctxd locate`, `graph …`, `history`).
async fn run_graph(command: Command) -> Result<()> {
    match command {
        Command::Locate { text, db, k, without, as_of, sources, features, locate_model, no_adapter, model, json } => {
            let mut req = ctxd_codegraph::locate::LocateRequest::new(cmd::graph::text_arg(&text)?);
            (req.k, req.features, req.without, req.model) = (k, features, without, locate_model);
            req.no_adapter = no_adapter;
            (req.as_of, req.source) = (as_of, sources.scope());
            cmd::graph::locate(req, &db, &model, json).await
        }
        Command::Graph { action } => cmd::graph::graph(action).await,
        Command::History { path, db, limit, sources, json } => {
            cmd::graph::history(&path, &db, limit, sources.scope(), json).await
        }
        _ => unreachable!("run sends only graph commands here"),
    }
}

/// One of the index's upkeep commands (`ctxd snapshots`, `reembed`, `compact`, `snapshot …`, `config …`).
async fn run_upkeep(command: Command) -> Result<()> {
    match command {
        Command::Snapshots { db, json } => cmd::admin::snapshots(&db, json).await,
        Command::Reembed { db, block_rows, no_switch, shard, commit, vector_index_min_rows, json, model } => {
            let step = match (shard, commit) {
                (Some(shard), _) => reembed::Step::Shard(shard),
                (None, true) => reembed::Step::Commit,
                (None, false) => reembed::Step::Whole,
            };
            reembed::run(&db, &model, step, block_rows, !no_switch, vector_index_min_rows, json).await
        }
        Command::Compact { db, retain_secs, vector_index_min_rows, json } => {
            cmd::admin::compact(&db, retain_secs, vector_index_min_rows, json).await
        }
        Command::Snapshot { action: SnapshotAction::Tag { name, version, db } } => {
            cmd::admin::tag(&db, &name, version).await
        }
        Command::Snapshot { action: SnapshotAction::Untag { name, db } } => cmd::admin::untag(&db, &name).await,
        Command::Config { action: ConfigAction::Validate { file } } => cmd::admin::validate_config(&file),
        _ => unreachable!("run sends only upkeep commands here"),
    }
}
