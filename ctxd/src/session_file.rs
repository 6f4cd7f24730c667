//! The CLI's sessions between processes: `ctxd context --session ID` is one process per call,
//! so the session it answers in is read from and written back to
//! `<cache>/ctxd/sessions/<database key>/<ID>.json` (`$CTXD_SESSION_DIR/<database key>/…` when
//! set; the database key: 16 hex digits of the
//! blake3 of the database's absolute path, so two databases never share a session). A file
//! idle past the session time-out is not taken back; a corrupt one is an error that names it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use ctxd_context::session::{validate_id, SavedSession, Sessions};

/// Where session `id` of database `db` is kept.
fn path_of(db: &Path, id: &str) -> PathBuf {
    let abs = std::path::absolute(db).unwrap_or_else(|_| db.to_path_buf());
    let key = blake3::hash(abs.to_string_lossy().as_bytes()).to_hex();
    let base = match std::env::var_os("CTXD_SESSION_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => dirs::cache_dir().unwrap_or_else(|| PathBuf::from(".cache")).join("ctxd").join("sessions"),
    };
    base.join(&key.as_str()[..16]).join(format!("{id}.json"))
}

/// The CLI's session of one command: none, or one loaded from its file (and written back).
pub struct SessionFile(Option<(String, PathBuf)>);

impl SessionFile {
    /// Loads session `id` of `db` into `sessions` when a live one was saved (`None`: no session).
    pub fn load(sessions: &Sessions, db: &Path, id: Option<&str>) -> Result<Self> {
        let Some(id) = id else { return Ok(Self(None)) };
        validate_id(id)?;
        let file = path_of(db, id);
        match std::fs::read(&file) {
            Ok(bytes) => {
                let saved: SavedSession = serde_json::from_slice(&bytes).with_context(|| {
                    format!(
                        "session file {} is not a saved session: delete it to start the session afresh",
                        file.display()
                    )
                })?;
                sessions.restore(id, saved);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("reading session file {}", file.display())),
        }
        Ok(Self(Some((id.to_string(), file))))
    }

    /// Writes the session back (atomically: a temporary file renamed over it).
    pub fn save(&self, sessions: &Sessions) -> Result<()> {
        let Some((id, file)) = &self.0 else { return Ok(()) };
        let Some(saved) = sessions.save(id) else { return Ok(()) };
        let dir = file.parent().context("session file has no folder")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating session folder {}", dir.display()))?;
        let tmp = file.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(&saved)?).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, file).with_context(|| format!("writing session file {}", file.display()))?;
        Ok(())
    }
}
