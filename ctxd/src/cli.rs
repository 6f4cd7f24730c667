//! Command-line arguments.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::model_args::ModelArgs;

/// ctxd: ranked, cited, always-fresh context for coding agents, IDEs and RAG apps.
#[derive(Debug, Parser)]
#[command(name = "ctxd", version, about)]
pub struct Cli {
    /// Debug logging (or set CTXD_LOG, e.g. CTXD_LOG=ctxd=debug).
    #[arg(long, short, global = true)]
    pub verbose: bool,
    #[command(subcommand)]
    pub command: Command,
}

/// `ctxd snapshot ...`.
#[derive(Debug, Subcommand)]
pub enum SnapshotAction {
    /// Tag a version (default: the current one), e.g. with a git commit or a release name.
    /// Tagged versions survive old-version cleanup. An existing tag is moved.
    Tag {
        name: String,
        #[arg(long)]
        version: Option<u64>,
        #[arg(long)]
        db: PathBuf,
    },
    /// Remove a tag.
    Untag {
        name: String,
        #[arg(long)]
        db: PathBuf,
    },
}

/// `ctxd graph ...`: the code graph's tools.
// Parsed once per process: boxing the variant with the model's flags would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum GraphAction {
    /// Every use of a definition (calls, references, inheritance, imports of the name).
    References(SymbolArgs),
    /// Who calls a definition.
    Callers(SymbolArgs),
    /// What a definition calls.
    Callees(SymbolArgs),
    /// The indexed files a file imports.
    Imports(FileArgs),
    /// The indexed files that import a file.
    ImportedBy(FileArgs),
    /// What a change likely affects: definitions and tests, ranked. Give changed paths, or a
    /// unified diff with --diff FILE (`-` for stdin).
    Impact {
        /// Changed files (whole files).
        paths: Vec<String>,
        /// A unified diff (`git diff` output): the definitions its hunks touch.
        #[arg(long)]
        diff: Option<PathBuf>,
        #[arg(long)]
        db: PathBuf,
        /// Definitions and tests listed at most (each).
        #[arg(long, default_value_t = 20)]
        limit: usize,
        #[arg(long)]
        json: bool,
    },
    /// An aider-style map: the most relevant files (for --query, else the most central) with
    /// the signatures of their most referenced definitions, within a token budget.
    RepoMap {
        /// Rank files for this task (as `ctxd locate`); without it, by the graph's centrality.
        #[arg(long)]
        query: Option<String>,
        /// Tokens the map may use (estimated as bytes / 4).
        #[arg(long, default_value_t = 1024)]
        budget: usize,
        #[arg(long)]
        db: PathBuf,
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        json: bool,
    },
    /// Counts of the graph's nodes and edges by kind, and how long it took to build.
    Stats {
        #[arg(long)]
        db: PathBuf,
        #[arg(long)]
        json: bool,
    },
}

/// A symbol tool's arguments.
#[derive(Debug, Args)]
pub struct SymbolArgs {
    /// The definition: a name (`parse`), a symbol (`Class.method`, `Type::new`) or a qualified
    /// name (`pkg.mod.func`).
    pub symbol: String,
    #[arg(long)]
    pub db: PathBuf,
    /// Uses listed at most.
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
    #[arg(long)]
    pub json: bool,
}

/// `--source A,B` and `--ref R`: which named sources a read covers, and at which git ref.
#[derive(Debug, Args)]
pub struct SourceArgs {
    /// Only these named sources, comma-separated (an index of [[source]] entries).
    #[arg(long)]
    pub source: Option<String>,
    /// With --source: read its git sources at this branch, tag or commit.
    #[arg(long = "ref", requires = "source")]
    pub git_ref: Option<String>,
}

impl SourceArgs {
    /// The scope: each source at the ref (`name@ref`); without `--ref`, a git source is read at
    /// every ref it has in the index. `None` without `--source`.
    pub fn scope(&self) -> Option<ctxd_index::scope::SourceScope> {
        let names = self.source.as_deref().and_then(ctxd_search::sources::parse_list)?;
        let Some(r) = &self.git_ref else { return Some(names) };
        let at = names.names().iter().map(|n| format!("{n}@{}", r.replace('/', "~")));
        Some(ctxd_index::scope::SourceScope::new(at))
    }
}

