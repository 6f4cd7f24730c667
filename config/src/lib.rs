//! The daemon configuration: strict TOML (unknown keys are errors), defaults for everything,
//! every problem reported together.
//!
//! Two steps: `raw` reads the TOML as written (every key optional, wrong types and unknown
//! keys kept, not raised), `validate` builds the [`Config`] from it with the defaults
//! ([`settings`]) and checks the values; every problem (unknown key, wrong type, missing
//! key, bad value) goes into one [`ConfigErrors`], each with its key path and where it was set
//! (its line in the file, or the `CTXD_*` variable of an override, [`env`]).
//!
//! ```toml
//! [source]
//! root = "examples/demo"      # folder to index and watch
//! debounce_ms = 200
//! max_file_bytes = 10485760
//!
//! [index]
//! db = ".ctxd/db"             # LanceDB directory
//!
//! [model]
//! name = "sentence-transformers/all-MiniLM-L6-v2"   # hub id or local directory
//!
//! [server]
//! listen = "127.0.0.1:7700"
//! ```
//! See `configs/ctxd.toml` for every key with its default.

//!
//! The daemon's crates below the binary read it: `ctxd-pipeline` (sources, stages, index,
//! model), `ctxd-roles` (what a reload may change), the binary (the servers' `[server]` and
//! `[aggregate]` settings, turned into `ctxd-serve`'s options). Every type has one path: the
//! modules are private, their types are named at the crate root.

use std::path::Path;

mod check;
mod env;
mod error;
mod named;
mod raw;
#[cfg(test)]
mod reference;
mod server;
mod settings;
mod validate;

pub use env::{env_overrides, Override};
pub use error::{ConfigError, ConfigErrors, Problem};
pub use named::NamedSource;
pub use server::*;
pub use settings::*;

impl Config {
    /// Parses TOML text; `origin` names the file in errors. Relative paths in the file are
    /// resolved against the file's directory.
    pub fn from_toml(text: &str, origin: &Path) -> Result<Self, ConfigError> {
        Self::from_toml_with(text, origin, Vec::new())
    }

    /// [`Config::from_toml`] with environment overrides applied on top of the file (see
    /// [`env_overrides`]); errors name the variable that set a bad key.
    pub fn from_toml_with(text: &str, origin: &Path, overrides: Vec<Override>) -> Result<Self, ConfigError> {
        let err = |message: String| ConfigError::Syntax { path: origin.to_path_buf(), message };
        // Syntax errors stop the parser (one at a time, with line and column).
        let mut table: toml::Table = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        let from_env = env::apply(&mut table, overrides).map_err(err)?;
        let raw = raw::RawConfig::from_table(table).map_err(err)?;
        let (mut cfg, mut problems) = validate::build(raw, text, &from_env);
        cfg.resolve_paths(origin.parent().unwrap_or(Path::new(".")));
        if let Err(ConfigErrors(more)) = cfg.validate() {
            problems.extend(more);
        }
        if problems.is_empty() {
            Ok(cfg)
        } else {
            Err(ConfigError::Invalid { path: origin.to_path_buf(), errors: ConfigErrors(problems) })
        }
    }

    /// Relative paths (not `s3://` ones) resolve against `base`, the file's directory.
    fn resolve_paths(&mut self, base: &Path) {
        if self.source.root.is_relative() && !self.source.is_object_store() {
            self.source.root = base.join(&self.source.root);
        }
        for s in &mut self.named {
            if s.root.is_relative() && !s.is_object_store() {
                s.root = base.join(&s.root);
            }
            if let Some(git) = s.git.as_mut().filter(|g| g.is_relative()) {
                *git = base.join(&*git);
            }
            if let Some(dir) = s.mirror_dir.as_mut().filter(|d| d.is_relative()) {
                *dir = base.join(&*dir);
            }
        }
        if let Some(dir) = self.source.mirror_dir.as_mut().filter(|d| d.is_relative()) {
            *dir = base.join(&*dir);
        }
        if let Some(file) = self.server.auth_token_file.as_mut().filter(|d| d.is_relative()) {
            *file = base.join(&*file);
        }
        if let Some(file) = self.server.webhook_secret_file.as_mut().filter(|d| d.is_relative()) {
            *file = base.join(&*file);
        }
        if let Some(file) = self.server.source_tokens_file.as_mut().filter(|d| d.is_relative()) {
            *file = base.join(&*file);
        }
        if self.index.db.is_relative() && !self.index.db.to_string_lossy().contains("://") {
            self.index.db = base.join(&self.index.db);
        }
    }

    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_from(Some(path), Vec::new())
    }

    /// The configuration a run uses: `file` (or the defaults) with the process's `CTXD_*`
    /// overrides on top. Relative paths resolve against the file's directory (the working
    /// directory without a file).
    pub fn load_with_env(file: Option<&Path>) -> Result<Self, ConfigError> {
        Self::load_from(file, env_overrides(std::env::vars()))
    }

    fn load_from(file: Option<&Path>, overrides: Vec<Override>) -> Result<Self, ConfigError> {
        match file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
                Self::from_toml_with(&text, path, overrides)
            }
            None if overrides.is_empty() => Ok(Self::default()),
            None => Self::from_toml_with("", Path::new("./(environment)"), overrides),
        }
    }

    /// Checks of the values (after command-line overrides, say); every problem is reported.
    pub fn validate(&self) -> Result<(), ConfigErrors> {
        check::check(self)
    }
}

