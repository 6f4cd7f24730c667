//! `ctxd serve`: the daemon — pipeline in follow mode plus the HTTP API, drained on SIGTERM.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use ctxd_config::Config;
use ctxd_context::assembler::Assembler;
use ctxd_pipeline::pipeline::Pipeline;
use ctxd_pipeline::progress::LiveRun;
use ctxd_pipeline::trigger::Triggers;
use ctxd_roles::reload::access_of;
use ctxd_roles::sdnotify::notify;
use ctxd_roles::Generation;
use ctxd_roles::{follow_switches, when_ready, Writer};
use ctxd_search::searcher::Searcher;
use ctxd_search::sources::LiveAccess;
use ctxd_serve::mcp::McpServer;
use ctxd_serve::{Admission, AdmissionLimits};
use ctxd_serve::{AppState, ProgressFn};
use ctxd_serve::{Auth, SourceTokens, Token};
use tokio::net::TcpListener;

use crate::cli::Role;
use crate::model_args::ModelArgs;
use crate::open::{build_config, termination};

/// What `ctxd serve` was asked for on its command line.
pub struct ServeArgs {
    pub config: Option<PathBuf>,
    pub watch: Option<PathBuf>,
    pub db: Option<PathBuf>,
    pub listen: Option<String>,
    pub flight_listen: Option<String>,
    pub role: Role,
}

/// The configuration `ctxd serve` runs with: the file or flags, the listen addresses given on
/// the command line, validated.
fn serve_config(args: &ServeArgs, model: &ModelArgs) -> Result<Config> {
    let reader = args.role == Role::Reader;
    if args.config.is_none() && args.watch.is_none() && !(reader && args.db.is_some()) {
        bail!("nothing to serve: pass --config <FILE> or --watch <PATH> --db <DIR> (a reader: --db <DIR> alone)");
    }
    if reader && args.watch.is_some() {
        bail!("--role reader serves an index another process writes: drop --watch (pass --db, or --config)");
    }
    let mut cfg = build_config(args.config.as_deref(), args.watch.as_deref(), args.db.as_deref(), model)?;
    if let Some(l) = &args.listen {
        cfg.server.listen = l.clone();
    }
    if let Some(l) = &args.flight_listen {
        cfg.server.flight_listen = l.clone();
    }
    cfg.validate().map_err(|e| anyhow::anyhow!("invalid configuration: {e}"))?;
    Ok(cfg)
}

/// The bearer tokens of `[server]` (the full token and the source-limited ones), if any.
fn auth_of(cfg: &Config) -> Result<Option<Auth>> {
    let full = cfg.server.auth_token()?.as_deref().and_then(Token::new);
    let limited = match cfg.server.source_tokens()? {
        None => Vec::new(),
        Some((file, text)) => {
            if !cfg.has_named_sources() {
                bail!(
                    "server.source_tokens_file ({}) limits tokens to named sources, but the configuration has one \
                     unnamed [source]: name the sources with [[source]] entries",
                    file.display()
                );
            }
            SourceTokens::parse(&text, &cfg.source_names())
                .with_context(|| format!("invalid server.source_tokens_file {}", file.display()))?
        }
    };
    Ok(Auth::new(full, limited))
}

