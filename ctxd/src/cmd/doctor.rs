//! `ctxd doctor`: one command that says what is wrong, each finding with a one-line fix.
//!
//! Checks, in order (each independent; a failing one does not hide the others):
//! 1. **config** (`--config`): it parses and its values are valid;
//! 2. **cpu** and **model**: oneDNN loads and the instruction set it runs (bf16 native or not);
//!    with an embedding endpoint (`[model] endpoint`, `--endpoint`), one request to it (no retry)
//!    says whether it answers with the model; otherwise
//!    the model the index (or `--model`, else the default) uses resolves, loads, and embeds a
//!    text — the backend and precision it picked are reported;
//! 3. **index** (`--db`, or the config's `[index] db`): it opens; its version, chunks, versions on
//!    disk and fragments (many fragments: compaction pending), whether it has a vector index;
//! 4. **writer**: whether a writer (a daemon, a `ctxd index`) runs: the lease file's last holder
//!    and, on this host, whether the kernel's lock table (`/proc/locks`) shows its flock held
//!    (read only: the lease is never taken);
//! 5. **sources** (`--config`): each opens (a folder readable, a git repository and its refs, a
//!    bucket reachable with its credentials);
//! 6. **freshness** (a folder source): files modified, added or removed since the last commit.
//!
//! Output: one line per finding, `ok`, `warn` or `BROKEN`, the fix after `→`; `--json` prints
//! `{"findings":[{check,status,detail,fix}],"broken"}`. Exit status 1 when something is broken.

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use ctxd_index::store::Index;
use serde::Serialize;

use crate::model_args::ModelArgs;

/// `ctxd doctor`'s arguments.
#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// The index to check (default: the config's [index] db).
    #[arg(long)]
    db: Option<PathBuf>,
    /// The config whose sources, index and model are checked.
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    model: ModelArgs,
    /// Print the findings as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Status {
    Ok,
    Warn,
    Broken,
}

#[derive(Debug, Serialize)]
struct Finding {
    check: &'static str,
    status: Status,
    detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    fix: Option<String>,
}

/// Fragments above which a compaction is worth running.
const MANY_FRAGMENTS: usize = 64;

/// The findings so far, in the order the checks ran.
#[derive(Default)]
struct Findings(Vec<Finding>);

impl Findings {
    fn add(&mut self, check: &'static str, status: Status, detail: String, fix: Option<&str>) {
        self.0.push(Finding { check, status, detail, fix: fix.map(str::to_string) });
    }
}

/// Runs the checks, prints the findings; an error (exit 1) when one is broken.
pub async fn run(a: DoctorArgs) -> Result<()> {
    let mut out = Findings::default();
    let cfg = a.config.as_deref().and_then(|file| check_config(file, &mut out));
    let db = a.db.clone().or_else(|| cfg.as_ref().map(|c| c.index.db.clone()));
    let index = match &db {
        None => None,
        Some(db) => open_index(db, &mut out).await,
    };
    check_cpu(&mut out).await?;
    check_model(&a, cfg.as_ref(), index.as_ref(), &mut out).await?;
    if let (Some(index), Some(db)) = (&index, &db) {
        check_index(index, db, &mut out).await;
        let (status, detail) = writer(db);
        out.add("writer", status, detail, None);
    }
    if let Some(cfg) = &cfg {
        match ctxd_pipeline::daemon::check_sources(cfg) {
            Ok(()) => out.add("sources", Status::Ok, format!("{} source(s) open", cfg.sources().len()), None),
            Err(e) => {
                out.add("sources", Status::Broken, e.to_string(), Some("fix the source's root, refs or credentials"))
            }
        }
    }
    let root =
        cfg.as_ref().filter(|c| !c.source.is_object_store() && !c.has_named_sources()).map(|c| c.source.root.clone());
    if let (Some(index), Some(root), Some(db)) = (&index, root, &db) {
        check_freshness(index, &root, db, &mut out).await;
    }
    print_findings(&out.0, a.json)
}

/// The configuration file `file`, loaded and validated (`None` when it is not valid).
fn check_config(file: &Path, out: &mut Findings) -> Option<ctxd_config::Config> {
    match ctxd_config::Config::load_with_env(Some(file)) {
        Ok(cfg) => {
            out.add("config", Status::Ok, format!("{} is valid", file.display()), None);
            Some(cfg)
        }
        Err(e) => {
            let fix = "correct the key it names (`ctxd config validate FILE` checks it again)";
            out.add("config", Status::Broken, format!("{}: {e}", file.display()), Some(fix));
            None
        }
    }
}