#[cfg(test)]
mod tests {

    /// The package's directory: cargo's run-time `CARGO_MANIFEST_DIR` (right even when a cached test
    /// binary built from another checkout of the same sources is reused), else the build-time one.
    fn manifest_dir() -> std::path::PathBuf {
        std::env::var_os("CARGO_MANIFEST_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
    }

    use super::*;
    use std::path::PathBuf;

    #[test]
    fn unknown_keys_are_rejected() {
        let err = Config::from_toml("[source]\nroot = \"x\"\nbogus = 1\n", Path::new("c.toml")).unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[test]
    fn all_semantic_errors_reported_together() {
        let text =
            "[pipeline]\nload = { capacity = 0, workers = 0 }\nwriter_nice = 20\n[server]\nlisten = \"nope\"\nrerank_depth = 500\n[model]\nindexing_share_percent = 0\n\
             indexing_share_waiting_percent = 101\n";
        let err = Config::from_toml(text, Path::new("c.toml")).unwrap_err().to_string();
        assert!(err.contains("pipeline.load.capacity"), "{err}");
        assert!(err.contains("pipeline.load.workers"), "{err}");
        assert!(err.contains("pipeline.writer_nice must be between 0"), "{err}");
        assert!(err.contains("server.listen"), "{err}");
        assert!(err.contains("server.rerank_depth must be at most 200"), "{err}");
        assert!(err.contains("model.indexing_share_percent must be between 1 and 100"), "{err}");
        assert!(err.contains("model.indexing_share_waiting_percent must be between 1 and 100"), "{err}");
        assert!(err.contains("never yields to queries), not 101"), "{err}");
    }

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn environment_overrides_win_over_the_file_and_bad_ones_are_named() {
        let file = "[index]\ndb = \"db\"\noptimize_every_rows = 10\n[server]\nlisten = \"127.0.0.1:1\"\n";
        let env = env_overrides(vars(&[
            ("CTXD_INDEX_OPTIMIZE_EVERY_ROWS", "99"),
            ("CTXD_SERVER_LISTEN", "127.0.0.1:7799"),
            ("CTXD_PIPELINE_EMBED__WORKERS", "3"),
            ("CTXD_SOURCE_EMBED", "false"),
            ("CTXD_MODEL_NAME", "sentence-transformers/all-MiniLM-L6-v2"),
            ("CTXD_LOG", "debug"),
            ("CTXD_AUTH_TOKEN", "x"),
            // The model cache directory the container images set: not `model.dir`.
            ("CTXD_MODEL_DIR", "/models"),
            ("HOME", "/root"),
        ]));
        assert_eq!(env.len(), 5, "{env:?}");
        let cfg = Config::from_toml_with(file, Path::new("/etc/ctxd/c.toml"), env).unwrap();
        assert_eq!(cfg.index.optimize_every_rows, 99);
        assert_eq!(cfg.index.db, Path::new("/etc/ctxd/db"));
        assert_eq!(cfg.server.listen, "127.0.0.1:7799");
        assert_eq!(cfg.pipeline.embed.workers, 3);
        assert!(!cfg.source.embed);
        assert_eq!(cfg.model.name, "sentence-transformers/all-MiniLM-L6-v2");

        let env = env_overrides(vars(&[("CTXD_INDEX_OPTIMISE_EVERY_ROWS", "1")]));
        let err = Config::from_toml_with(file, Path::new("c.toml"), env).unwrap_err().to_string();
        assert!(err.contains("optimise_every_rows") && err.contains("CTXD_INDEX_OPTIMISE_EVERY_ROWS"), "{err}");
        let env = env_overrides(vars(&[("CTXD_PIPELINE_LOAD__CAPACITY", "0")]));
        let err = Config::from_toml_with(file, Path::new("c.toml"), env).unwrap_err().to_string();
        assert!(err.contains("pipeline.load.capacity"), "{err}");
    }

    #[test]
    fn a_bad_file_names_the_key_and_line() {
        let err =
            Config::from_toml("[index]\ndb = \"d\"\nbogus_key = 1\n", Path::new("c.toml")).unwrap_err().to_string();
        assert!(err.contains("bogus_key") && err.contains("line 3"), "{err}");
    }

    #[test]
    fn every_unknown_key_and_wrong_type_is_reported_at_once_with_its_line() {
        let text = "[index]\ndb = \"d\"\nbogus = 1\n\n[server]\nlisten = 5\nlisen = \"x\"\n\n[pipeline]\nload = { capacity = 1, workers = 1, extra = 2 }\n\n[[aggregate.sources]]\nname = \"a\"\nkind = \"local\"\nfoo = 1\n\n[typo]\nx = 1\n";
        let err = Config::from_toml(text, Path::new("c.toml")).unwrap_err().to_string();
        for want in [
            "line 3: index.bogus",
            "line 6: server.listen: invalid type",
            "line 7: server.lisen",
            "line 10: pipeline.load.extra",
            "line 15: aggregate.sources.foo",
            "line 17: typo",
        ] {
            assert!(err.contains(want), "missing '{want}' in: {err}");
        }
        let env = env_overrides(vars(&[("CTXD_SERVER_LISTN", "127.0.0.1:1")]));
        let err = Config::from_toml_with("", Path::new("c.toml"), env).unwrap_err().to_string();
        assert!(err.contains("CTXD_SERVER_LISTN: server.listn"), "{err}");
    }

    #[test]
    fn a_closed_set_refuses_an_unknown_word_naming_key_line_value_and_the_valid_ones() {
        let text = "[model]\ndevice = \"gpu\"\nprecision = \"bf16\"\nbackend = \"onnx\"\nendpoint_kind = \"ollama\"\n";
        let err = Config::from_toml(text, Path::new("c.toml")).unwrap_err().to_string();
        for want in [
            "line 2: model.device: 'gpu' is not auto, cpu or cuda:N",
            "line 4: model.backend: 'onnx' is not auto, onednn or candle",
            "line 5: model.endpoint_kind: 'ollama' is not openai or tei",
        ] {
            assert!(err.contains(want), "missing '{want}' in: {err}");
        }
        let env = env_overrides(vars(&[("CTXD_MODEL_PRECISION", "int8")]));
        let err = Config::from_toml_with("", Path::new("c.toml"), env).unwrap_err().to_string();
        assert!(err.contains("CTXD_MODEL_PRECISION: model.precision: 'int8' is not auto, f32, bf16 or f16"), "{err}");
        let cfg = Config::from_toml("[model]\ndevice = \"cuda:1\"\nendpoint_kind = \"tei\"\n", Path::new("c.toml"));
        let model = cfg.unwrap().model;
        assert_eq!((model.device.to_string(), model.endpoint_kind.as_str()), ("cuda:1".into(), "tei"));
        // The server's, locate's and the aggregate's closed sets, typed as the file is read.
        let text = "[server]\nmcp_tools = \"search,grep\"\n[locate]\nmodel = \"best\"\n\n[[aggregate.sources]]\nname = \"a\"\nkind = \"grpc\"\n";
        let err = Config::from_toml(text, Path::new("c.toml")).unwrap_err().to_string();
        for want in [
            "line 2: server.mcp_tools: unknown MCP tool preset or tool 'grep'",
            "line 4: locate.model: 'best' is not fitted or hand",
            "aggregate.sources.kind: unknown variant `grpc`, expected one of `local`, `ctxd`, `mcp`",
        ] {
            assert!(err.contains(want), "missing '{want}' in: {err}");
        }
        let text = "[server]\nmcp_tools = \"locate,callers\"\n[locate]\nmodel = \"hand\"\n";
        let cfg = Config::from_toml(text, Path::new("c.toml")).unwrap();
        assert_eq!(cfg.server.mcp_tools.to_string(), "locate,callers");
        assert_eq!(cfg.locate.model, ctxd_choice::RankerName::Hand);
    }

    #[test]
    fn type_errors_missing_keys_and_bad_values_make_one_report_with_key_paths() {
        let text = "[chunk]\nmax_tokens = 8\n[pipeline]\nload = { capacity = 2 }\n[server]\nlisten = 5\n";
        let Err(ConfigError::Invalid { errors, .. }) = Config::from_toml(text, Path::new("c.toml")) else {
            panic!("an invalid config is reported as one ConfigErrors")
        };
        let keys: Vec<&str> = errors.0.iter().map(|p| p.key.as_str()).collect();
        for want in ["pipeline.load", "server.listen", "chunk.max_tokens"] {
            assert!(keys.contains(&want), "{want} missing in {keys:?}");
        }
        let missing = errors.0.iter().find(|p| p.key == "pipeline.load").unwrap();
        assert_eq!(missing.to_string(), "line 4: pipeline.load: missing field `workers`");
        let range = errors.0.iter().find(|p| p.key == "chunk.max_tokens").unwrap();
        assert_eq!(
            (range.place.as_deref(), range.to_string().as_str()),
            (None, "chunk.max_tokens must be at least 16")
        );
    }

    #[test]
    fn the_index_cache_is_sized_from_the_index_files_unless_set() {
        let tmp = tempfile::tempdir().unwrap();
        let mut cfg = IndexConfig { db: tmp.path().join("db"), ..Default::default() };
        assert_eq!(cfg.index_cache_bytes(), 64 << 20, "no index yet: the floor");
        let seg = cfg.db.join("chunks.lance/_indices/abc");
        std::fs::create_dir_all(&seg).unwrap();
        // Sparse files: sizes without the bytes.
        std::fs::File::create(seg.join("part.lance")).unwrap().set_len(200 << 20).unwrap();
        std::fs::create_dir_all(cfg.db.join("chunks.lance/data")).unwrap();
        std::fs::File::create(cfg.db.join("chunks.lance/data/x.lance")).unwrap().set_len(900 << 20).unwrap();
        assert_eq!(cfg.index_cache_bytes(), 300 << 20, "1.5 x the index files, data files not counted");
        std::fs::File::create(seg.join("more.lance")).unwrap().set_len(2 << 30).unwrap();
        assert_eq!(cfg.index_cache_bytes_within(None), 1 << 30, "capped at 1 GiB where the memory is unknown");
        assert_eq!(cfg.index_cache_bytes_within(Some(4 << 30)), 1 << 30, "a quarter of the memory");
        assert_eq!(cfg.index_cache_bytes_within(Some(64 << 30)), (2248 << 20) * 3 / 2, "1.5 x the index files");
        std::fs::File::create(seg.join("more.lance")).unwrap().set_len(4 << 30).unwrap();
        assert_eq!(cfg.index_cache_bytes_within(Some(64 << 30)), 4 << 30, "at most 4 GiB");
        cfg.index_cache_mb = 128;
        assert_eq!(cfg.index_cache_bytes(), 128 << 20, "a number is kept");
        cfg.index_cache_mb = 0;
        cfg.db = "s3://bucket/db".into();
        assert_eq!(cfg.index_cache_bytes(), 64 << 20);
    }

    #[test]
    fn every_shipped_config_parses() {
        let dir = Path::new(&manifest_dir()).join("../configs");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                n += 1;
            }
        }
        assert!(n >= 3, "configs/ holds the documented default and examples");
    }