/// Runs the daemon until SIGTERM/Ctrl-C.
pub async fn serve(args: ServeArgs, model: ModelArgs) -> Result<()> {
    let hangup = ctxd_roles::reload::listen();
    let cfg = serve_config(&args, &model)?;
    let ServeArgs { config, watch, db, role, .. } = args;
    let reader = role == Role::Reader;
    let access = LiveAccess::new(access_of(&cfg));
    // A writer with a configuration file reloads its sources on SIGHUP.
    let read_again = config.clone().filter(|_| !reader).map(|file| {
        let spec = crate::reload::ReloadSpec { file, watch: watch.clone(), db: db.clone(), model: model.clone() };
        Box::new(move || spec.read().map_err(Into::into)) as ctxd_roles::reload::ReadAgain
    });
    let auth = auth_of(&cfg)?;
    if auth.is_none() && cfg.server.exposed() {
        tracing::warn!("listening on a non-loopback address without a bearer token (set CTXD_AUTH_TOKEN)");
    }
    let prometheus = crate::metrics::install_metrics()?;
    // Series dashboards and alerts use exist from the start (at zero), not from the first event.
    for transport in ["http", "flight"] {
        metrics::counter!(ctxd_serve::metrics::AUTH_FAILURES_TOTAL, "transport" => transport).absolute(0);
    }
    let (listener, flight_listener) = bind(&cfg).await?;
    let addr = listener.local_addr()?;
    let drain = Duration::from_secs(cfg.pipeline.drain_timeout_secs);
    // The webhook's pokes reach the git sources of every pipeline generation.
    let triggers = Triggers::default();
    let opened = match role {
        Role::Reader => open_reader(&cfg, model).await?,
        Role::Both | Role::Writer => open_writer(&cfg, &triggers).await?,
    };
    let Opened { searcher, token_counter, ready, progress, backend } = opened;
    let lease = lease_status(&backend);
    let (stop_follow, follow_stopped) = tokio::sync::oneshot::channel::<()>();
    // SIGHUP never stops the daemon: a writer with a configuration file reloads its sources,
    // any other says there is nothing to reload.
    let (reload_tx, reloads) = tokio::sync::mpsc::channel(4);
    if let Some(hangup) = hangup {
        tokio::spawn(ctxd_roles::reload::on_hangup(hangup, read_again, reload_tx));
    }
    let writer = Writer {
        cfg: cfg.clone(),
        searcher: (*searcher).clone(),
        drain,
        access: access.clone(),
        triggers: triggers.clone(),
        live: LiveRun::default(),
    };
    let follower = start_follower(backend, writer, follow_stopped, reloads);
    // One admission gate for HTTP and Flight queries.
    let limits = AdmissionLimits {
        concurrent: cfg.server.max_concurrent_queries,
        queued: cfg.server.max_queued_queries,
        timeout: std::time::Duration::from_millis(cfg.server.queue_timeout_ms),
    };
    let gate = Arc::new(Admission::new(limits, searcher.pressure().clone()));
    let (stop_flight, flight_stopped) = tokio::sync::oneshot::channel::<()>();
    let flight = match flight_listener {
        Some(l) => Some(start_flight(l, &searcher, &access, &gate, auth.clone(), flight_stopped)?),
        None => None,
    };
    let (assembler, mcp, aggregator) = query_surfaces(&cfg, &searcher, token_counter, reader, &access)?;
    let state = AppState {
        searcher,
        assembler,
        ready,
        progress,
        prometheus: Some(prometheus),
        auth,
        access,
        mcp: Some(mcp),
        aggregator: Some(aggregator),
        poll: (!reader).then(|| Arc::new(move |name: &str| triggers.poke(name)) as _),
        webhook_secret: cfg.server.webhook_secret()?,
        gate,
        ui: cfg.server.ui,
        lease,
    };
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let http = tokio::spawn(ctxd_serve::http::serve(listener, state, async move {
        let _ = http_stopped.await;
    }));
    announce_ready(&cfg, addr, reader);

    termination().await;
    tracing::info!("shutting down: stopping sources and draining the pipeline (up to {}s)", drain.as_secs());
    notify("STOPPING=1\nSTATUS=draining the pipeline");
    let _ = stop_follow.send(());
    wait_for_follower(follower, drain).await?;
    let _ = stop_http.send(());
    let _ = stop_flight.send(());
    http.await.context("http server task")?.context("http server")?;
    if let Some(f) = flight {
        f.await.context("flight server task")?.context("flight server")?;
    }
    Ok(())
}

/// The listeners of `[server]`: HTTP's, and Arrow Flight's when `flight_listen` is set.
async fn bind(cfg: &Config) -> Result<(TcpListener, Option<TcpListener>)> {
    let listener =
        TcpListener::bind(&cfg.server.listen).await.with_context(|| format!("binding {}", cfg.server.listen))?;
    let flight_listener = match cfg.server.flight_listen.as_str() {
        "" => None,
        a => Some(TcpListener::bind(a).await.with_context(|| format!("binding {a} (flight)"))?),
    };
    Ok((listener, flight_listener))
}

/// What `/v1/status` says of the writer lease: the lock this process holds (a writer).
fn lease_status(backend: &Backend) -> Option<String> {
    match backend {
        Backend::Writer { lease, .. } => {
            Some(format!("{} (held by this process, pid {})", lease.lock(), std::process::id()))
        }
        Backend::Reader(_) => None,
    }
}

/// The Arrow Flight server on `listener`, behind the same access and admission gate as HTTP,
/// until `stopped`.
fn start_flight(
    listener: TcpListener,
    searcher: &Arc<Searcher>,
    access: &LiveAccess,
    gate: &Arc<Admission>,
    auth: Option<Auth>,
    stopped: tokio::sync::oneshot::Receiver<()>,
) -> Result<tokio::task::JoinHandle<Result<(), impl std::error::Error + Send + Sync + 'static>>> {
    let faddr = listener.local_addr()?;
    let api = ctxd_serve::flight::FlightApi::new(searcher.clone()).with_access(access.clone()).with_gate(gate.clone());
    eprintln!("ctxd: arrow flight on grpc://{faddr}");
    Ok(tokio::spawn(ctxd_serve::flight::serve(listener, api, auth, async move {
        let _ = stopped.await;
    })))
}

