//! The one error type of the tokenizer crate: loading, encoding, decoding and chat templates.

use std::path::PathBuf;

/// Everything that can go wrong in `genai-tokenizer`, with the facts needed to act on it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file the model folder must have is not there.
    #[error("required file {path} is missing")]
    MissingFile { path: PathBuf },

    /// A file exists but could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A file was read but its contents are not what we expect.
    #[error("invalid {path}: {message}")]
    InvalidFile { path: PathBuf, message: String },

    /// The tokenizer could not encode a text.
    #[error("cannot encode text: {message}")]
    Encode { message: String },

    /// The tokenizer's decoder failed on a sequence of valid ids.
    #[error("cannot decode tokens: {message}")]
    Decode { message: String },

    /// A token id that is negative or has no token in the vocabulary.
    #[error("token id {id} is not in the vocabulary (size {vocab_size})")]
    InvalidTokenId { id: i64, vocab_size: usize },

    /// A chat template was asked for but neither the caller nor the model has one.
    #[error("no chat template: the model folder has none and none was given")]
    NoChatTemplate,

    /// The messages (or tools) JSON given to `apply_chat_template` is not of the expected shape.
    #[error("invalid {what} JSON: {message}")]
    InvalidChatInput { what: &'static str, message: String },

    /// The template called `raise_exception(message)`.
    #[error("chat template raised an exception: {message}")]
    TemplateException { message: String },

    /// The template did more work than allowed (an endless or very long loop).
    #[error("chat template ran out of fuel after {fuel} instructions")]
    TemplateOutOfFuel { fuel: u64 },

    /// The template wrote more text than allowed.
    #[error("chat template output exceeds {limit} bytes")]
    TemplateOutputTooLarge { limit: usize },

    /// Any other template failure: syntax, unknown filter, include/import, recursion, ...
    #[error("chat template error: {message}")]
    Template { message: String },
}
