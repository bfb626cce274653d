//! The engine's error type.

/// Everything that can go wrong while generating.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A token id outside `0..vocab_size`.
    #[error(
        "token id {id} at position {position} is out of range: the model's vocabulary has {vocab_size} entries (ids 0..{vocab_size})"
    )]
    TokenOutOfRange {
        id: i64,
        position: usize,
        vocab_size: usize,
    },
    /// The sequence would grow past `max_length`.
    #[error(
        "sequence length {requested} exceeds max_length {max_length} (search.max_length is the total of prompt and generated tokens; raise it, up to the model's context_length {context_length})"
    )]
    TooLong {
        requested: usize,
        max_length: usize,
        context_length: usize,
    },
    /// Input shape does not fit the batch.
    #[error("{what}: got {got} tokens, which is not a multiple of the batch size {batch}")]
    BatchShape {
        what: &'static str,
        got: usize,
        batch: usize,
    },
    /// An API call made in a state where it makes no sense.
    #[error("{0}")]
    InvalidState(String),
    /// Bad search parameters.
    #[error("invalid search option: {0}")]
    InvalidOption(String),
    /// Set-logits with the wrong number of values.
    #[error("set_logits: expected {expected} values (batch × vocab_size), got {got}")]
    LogitsShape { expected: usize, got: usize },
    /// The backend failed.
    #[error("{backend} backend: {message}")]
    Backend { backend: String, message: String },
    /// Generation was cancelled from another thread.
    #[error("generation was cancelled")]
    Cancelled,
    /// The KV cache's blocks are all held: nothing was written or taken.
    #[error(
        "the KV cache is full: {needed} more block(s) of {block_size} positions are needed, {free} of \
         {total} are free; finish or cancel a sequence, or give the cache more blocks (a larger \
         KV memory budget, or a smaller batch or max_length)"
    )]
    OutOfKvBlocks {
        needed: usize,
        free: usize,
        total: usize,
        block_size: usize,
    },
    /// An allocation the machine cannot hold, refused before it was made.
    #[error(
        "{what} needs {bytes} bytes but only {available} bytes of memory are available; lower \
         search.max_length (or the batch size), or use a smaller model"
    )]
    OutOfMemory {
        what: String,
        bytes: u64,
        available: u64,
    },
}

impl Error {
    /// Wraps a backend's error message.
    pub fn backend(backend: impl Into<String>, message: impl std::fmt::Display) -> Self {
        Error::Backend {
            backend: backend.into(),
            message: message.to_string(),
        }
    }
}