/// Says the daemon serves: in the log, on stderr, and to systemd (`READY=1`, then its watchdog).
fn announce_ready(cfg: &Config, addr: std::net::SocketAddr, reader: bool) {
    let roots: Vec<String> =
        cfg.sources().iter().map(|s| s.git.as_ref().unwrap_or(&s.root).display().to_string()).collect();
    match reader {
        true => tracing::info!("reader listening on http://{addr} (db {})", cfg.index.db.display()),
        false => {
            tracing::info!("listening on http://{addr} (sources {}, db {})", roots.join(", "), cfg.index.db.display())
        }
    }
    eprintln!("ctxd: listening on http://{addr}");
    notify("READY=1\nSTATUS=serving; initial scan in progress");
    ctxd_roles::sdnotify::spawn_watchdog();
}

/// Waits for the follower to end; a writer's pipeline then drains (up to `drain`) and its
/// lease is released.
async fn wait_for_follower(follower: Follower, drain: Duration) -> Result<()> {
    match follower {
        Follower::Writer(task, lease) => {
            let generation = task.await.context("model switch follower task")?;
            generation.stop(drain).await;
            lease.release().await;
        }
        Follower::Reader(task) => task.await.context("reader follower task")?,
    }
    Ok(())
}

/// The task that follows what the role follows until `stop`: a writer's model switches and
/// reloaded sources (`w`), or a reader's new versions of the index another process writes.
fn start_follower(
    backend: Backend,
    w: Writer,
    stop: tokio::sync::oneshot::Receiver<()>,
    reloads: tokio::sync::mpsc::Receiver<Config>,
) -> Follower {
    match backend {
        Backend::Writer { generation, lease, live } => {
            let w = Writer { live, ..w };
            Follower::Writer(tokio::spawn(follow_switches(w, *generation, stop, reloads)), lease)
        }
        Backend::Reader(model) => {
            let every = Duration::from_millis(w.cfg.server.reader_poll_ms);
            let (db, searcher) = (w.cfg.index.db.clone(), w.searcher);
            let reopen = crate::open::reopen_for_reader(&db, &model);
            Follower::Reader(tokio::spawn(async move {
                ctxd_roles::reader::follow(&db, searcher, every, stop, reopen).await
            }))
        }
    }
}

/// What the query surfaces answer with beside the searcher: the context assembler (with the
/// configured session bounds), the MCP server (with the staleness check where one root is
/// indexed) and the aggregator.
type Surfaces = (Arc<Assembler>, Arc<McpServer>, Arc<ctxd_serve::aggregate::Aggregator>);

fn query_surfaces(
    cfg: &Config,
    searcher: &Arc<Searcher>,
    token_counter: ctxd_models::tokens::TokenCounter,
    reader: bool,
    access: &LiveAccess,
) -> Result<Surfaces> {
    let sessions = ctxd_context::session::Sessions::new(ctxd_context::session::SessionLimits {
        ttl: std::time::Duration::from_secs(cfg.server.session_ttl_secs),
        max_sessions: cfg.server.max_sessions,
        max_bytes: cfg.server.session_memory_mb << 20,
    });
    let assembler = Arc::new(
        Assembler::new((**searcher).clone(), token_counter).with_sessions(sessions).with_locate_model(cfg.locate.model),
    );
    // The staleness check compares one root with the index: a configuration of one source.
    let check = (!reader && !cfg.source.is_object_store() && !cfg.has_named_sources())
        .then(|| crate::staleness::checker((**searcher).clone(), cfg.source.root.clone(), cfg.index.db.clone(), None));
    let mcp = Arc::new(
        McpServer::new(assembler.clone(), check).with_access(access.clone()).with_tools(cfg.server.mcp_tools.clone()),
    );
    let aggregator = Arc::new(aggregator(cfg, assembler.clone())?);
    Ok((assembler, mcp, aggregator))
}

/// What serving needs from either role.
struct Opened {
    searcher: Arc<Searcher>,
    token_counter: ctxd_models::tokens::TokenCounter,
    ready: Arc<dyn Fn() -> bool + Send + Sync>,
    /// The first pass's progress (a writer), for `/v1/status`.
    progress: Option<ProgressFn>,
    backend: Backend,
}

enum Backend {
    Writer {
        generation: Box<Generation>,
        lease: ctxd_index::lease::WriterLease,
        /// The pipeline running now, moved by the writer to each new one.
        live: LiveRun,
    },
    /// The model arguments a reader re-opens the index with after a model switch.
    Reader(ModelArgs),
}

enum Follower {
    Writer(tokio::task::JoinHandle<Generation>, ctxd_index::lease::WriterLease),
    Reader(tokio::task::JoinHandle<()>),
}