/// The index at `db`, opened (`None`, and a broken finding, when it does not open).
async fn open_index(db: &Path, out: &mut Findings) -> Option<Index> {
    match crate::open::open_index(db).await {
        Ok(index) => Some(index),
        Err(e) => {
            let fix = "give the --db of an index, or create one with `ctxd index PATH --db DIR`";
            out.add("index", Status::Broken, format!("{}: {e:#}", db.display()), Some(fix));
            None
        }
    }
}

/// The CPU path: oneDNN found and the instruction set it runs (else the portable candle path).
async fn check_cpu(out: &mut Findings) -> Result<()> {
    match tokio::task::spawn_blocking(ctxd_models::dnnl::Dnnl::load).await? {
        Ok(dnnl) => out.add("cpu", Status::Ok, format!("oneDNN loads; {}", dnnl.bf16_reason()), None),
        Err(e) => out.add(
            "cpu",
            Status::Warn,
            format!("no oneDNN, embedding takes the slower portable path: {e}"),
            Some("run scripts/fetch-onednn.sh, or set CTXD_DNNL_LIB to a libdnnl.so.3"),
        ),
    }
    Ok(())
}

/// The model (the index's, else --model, else the default): through the configured embedding
/// endpoint, one request; else loaded here, embedding one text.
async fn check_model(
    a: &DoctorArgs,
    cfg: Option<&ctxd_config::Config>,
    index: Option<&Index>,
    out: &mut Findings,
) -> Result<()> {
    let spec = match (&a.model.model, index) {
        (Some(m), _) => m.clone(),
        (None, Some(index)) => crate::open::index_model_spec(index).await.unwrap_or_default(),
        (None, None) => ctxd_models::resolve::DEFAULT_MODEL.to_string(),
    };
    // Through an embedding server: one request, no retries (the embedder itself would wait).
    let mut model_cfg = cfg.map(|c| c.model.clone()).unwrap_or_default();
    a.model.apply(&mut model_cfg);
    if let Some(endpoint) = model_cfg.runtime().endpoint {
        let url = endpoint.request_url();
        let probe = tokio::task::spawn_blocking(move || {
            let loaded = ctxd_models::loaded::LoadedModel::resolve(&spec)?;
            let mut remote = ctxd_models::remote::RemoteEmbedder::new(&loaded, endpoint)?;
            remote.probe().map(|()| loaded.model_id())
        });
        match probe.await? {
            Ok(id) => out.add("model", Status::Ok, format!("{id} embeds through the endpoint {url}"), None),
            Err(e) => out.add(
                "model",
                Status::Broken,
                format!("{e}"),
                Some("start the embedding server, or fix [model] endpoint / endpoint_kind / name"),
            ),
        }
    } else {
        match crate::open::start_model(&spec, &a.model).await {
            Ok((service, _)) => match service.embed(vec!["ctxd doctor".into()]).await {
                Ok(v) if v.first().is_some_and(|v| v.len() == service.dim() && v.iter().all(|x| x.is_finite())) => out
                    .add(
                        "model",
                        Status::Ok,
                        format!(
                            "{} loads and embeds ({} dimensions) on {}",
                            service.model_id(),
                            service.dim(),
                            service.backend()
                        ),
                        None,
                    ),
                Ok(_) => out.add("model", Status::Broken, format!("{spec} embeds to a wrong vector"), Some(MODEL_FIX)),
                Err(e) => out.add("model", Status::Broken, format!("{spec} does not embed: {e}"), Some(MODEL_FIX)),
            },
            Err(e) => out.add("model", Status::Broken, format!("{spec}: {e:#}"), Some(MODEL_FIX)),
        }
    }
    Ok(())
}

