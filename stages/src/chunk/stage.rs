//! The chunk stage as a graph [`Stage`]: a file is chunked on a blocking thread; a file too
//! large to hold is streamed in parts, every part but the last handed to a [`PartSender`]
//! (the wiring sends it downstream and counts it in flight), the last one is the result.

use std::sync::Arc;

use super::{ChunkedFile, Chunker, PartBudget};
use crate::load::LoadedFile;
use crate::stage::Stage;
use crate::{error::StageError, FileWork};

/// Takes an extra part of a streamed file; false when the graph is closing (reading stops).
pub type PartSender = Arc<dyn Fn(ChunkedFile) -> bool + Send + Sync>;

/// Chunks loaded files (see [`Chunker`]).
pub struct ChunkStage {
    chunker: Chunker,
    budget: PartBudget,
    /// Where the parts of a streamed file go (all but the last, which is the stage's result).
    parts: PartSender,
    block_bytes: usize,
}

impl ChunkStage {
    /// A chunk stage; streamed files are read `block_bytes` at a time within `budget`.
    pub fn new(chunker: Chunker, budget: PartBudget, parts: PartSender, block_bytes: usize) -> Self {
        Self { chunker, budget, parts, block_bytes }
    }
}

impl Stage for ChunkStage {
    type In = FileWork<LoadedFile>;
    type Out = FileWork<ChunkedFile>;
    const NAME: &'static str = "chunk";

    async fn process(&self, item: Self::In) -> Result<Option<Self::Out>, StageError> {
        match item {
            FileWork::Remove(rel) => Ok(Some(FileWork::Remove(rel))),
            FileWork::Update(file) => {
                let chunker = self.chunker.clone();
                let rel = file.rel.clone();
                if let Some(path) = file.stream.clone() {
                    let (parts, block, budget) = (self.parts.clone(), self.block_bytes, self.budget.clone());
                    let last = tokio::task::spawn_blocking(move || {
                        chunker.stream(&file, &path, block, &budget, |part| parts(part))
                    })
                    .await
                    .map_err(|e| StageError::Panic { stage: "chunk", path: rel.clone(), message: e.to_string() })?
                    .map_err(|source| StageError::Read { path: rel.into(), source })?;
                    return Ok(Some(FileWork::Update(last)));
                }
                let chunked = tokio::task::spawn_blocking(move || chunker.chunk_file(&file))
                    .await
                    .map_err(|e| StageError::Panic { stage: "chunk", path: rel, message: e.to_string() })?;
                Ok(Some(FileWork::Update(chunked)))
            }
        }
    }
}
