//! The embed stage as a graph [`BatchStage`]: a batch's files are embedded in one call to
//! [`Embed::embed_files`] (weighted by tokens); removals pass through in their place; failed
//! files are counted in the run's [`Counters`].

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Embed, EmbeddedFile};
use crate::chunk::ChunkedFile;
use crate::counters::Counters;
use crate::stage::BatchStage;
use crate::{error::StageError, FileWork};

/// Embeds batches of chunked files.
pub struct EmbedStage {
    embed: Embed,
    counters: Arc<Counters>,
}

impl EmbedStage {
    /// An embed stage counting failures into `counters`.
    pub fn new(embed: Embed, counters: Arc<Counters>) -> Self {
        Self { embed, counters }
    }
}

impl BatchStage for EmbedStage {
    type In = FileWork<ChunkedFile>;
    type Out = FileWork<EmbeddedFile>;
    const NAME: &'static str = "embed";

    fn weight(&self, item: &Self::In) -> usize {
        match item {
            FileWork::Update(f) => Embed::weight(f),
            FileWork::Remove(_) => 1,
        }
    }

    async fn process_batch(&self, items: Vec<Self::In>) -> Vec<Result<Option<Self::Out>, StageError>> {
        let mut files = Vec::new();
        let mut slots = Vec::with_capacity(items.len());
        for item in items {
            match item {
                FileWork::Update(f) => {
                    slots.push(None);
                    files.push(f);
                }
                FileWork::Remove(rel) => slots.push(Some(rel)),
            }
        }
        let mut embedded = self.embed.embed_files(files).await.into_iter();
        slots
            .into_iter()
            .map(|slot| match slot {
                Some(rel) => Ok(Some(FileWork::Remove(rel))),
                None => match embedded.next().expect("one result per file") {
                    Ok(f) => Ok(Some(FileWork::Update(f))),
                    Err(e) => {
                        self.counters.failed.fetch_add(1, Ordering::Relaxed);
                        Err(e)
                    }
                },
            })
            .collect()
    }
}
