//! The component traits the pipeline's stage tasks (`ctxd-pipeline`'s `stage_tasks`) run: a [`Stage`]
//! maps one item to zero or one item, a [`BatchStage`] takes batches capped by a weight (e.g.
//! tokens), a [`Sink`] consumes batches (commits). Each stage module implements its own next to
//! its logic (`load::stage`, `chunk::stage`, `embed::stage`, `upsert::stage`).

use std::future::Future;

use crate::error::StageError;

/// A stage that maps one item to zero or one item.
pub trait Stage: Send + Sync + 'static {
    type In: Send + 'static;
    type Out: Send + 'static;
    /// Stage name (metric label).
    const NAME: &'static str;
    /// Processes one item: `Ok(None)` drops it on purpose (counted as dropped).
    fn process(&self, item: Self::In) -> impl Future<Output = Result<Option<Self::Out>, StageError>> + Send;
}

/// A stage that processes batches (e.g. one model request for many files).
pub trait BatchStage: Send + Sync + 'static {
    type In: Send + 'static;
    type Out: Send + 'static;
    const NAME: &'static str;
    /// Weight of an item towards the batch cap (e.g. tokens).
    fn weight(&self, item: &Self::In) -> usize;
    /// Processes a batch; one result per input, in order.
    fn process_batch(
        &self,
        items: Vec<Self::In>,
    ) -> impl Future<Output = Vec<Result<Option<Self::Out>, StageError>>> + Send;
}

/// The last stage: consumes batches (one commit per batch).
pub trait Sink: Send + Sync + 'static {
    type In: Send + 'static;
    const NAME: &'static str;
    /// Weight of an item towards the batch cap (e.g. rows).
    fn weight(&self, item: &Self::In) -> usize;
    /// Writes a batch.
    fn write(&self, items: Vec<Self::In>) -> impl Future<Output = Result<(), StageError>> + Send;
    /// Upkeep after a batch was written and its items counted out of the pipeline (index
    /// maintenance): kept out of [`Sink::write`] so that a commit readers can already see is not
    /// still counted in flight — changed and not committed — while it runs.
    fn after_write(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}