/// Roles `both` and `writer`: the writer lease, then the pipeline (model and tables) and its pipeline.
async fn open_writer(cfg: &Config, triggers: &Triggers) -> Result<Opened> {
    let lease = crate::open::writer_lease(cfg, "ctxd serve").await?;
    crate::open::exit_when_lease_lost(&lease);
    // Opening can take long: the model loads, and an index of an older ctxd is re-embedded once
    // (`ctxd_pipeline::reembed::migrate`). systemd's start timeout is extended meanwhile.
    let extend = tokio::spawn(async {
        loop {
            notify(
                "EXTEND_TIMEOUT_USEC=90000000\nSTATUS=opening the index: loading the model \
                 (an index of an older ctxd is re-embedded once first)",
            );
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    });
    let pipeline = Pipeline::open(cfg.clone()).await;
    extend.abort();
    let pipeline =
        pipeline.with_context(|| format!("opening index {}", cfg.index.db.display()))?.with_triggers(triggers.clone());
    // Context budgets keep counting with this tokenizer after a model switch (a restart picks
    // up the new model's).
    let token_counter = pipeline.token_counter();
    let generation = Generation::start(pipeline)?;
    let tracker = generation.running.tracker();
    when_ready(&generation.running, "initial scan is committed");
    // The pipeline running now (the writer moves it to each new one): its progress for
    // `/v1/status`, and for answers the files changed since the version they read (in flight).
    let live = LiveRun::default();
    live.set(tracker.clone(), generation.running.progress());
    let reading = live.clone();
    let progress: ProgressFn = Arc::new(move || {
        let Some(p) = reading.read() else { return serde_json::Value::Null };
        let mut v = serde_json::to_value(p).unwrap_or_default();
        v["files_per_sec"] = p.files_per_sec().into();
        v["chunks_per_sec"] = p.chunks_per_sec().into();
        v["secs_left"] = p.secs_left().into();
        v
    });
    let pending = live.clone();
    let searcher = Searcher::new(generation.pipeline.index(), generation.pipeline.embedder())
        .with_changed_since(Arc::new(move || pending.in_flight()));
    let searcher = Arc::new(tuned(searcher, cfg).await?);
    let ready = Arc::new(move || tracker.is_ready());
    let backend = Backend::Writer { generation: Box::new(generation), lease, live };
    Ok(Opened { searcher, token_counter, ready, progress: Some(progress), backend })
}

/// A serving process's searcher: `[server]`'s rescoring depth and stale answers while busy, and
/// `[rerank]`'s cross-encoder (loaded here) when one is configured. Its path vocabulary is built
/// in the background now, so that no request builds it (later versions' are refreshed off the
/// query path too).
async fn tuned(searcher: Searcher, cfg: &Config) -> Result<Searcher> {
    let reranker = crate::open::start_reranker(&cfg.rerank.model, cfg.model.runtime()).await?;
    let searcher = searcher
        .with_rerank_depth(cfg.server.rerank_depth)
        .with_stale_answers(Duration::from_millis(cfg.server.stale_answer_ms))
        .with_reranker(reranker);
    let warming = searcher.clone();
    tokio::spawn(async move {
        if let Err(e) = warming.latest_vocab().await {
            tracing::warn!("building the path vocabulary failed (the first query builds it): {e}");
        }
    });
    Ok(searcher)
}

/// Role `reader`: the index as it is (waiting for the writer to create it) and its model.
async fn open_reader(cfg: &Config, model: ModelArgs) -> Result<Opened> {
    let opened = crate::open::open_for_reader(&cfg.index.db, &model).await?;
    let token_counter = opened.tokenizer().await?;
    let searcher = Arc::new(tuned(opened.searcher, cfg).await?);
    metrics::gauge!(ctxd_pipeline::metrics::PIPELINE_READY).set(1.0);
    Ok(Opened { searcher, token_counter, ready: Arc::new(|| true), progress: None, backend: Backend::Reader(model) })
}

/// The aggregate sources of the config (the local index alone when none are configured).
fn aggregator(cfg: &Config, local: Arc<Assembler>) -> Result<ctxd_serve::aggregate::Aggregator> {
    use ctxd_choice::SourceKind;
    use ctxd_serve::aggregate::{Aggregator, SourceSpec};
    let mut sources = Vec::new();
    for s in &cfg.aggregate.sources {
        let token = match &s.token_env {
            Some(var) => {
                Some(std::env::var(var).with_context(|| format!("aggregate source '{}': {var} is not set", s.name))?)
            }
            None => None,
        };
        sources.push(SourceSpec {
            name: s.name.clone(),
            kind: s.kind,
            url: s.url.clone(),
            priority: s.priority,
            timeout_ms: s.timeout_ms,
            token,
        });
    }
    if sources.is_empty() {
        sources.push(SourceSpec {
            name: "local".into(),
            kind: SourceKind::Local,
            url: None,
            priority: 1,
            timeout_ms: 5000,
            token: None,
        });
    }
    Ok(Aggregator::new(local, sources, cfg.aggregate.cache_entries)?)
}