    #[test]
    fn documented_default_matches_code_defaults() {
        let path = Path::new(&manifest_dir()).join("../configs/ctxd.toml");
        let file = Config::load(&path).unwrap();
        let code = Config::default();
        assert_eq!(format!("{:?}", file.pipeline), format!("{:?}", code.pipeline));
        assert_eq!(format!("{:?}", file.model), format!("{:?}", code.model));
        assert_eq!(format!("{:?}", file.chunk), format!("{:?}", code.chunk));
        assert_eq!(file.source.debounce_ms, code.source.debounce_ms);
        assert_eq!(file.index.index_cache_mb, code.index.index_cache_mb);
        assert_eq!(file.index.metadata_cache_mb, code.index.metadata_cache_mb);
        assert_eq!(file.index.optimize_every_rows, code.index.optimize_every_rows);
        assert_eq!(file.source.max_file_bytes, code.source.max_file_bytes);
        assert_eq!(file.server.listen, code.server.listen);
        assert_eq!(format!("{:?}", file.server), format!("{:?}", code.server));
        assert_eq!(file.index.lease_ttl_secs, code.index.lease_ttl_secs);
    }

    #[test]
    fn named_sources_are_an_array_of_tables_with_unique_names() {
        let text =
            "[[source]]\nname = \"api\"\nroot = \"repos/api\"\ninclude = [\"**/*.py\"]\nmax_file_bytes = 1000\n\n\
                    [[source]]\nname = \"docs\"\nroot = \"s3://bucket/docs\"\npoll_interval_secs = 5\n";
        let cfg = Config::from_toml(text, Path::new("/etc/ctxd/c.toml")).unwrap();
        let sources = cfg.sources();
        assert_eq!(cfg.source_names(), ["api", "docs"]);
        assert_eq!(sources[0].root, PathBuf::from("/etc/ctxd/repos/api"));
        assert_eq!((sources[0].include.as_slice(), sources[0].prefix()), (&["**/*.py".to_string()][..], "api/".into()));
        assert!(sources[1].is_object_store() && sources[1].poll_interval_secs == 5);
        assert_eq!(cfg.source.max_file_bytes, 1000, "a pipeline-wide key written once applies to all");

        let bad = "[[source]]\nname = \"a/b\"\nroot = \"x\"\n[[source]]\nname = \"d\"\nroot = \"y\"\ndebounce_ms = 5\n\
                   [[source]]\nname = \"d\"\nroot = \"z\"\ndebounce_ms = 7\nexclude = [\"[\"]\n[[source]]\nroot = \"w\"\n";
        let err = Config::from_toml(bad, Path::new("c.toml")).unwrap_err().to_string();
        for want in ["'a/b' may hold only", "used twice", "must agree", "is not a glob", "missing field `name`"] {
            assert!(err.contains(want) || (want == "must agree" && err.contains("the same in every")), "{want}: {err}");
        }
        let shared = "[[source]]\nname = \"a\"\ngit = \"a\"\nmirror_dir = \"m\"\n[[source]]\nname = \"b\"\ngit = \"b\"\nmirror_dir = \"m\"\n";
        let err = Config::from_toml(shared, Path::new("c.toml")).unwrap_err().to_string();
        assert!(err.contains("has the mirror_dir of source"), "{err}");
        let dotted = shared.replacen("mirror_dir = \"m\"", "mirror_dir = \"./m\"", 1);
        assert!(Config::from_toml(&dotted, Path::new("c.toml")).is_err(), "m and ./m are one folder");
        let one = Config::from_toml("[source]\nroot = \"r\"\nexclude = [\"*.log\"]\n", Path::new("/c.toml")).unwrap();
        assert!(!one.has_named_sources());
        assert_eq!(one.sources()[0].exclude, ["*.log"]);
        let named_one = Config::from_toml("[source]\nname = \"repo\"\nroot = \"r\"\n", Path::new("/c.toml")).unwrap();
        assert_eq!(named_one.source_names(), ["repo"]);
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        let cfg = Config::from_toml("[source]\nroot = \"src\"\n[index]\ndb = \"db\"\n", Path::new("/etc/ctxd/c.toml"))
            .unwrap();
        assert_eq!(cfg.source.root, PathBuf::from("/etc/ctxd/src"));
        assert_eq!(cfg.index.db, PathBuf::from("/etc/ctxd/db"));
    }