/// The index at `db`: its version, chunks, versions on disk, fragments and vector index.
async fn check_index(index: &Index, db: &Path, out: &mut Findings) {
    match (
        index.reads().stats().await,
        index.maintenance().layout().await,
        index.maintenance().has_vector_index().await,
    ) {
        (Ok(stats), Ok((versions, fragments)), Ok(vector)) => {
            let detail = format!(
                "{}: version {}, {} chunks, {versions} versions on disk, {fragments} fragments, {}",
                db.display(),
                stats.version,
                stats.rows,
                if vector { "vector index built" } else { "no vector index (exact search)" }
            );
            if fragments > MANY_FRAGMENTS {
                let fix = "run `ctxd compact --db DIR` while no daemon writes (a daemon compacts by itself)";
                out.add("index", Status::Warn, format!("{detail}: compaction pending"), Some(fix));
            } else {
                out.add("index", Status::Ok, detail, None);
            }
        }
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
            let fix = "restore the index from a snapshot or rebuild it with `ctxd index`";
            out.add("index", Status::Broken, format!("{}: {e}", db.display()), Some(fix));
        }
    }
}

/// The folder source `root` against the index: files modified, added or removed since the last commit.
async fn check_freshness(index: &Index, root: &Path, db: &Path, out: &mut Findings) {
    match crate::staleness::stale_files(index, root, db).await {
        Ok((modified, added, removed, _)) if modified.len() + added.len() + removed.len() == 0 => {
            out.add("freshness", Status::Ok, format!("{}: nothing changed since the last commit", root.display()), None)
        }
        Ok((modified, added, removed, _)) => out.add(
            "freshness",
            Status::Warn,
            format!(
                "{}: {} modified, {} added, {} removed since the last commit",
                root.display(),
                modified.len(),
                added.len(),
                removed.len()
            ),
            Some("run `ctxd index --config FILE`, or keep `ctxd serve` running to index changes as they happen"),
        ),
        Err(e) => out.add("freshness", Status::Warn, format!("{}: {e:#}", root.display()), None),
    }
}

/// Prints `findings` (one line each, or JSON); an error when one is broken.
fn print_findings(findings: &[Finding], json: bool) -> Result<()> {
    let broken = findings.iter().filter(|f| f.status == Status::Broken).count();
    if json {
        println!("{}", serde_json::json!({ "findings": findings, "broken": broken }));
    } else {
        for f in findings {
            let status = match f.status {
                Status::Ok => "ok    ",
                Status::Warn => "warn  ",
                Status::Broken => "BROKEN",
            };
            let fix = f.fix.as_deref().map(|x| format!("\n         → {x}")).unwrap_or_default();
            println!("{status} {:<9} {}{fix}", f.check, f.detail);
        }
    }
    if broken > 0 {
        anyhow::bail!("{broken} check(s) broken (see above)");
    }
    Ok(())
}

/// Who holds the writer lease of a local index, read without taking it (a writer starting now
/// is never refused because of the doctor): the lock file names its last holder, `what (pid N on
/// HOST, since T)`; on this host the pid says whether it still runs.
fn writer(db: &Path) -> (Status, String) {
    let lock = db.join(ctxd_index::lease::LOCK_FILE);
    let Ok(text) = std::fs::read_to_string(&lock) else {
        return (
            Status::Ok,
            "no writer has held this index (or it lives in a bucket: its lease is not read here)".into(),
        );
    };
    let holder = text.trim();
    let named = ctxd_index::lease::holder_pid_host(holder);
    if named.is_some_and(|(_, host)| host != ctxd_index::lease::this_host()) {
        return (Status::Ok, format!("the last writer was {holder} (another host: not checked)"));
    }
    // The kernel's lock table says whether someone holds the flock on that file now.
    let held = match std::fs::read_to_string("/proc/locks") {
        Ok(locks) => flock_held(&locks, &lock),
        Err(_) => named.is_some_and(|(pid, _)| std::path::Path::new(&format!("/proc/{pid}")).exists()),
    };
    if held {
        (Status::Ok, format!("a writer runs: {holder}"))
    } else {
        (Status::Ok, format!("no writer runs (the last one was {holder})"))
    }
}

/// Whether `/proc/locks` (its text `locks`) lists a lock on the file `path`: a line's
/// `MAJOR:MINOR:INODE` field names its device and inode.
fn flock_held(locks: &str, path: &std::path::Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::metadata(path) else { return false };
    let dev = meta.dev();
    let (major, minor) = (((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff), (dev & 0xff) | ((dev >> 12) & !0xff));
    let want = format!("{major:02x}:{minor:02x}:{}", meta.ino());
    locks.lines().any(|l| l.split_whitespace().nth(5).is_some_and(|f| f == want))
}

const MODEL_FIX: &str = "delete the model's folder under ~/.cache/ctxd/models and run scripts/fetch-model.sh (or give \
                         --model a complete local model folder)";
