//! Errors of the roles, each keeping its cause.

/// An error of what the binary injects (opening an index for reading, reading the
/// configuration again), with its causes.
pub type Injected = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A role could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum RoleError {
    /// (Boxed: a pipeline error is large, and the roles return it on rare paths only.)
    #[error("{0}")]
    Pipeline(#[source] Box<ctxd_pipeline::error::PipelineError>),
    #[error("{0}")]
    Index(#[from] ctxd_index::error::IndexError),
    /// The active table changed again while a model switch opened it (another switch).
    #[error("the active table changed again while opening (now {now}, expected {expected})")]
    Raced { expected: String, now: String },
    /// Opening the index for reading (the binary's opener) failed.
    #[error("opening the index for reading: {0}")]
    Open(#[source] Injected),
}

impl From<ctxd_pipeline::error::PipelineError> for RoleError {
    fn from(e: ctxd_pipeline::error::PipelineError) -> Self {
        RoleError::Pipeline(Box::new(e))
    }
}