/// A file tool's arguments.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// The file, relative to the indexed root.
    pub path: String,
    #[arg(long)]
    pub db: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Index a folder once (or every source a config names) and exit when everything is committed.
    Index {
        /// Folder to index (optional with a --config that names its sources).
        path: Option<PathBuf>,
        /// LanceDB directory of the index (optional with a --config that names [index] db).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Config file: its [[source]] entries (or [source] root) and [index] db, unless PATH
        /// and --db override them.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Full-text only: store chunks without vectors (no embedding time); search them with
        /// `--mode bm25`.
        #[arg(long)]
        no_embed: bool,
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        step: crate::cmd::index::BuildStep,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Rank the files an issue, a stack trace or a task description is about (the files a fix
    /// would change), each with its likely definitions and why. TEXT `-` reads stdin; up to 1 MB.
    Locate {
        /// The issue text, or `-` for stdin.
        text: String,
        #[arg(long)]
        db: PathBuf,
        /// Files listed.
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// Signals to leave out, comma-separated: paths, frames, symbols, messages, bm25,
        /// vector, definitions, graph, recency, cochange, commits, demote.
        #[arg(long, value_delimiter = ',')]
        without: Vec<String>,
        /// Locate in this snapshot: a version number (see `ctxd snapshots`) or a tag.
        #[arg(long)]
        as_of: Option<String>,
        #[command(flatten)]
        sources: SourceArgs,
        /// Also list the feature rows of this many best candidates (`features` in the JSON):
        /// what the ranking model scores (benches/fit_locate.py fits it on them).
        #[arg(long, default_value_t = 0)]
        features: usize,
        /// The ranking model: `fitted` (default: fitted on the training issues) or `hand` (the
        /// hand-set weights).
        #[arg(long)]
        locate_model: Option<ctxd_choice::RankerName>,
        /// Leave the index's query adapter out (`ctxd adapt`).
        #[arg(long)]
        no_adapter: bool,
        #[command(flatten)]
        model: ModelArgs,
        /// Print `{"files":[{"path","score","why","definitions"}],...}`.
        #[arg(long)]
        json: bool,
    },
    /// Fit the index's query adapter on its recorded git history (commit messages mapped toward
    /// the files they changed), judge it on the newest commits and store it, used by `locate`
    /// only where it beat the base model there. `ctxd index` runs it at its end (`[index] adapt`).
    Adapt(crate::cmd::adapt::AdaptArgs),
    /// A file's recent commits (date, author, message) and the files that change with it, from
    /// the git history the index recorded (git sources; source folders that are git clones).
    History {
        /// The file: its indexed path (`lib@main/src/a.py`), or a path inside the source.
        path: String,
        #[arg(long)]
        db: PathBuf,
        /// Commits (and co-changed files) listed per file.
        #[arg(long, default_value_t = 10)]
        limit: usize,
        #[command(flatten)]
        sources: SourceArgs,
        /// Print `{"files":[{"path","source","ref","commits":[…],"cochanged":[…]}]}`.
        #[arg(long)]
        json: bool,
    },
    /// The code graph: references, callers, callees, imports, imported-by, impact, repo-map.
    Graph {
        #[command(subcommand)]
        action: GraphAction,
    },
    /// Search an index.
    Search {
        /// The query.
        query: String,
        #[arg(long)]
        db: PathBuf,
        /// Number of results.
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// routed (the router picks signals and weights), hybrid, vector, bm25 or symbol.
        #[arg(long, default_value = "routed")]
        mode: String,
        /// Search this snapshot: a version number (see `ctxd snapshots`) or a tag.
        #[arg(long)]
        as_of: Option<String>,
        #[command(flatten)]
        sources: SourceArgs,
        /// Routed mode: skip rescoring the best candidates by late interaction (faster, less
        /// precise).
        #[arg(long)]
        no_rerank: bool,
        #[command(flatten)]
        model: ModelArgs,
        /// Print `{"results":[...]}`.
        #[arg(long)]
        json: bool,
    },
    /// Assemble context for a query within a token budget: deduplicated, merged, cited blocks
    /// ordered for long-context attention.
    Context {
        /// The query.
        query: String,
        #[arg(long)]
        db: PathBuf,
        /// Tokens available (counted with the index's tokenizer).
        #[arg(long, default_value_t = 4000)]
        budget: usize,
        /// Tokens of the budget to keep free.
        #[arg(long, default_value_t = 0)]
        reserve: usize,
        /// xml, markdown or plain.
        #[arg(long, default_value = "xml")]
        format: String,
        /// Candidates retrieved before deduplication and packing.
        #[arg(long, default_value_t = 60)]
        candidates: usize,
        /// Blocks per file at most.
        #[arg(long, default_value_t = 3)]
        max_per_file: usize,
        /// routed, hybrid, vector, bm25 or symbol.
        #[arg(long, default_value = "routed")]
        mode: String,
        /// The caller's current file (boosted).
        #[arg(long)]
        current_file: Option<String>,
        /// Search this snapshot: a version number or a tag.
        #[arg(long)]
        as_of: Option<String>,
        #[command(flatten)]
        sources: SourceArgs,
        /// Drop the candidates that do not fit whole instead of sending their signature skeletons.
        #[arg(long)]
        no_skeletons: bool,
        /// Layout: auto (by the query's intent), balanced, hierarchical, sequential or thematic.
        #[arg(long, default_value = "auto")]
        assembly: String,
        /// Only these document types, comma-separated: code, docs, config, tests (default: all).
        #[arg(long)]
        doc_types: Option<String>,
        /// A session id: what earlier calls with it were sent is cited, not repeated (kept
        /// under ~/.cache/ctxd/sessions/ or $CTXD_SESSION_DIR between calls, for the session time-out).
        #[arg(long)]
        session: Option<String>,
        #[command(flatten)]
        model: ModelArgs,
        /// Print `{"blocks":[...],"tokens_used","budget","route","intent",...}`.
        #[arg(long)]
        json: bool,
    },
    /// List the index's versions (snapshots) with time, row count and tags.
    Snapshots {
        #[arg(long)]
        db: PathBuf,
        /// Print `{"snapshots":[{"version","timestamp","rows","tags"}]}`.
        #[arg(long)]
        json: bool,
    },
    /// One maintenance pass: compact fragments, remove versions older than --retain-secs
    /// (tagged versions are kept), build the vector index if the table is large enough.
    /// Run it only while no daemon writes to the same index.
    Compact {
        #[arg(long)]
        db: PathBuf,
        /// Keep versions younger than this.
        #[arg(long, default_value_t = 3600)]
        retain_secs: u64,
        /// Build the vector index from this many embedded rows (0: never).
        #[arg(long, default_value_t = ctxd_index::maintenance::DEFAULT_VECTOR_INDEX_MIN_ROWS)]
        vector_index_min_rows: usize,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Re-embed every chunk with another model (or model version) into a new table while
    /// searches keep using the current one, then switch queries to it atomically. Resumable:
    /// run it again after an interruption and it continues. A running daemon on the same
    /// --db follows the switch by itself.
    Reembed {
        #[arg(long)]
        db: PathBuf,
        /// Rows per embed request and per commit to the new table.
        #[arg(long, default_value_t = 256)]
        block_rows: usize,
        /// Fill the new table but leave queries on the current one (run again to switch).
        #[arg(long)]
        no_switch: bool,
        /// Distributed: embed only shard I of N (0-based) into uncommitted fragments of the new
        /// table, recorded for `--commit` (run I = 0..N-1 anywhere, in parallel).
        #[arg(long, value_name = "I/N", conflicts_with_all = ["commit", "no_switch"])]
        shard: Option<ctxd_pipeline::reembed::Shard>,
        /// Distributed: publish every shard's fragments in one commit, catch up on what changed
        /// since, and switch (unless --no-switch).
        #[arg(long)]
        commit: bool,
        /// Build the vector index of the new table from this many rows (0: never).
        #[arg(long, default_value_t = ctxd_index::maintenance::DEFAULT_VECTOR_INDEX_MIN_ROWS)]
        vector_index_min_rows: usize,
        /// No progress bar; print the report as JSON.
        #[arg(long)]
        json: bool,
        /// The new model (--model is required).
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Name or unname a snapshot.
    Snapshot {
        #[command(subcommand)]
        action: SnapshotAction,
    },
    /// Look up definitions in the symbol table by name, symbol (`Type::method`) or qualified name.
    Symbols {
        /// Exact name (or prefix with --prefix).
        name: String,
        #[arg(long)]
        db: PathBuf,
        /// Match names that start with NAME.
        #[arg(long)]
        prefix: bool,
        /// Most rows to print.
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print `{"symbols":[...]}`.
        #[arg(long)]
        json: bool,
    },
    /// A file's, folder's or module's outline: its definitions in line order with signatures.
    ListSymbols {
        /// A path, a folder or a module (pkg.mod, crate::a::b).
        target: String,
        #[arg(long)]
        db: PathBuf,
        /// Only these kinds (comma-separated: function,class,method,…).
        #[arg(long, value_delimiter = ',')]
        kinds: Vec<String>,
        #[arg(long)]
        as_of: Option<String>,
        /// Print the outline as JSON.
        #[arg(long)]
        json: bool,
    },
    /// The sources of many definitions at once, packed in the order given into a token budget.
    GetSymbols {
        /// Names, symbols (`Type::method`, `Class.method`) or qualified names.
        #[arg(required = true)]
        names: Vec<String>,
        #[arg(long)]
        db: PathBuf,
        #[arg(long, default_value_t = 4000)]
        budget: usize,
        #[arg(long)]
        as_of: Option<String>,
        /// A session id: sources sent before in it are cited, not repeated (see `context --session`).
        #[arg(long)]
        session: Option<String>,
        /// Print `{"symbols":[...],"missing","over_budget","already_sent","tokens_used",…}`.
        #[arg(long)]
        json: bool,
    },
    /// Serve the index to agents over the Model Context Protocol on stdio (tools: search,
    /// get_context, search_symbols, get_symbol_source, list_symbols, get_symbols,
    /// get_repo_overview, check_index, locate and the graph tools).
    Mcp {
        #[arg(long)]
        db: PathBuf,
        /// The indexed source folder (enables check_index and its refresh).
        #[arg(long)]
        root: Option<PathBuf>,
        /// Config file (its [source] root enables check_index).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The tools offered: minimal (get_context, locate, search), standard (+ symbols, references,
        /// callers, impact, overview, check_index), all, or tool names separated by commas. Each
        /// listed tool costs tokens in every agent request.
        #[arg(long, default_value = "all")]
        tools: ctxd_choice::ToolPreset,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Say what is wrong: the model, the CPU backend, the index (versions, fragments, vector index),
    /// the writer lease, the sources and files changed since the last commit; each finding with its
    /// fix. Exit status 1 when something is broken.
    Doctor(crate::cmd::doctor::DoctorArgs),
    /// The files a source indexes; with --explain every file under it and the rule that skips it
    /// (the .gitignore file, line and pattern, hidden, a secret or binary name, the source's
    /// globs, too large, binary content).
    LsFiles {
        /// A folder (or, with --config, a folder or file under a source); default: the current folder.
        path: Option<PathBuf>,
        /// Config whose sources (roots, include/exclude globs, max_file_bytes) are listed.
        #[arg(long)]
        config: Option<PathBuf>,
        /// List every file with why it is indexed or skipped.
        #[arg(long)]
        explain: bool,
        /// Print `{"files":[{path,indexed,why}],"indexed","seen"}`.
        #[arg(long)]
        json: bool,
    },
    /// Connect a coding agent: write or merge its MCP configuration (and, with --instructions, when
    /// to call which tool). Idempotent; --print shows the change, --remove undoes it.
    Setup(crate::setup::SetupArgs),
    /// Run the daemon: index, watch for changes, serve HTTP.
    Serve {
        /// Config file (TOML, see configs/ctxd.toml).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Folder to index and watch (overrides [source] root).
        #[arg(long)]
        watch: Option<PathBuf>,
        /// LanceDB directory (overrides [index] db).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Address to listen on (overrides [server] listen).
        #[arg(long)]
        listen: Option<String>,
        /// Arrow Flight address (overrides [server] flight_listen; "" for none).
        #[arg(long)]
        flight_listen: Option<String>,
        /// both: index and serve in one process; writer: the same, under the name deployments
        /// give the one process that writes (it holds the writer lease); reader: serve only,
        /// following the versions the writer commits (needs only --db or [index] db).
        #[arg(long, value_enum, default_value_t = Role::Both)]
        role: Role,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Evaluate retrieval on a JSONL query set ({"id","query","gold":[paths]}).
    Eval {
        #[arg(long)]
        db: PathBuf,
        /// Queries file.
        #[arg(long)]
        queries: PathBuf,
        /// Cut-off for file-level metrics.
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// routed, routed-no-rerank (without late-interaction rescoring), hybrid, vector, bm25,
        /// symbol, or all.
        #[arg(long, default_value = "all")]
        mode: String,
        /// Also evaluate context assembly at these token budgets (comma-separated) against
        /// the top-k whole files (k = 1, 3, 5).
        #[arg(long, value_delimiter = ',')]
        context_budgets: Vec<usize>,
        /// The assemblies evaluated at each budget (comma-separated: auto, balanced,
        /// hierarchical, sequential, thematic), beside balanced whole blocks.
        #[arg(long, value_delimiter = ',', default_value = "auto")]
        assemblies: Vec<String>,
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        json: bool,
    },
    /// Check a config file and print the effective configuration errors, if any.
    Config {
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Embed texts — one per stdin line, or one JSON string per line with --jsonl — and print one
    /// JSON array of floats per line, in order: the vectors the index would store for them.
    Embed {
        /// Each stdin line is a JSON string (texts with newlines).
        #[arg(long)]
        jsonl: bool,
        /// Embed them as queries (the model's query prompt, where it has one; MiniLM has none).
        #[arg(long)]
        query: bool,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Chunk files as `ctxd index` does: one JSON `{"path", "text"}` per stdin line in, one JSON
    /// line of its chunks out (lines, symbol, kind, whether a definition, and the exact text the
    /// model embeds), in order. Reads the model's tokenizer only.
    Chunk {
        /// Config whose `[chunk]` budget and `[model]` are used (default: the built-in ones).
        #[arg(long)]
        config: Option<PathBuf>,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Measure chunking, embedding and end-to-end indexing throughput.
    Bench {
        /// Folder to benchmark on.
        #[arg(long, default_value = "../shared/eval/cosqa/corpus")]
        corpus: PathBuf,
        /// Chunks to embed for the embedding figure.
        #[arg(long, default_value_t = 512)]
        embed_chunks: usize,
        /// Skip the end-to-end indexing run.
        #[arg(long)]
        skip_e2e: bool,
        /// Write the embedded texts (`texts.jsonl`), ctxd's vectors (`ctxd-vectors.jsonl`) and the
        /// timing (`ctxd-timing.json`) to this folder, for side-by-side comparisons
        /// (`benches/embed_vs_pytorch.py`).
        #[arg(long)]
        export: Option<PathBuf>,
        /// Instead of the throughput figures: re-parse every whole-definition chunk of the code
        /// under these folders (repeatable) and print, per language, the share that parses
        /// without ERROR nodes.
        #[arg(long)]
        integrity: Vec<PathBuf>,
        /// With --integrity: files read per folder at most.
        #[arg(long, default_value_t = 4000)]
        max_files: usize,
        /// Instead of the throughput figures: fit the model's late-interaction codec on the token
        /// states of `--embed-chunks` chunks of the corpus and write it to this file (how the
        /// codecs under models/codecs/ were made; BENCHMARKS.md has the command).
        #[arg(long)]
        fit_late: Option<PathBuf>,
        /// With --fit-late: principal directions the codec keeps (bytes a stored token, besides
        /// its 4-byte scale).
        #[arg(long, default_value_t = 64)]
        late_dims: usize,
        /// Instead of the throughput figures: recall@10 and latency of each way of visiting the
        /// vector index of the database at this path, against exact search.
        #[arg(long)]
        vector_recall: Option<PathBuf>,
        /// With --vector-recall: stored vectors searched with.
        #[arg(long, default_value_t = 200)]
        recall_queries: usize,
        #[command(flatten)]
        forward: crate::forward_bench::ForwardArgs,
        #[command(flatten)]
        model: ModelArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum ConfigAction {
    /// Parse and validate a config file.
    Validate { file: PathBuf },
}

/// What `ctxd serve` runs (see `--role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    Both,
    Writer,
    Reader,
}
