//! A sharded first build on the pipeline's side: `ctxd index --shard I/N` is the pipeline of an
//! ordinary one-shot run over the files of shard `I` only, writing uncommitted fragments
//! ([`ctxd_index::build_shard`]); `ctxd index --commit` publishes every shard's in one commit
//! per table.
//!
//! What a shard does differently from `ctxd index`:
//! * each source's [`Selector`](ctxd_stages::select::Selector) takes only the files whose stored
//!   path hashes to the shard (a folder's scan and a bucket's listing skip the others before
//!   reading them: each shard downloads and reads 1/N of the objects);
//! * an S3 source mirrors into a folder of the shard's own beside the source's mirror
//!   (`<mirror>.shard-I-of-N`), so shards on one machine never share a listing;
//! * the upsert stage stages each batch instead of committing it, no full-text fold or
//!   maintenance runs, and no history is recorded (the writer records it on its first start);
//! * at the end it records what it wrote and the objects it downloaded ([`Pipeline::record_shard`]).
//!
//! A git source is refused: its refs' overlays are recorded beside the commits, by one writer.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ctxd_index::build_shard::{ShardBuild, ShardWritten};
use ctxd_index::error::IndexError;
use ctxd_index::source_objects::SourceObject;
use ctxd_stages::object::ObjectSource;

use crate::error::PipelineError;
use crate::pipeline::Pipeline;
use crate::reembed::Shard;
use crate::source::Origin;

/// Opens of the index a shard tries: shards started together race to create its tables, and
/// the losers open what the winner created.
const OPEN_TRIES: u32 = 4;

impl Pipeline {
    /// Opens the pipeline of `cfg` as shard `shard` of a first build of its index (refused when
    /// the index holds chunks already, or a source is a git repository).
    pub async fn open_shard(cfg: ctxd_config::Config, shard: Shard) -> Result<Self, PipelineError> {
        if let Some(src) = cfg.sources().iter().find(|s| s.git.is_some()) {
            return Err(build_error(
                &cfg,
                format!(
                    "source '{}' is a git repository: a sharded build takes folders and S3 prefixes; index a git \
                     source with `ctxd index` or the writer",
                    src.name
                ),
            ));
        }
        let mut tries = 1;
        let mut pipeline = loop {
            match Pipeline::open(cfg.clone()).await {
                Err(PipelineError::Index(IndexError::Lance { source, .. })) if tries < OPEN_TRIES => {
                    tracing::info!(
                        "opening the index failed ({source}); another shard may be creating it: trying again"
                    );
                    tokio::time::sleep(Duration::from_millis(500 * u64::from(tries))).await;
                    tries += 1;
                }
                opened => break opened?,
            }
        };
        let build = ShardBuild::start(pipeline.index.clone(), shard.index, shard.of).await?;
        pipeline.shard = Some((Arc::new(build), shard));
        Ok(pipeline)
    }

    /// After a shard's run: records what it wrote and the S3 objects it downloaded, so that the
    /// commit counts it done (refused when a batch could not be written).
    pub async fn record_shard(&self) -> Result<ShardWritten, PipelineError> {
        let Some((build, shard)) = &self.shard else {
            return Err(build_error(&self.cfg, "this pipeline is not a shard (`Pipeline::open_shard`)".into()));
        };
        let failed = *self.triggers.failed_commits().borrow();
        if failed > 0 {
            return Err(build_error(
                &self.cfg,
                format!(
                    "shard {shard}: {failed} batch(es) could not be written (see the log); nothing was recorded: run \
                     the shard again"
                ),
            ));
        }
        let mut objects = Vec::new();
        for src in self.cfg.sources().iter().filter(|s| s.is_object_store()) {
            let uri = src.root.to_string_lossy();
            let mirror = shard_mirror(&src.mirror(), *shard);
            let source = ObjectSource::open(&uri, mirror, self.cfg.source.max_file_bytes)?;
            objects.extend(source.downloaded().map(|(rel, version)| SourceObject {
                source: src.name.clone(),
                rel: rel.to_string(),
                version: version.clone(),
            }));
        }
        Ok(build.record(&objects).await?)
    }
}

impl Origin {
    /// The same origin reading only the files of `shard` (an S3 source into the shard's mirror).
    pub(crate) fn into_share(self, shard: Shard) -> Result<Self, PipelineError> {
        Ok(match self {
            Origin::Local(scanner) => {
                let select = scanner.selector().clone().with_share(shard.index, shard.of);
                Origin::Local(scanner.with_selector(select))
            }
            Origin::Objects { source, every, events } => {
                let mirror = shard_mirror(source.mirror(), shard);
                let select = source.selector().clone().with_share(shard.index, shard.of);
                let source = Box::new((*source).with_mirror(mirror)?.with_selector(select));
                Origin::Objects { source, every, events }
            }
            Origin::Git { .. } => unreachable!("a shard refuses git sources when it opens"),
        })
    }
}

/// The mirror of an S3 source that `shard` uses: `<mirror>.shard-I-of-N` beside the source's.
fn shard_mirror(mirror: &Path, shard: Shard) -> PathBuf {
    let name = mirror.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "mirror".into());
    mirror.with_file_name(format!("{name}.shard-{}-of-{}", shard.index, shard.of))
}

fn build_error(cfg: &ctxd_config::Config, message: String) -> PipelineError {
    PipelineError::Build { db: cfg.index.db.display().to_string(), message }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_mirrors_beside_the_source_mirror() {
        let shard = Shard { index: 2, of: 4 };
        assert_eq!(
            shard_mirror(Path::new("/cache/ctxd/s3/docs"), shard),
            Path::new("/cache/ctxd/s3/docs.shard-2-of-4")
        );
    }
}