    #[test]
    fn a_file_that_does_not_read_says_which_and_keeps_its_cause() {
        use std::error::Error as _;
        let tmp = tempfile::tempdir().unwrap();
        let missing = tmp.path().join("nope.toml");
        let err = Config::load(&missing).unwrap_err();
        assert!(matches!(&err, ConfigError::Read { path, .. } if *path == missing), "{err:?}");
        assert!(err.to_string().contains("nope.toml"), "{err}");
        let cause = err.source().expect("the io error is kept as the cause");
        assert_eq!(cause.downcast_ref::<std::io::Error>().map(|e| e.kind()), Some(std::io::ErrorKind::NotFound));

        let server = ServerConfig { auth_token_file: Some(tmp.path().join("token")), ..Default::default() };
        if std::env::var_os("CTXD_AUTH_TOKEN").is_none() {
            let err = server.auth_token().unwrap_err();
            assert!(matches!(err, ConfigError::KeyFile { key: "auth_token_file", .. }), "{err:?}");
            assert!(err.source().is_some(), "{err:?}");
        }
        std::fs::write(tmp.path().join("secret"), "short").unwrap();
        let server = ServerConfig { webhook_secret_file: Some(tmp.path().join("secret")), ..Default::default() };
        let err = server.webhook_secret().unwrap_err();
        assert!(matches!(err, ConfigError::Value { .. }) && err.to_string().contains("16 characters"), "{err}");
    }
}
