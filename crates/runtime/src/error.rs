//! The crate's error type. Every message carries its causes, and no variant hands a cause out as
//! `source()`: a front end printing the whole chain (the CLI) shows each cause once, and one
//! printing the message only (the C ABI) misses none.

use genai_engine::NoRoute;

/// Everything that can stop a model from opening or a generation from starting.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// genai_config.json could not be read or is invalid.
    #[error("{path}: {error}")]
    Config {
        path: String,
        error: genai_config::Error,
    },
    /// The decoder graph could not be read.
    #[error("{path}: {error}")]
    Onnx {
        path: String,
        error: genai_onnx::Error,
    },
    /// The tokenizer files could not be read.
    #[error("{0}")]
    Tokenizer(genai_tokenizer::Error),
    /// A malformed setting (environment variable or provider option).
    #[error("{name}=\"{value}\" {why}")]
    Setting {
        name: &'static str,
        value: String,
        why: String,
    },
    #[error(transparent)]
    NoRoute(#[from] NoRoute),
    #[error(transparent)]
    Ort(#[from] genai_backend_ort::Error),
    #[error("native decoder: {0}")]
    Native(genai_backend_native::Error),
    /// A generation could not start.
    #[error("{0}")]
    Engine(genai_engine::Error),
}

impl From<genai_backend_native::Error> for Error {
    fn from(e: genai_backend_native::Error) -> Self {
        Error::Native(e)
    }
}

impl From<genai_tokenizer::Error> for Error {
    fn from(e: genai_tokenizer::Error) -> Self {
        Error::Tokenizer(e)
    }
}

impl From<genai_engine::Error> for Error {
    fn from(e: genai_engine::Error) -> Self {
        Error::Engine(e)
    }
}
