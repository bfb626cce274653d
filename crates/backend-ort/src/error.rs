//! The ONNX Runtime backend's error type.

/// Everything that can go wrong loading or running a model through ONNX Runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No usable ONNX Runtime library.
    #[error(
        "ONNX Runtime 1.31 or newer was not found ({reasons}). Remedies: set ORT_DYLIB_PATH to an \
         ONNX Runtime 1.31 library (libonnxruntime.so / onnxruntime.dll), put the library beside \
         the executable, rebuild with network access so the build fetches it into the target \
         folder, or `pip install onnxruntime==1.31.1`; or use --backend native"
    )]
    LibraryNotFound { reasons: String },
    /// ONNX Runtime rejected the model or a run.
    #[error("ONNX Runtime: {context}: {message}")]
    Ort { context: String, message: String },
    /// The model's inputs or outputs are not what a decoder needs.
    #[error("model {model}: {message}")]
    Io { model: String, message: String },
    /// A requested execution provider is not available.
    #[error("execution provider {provider}: {message}")]
    Provider { provider: String, message: String },
}

impl Error {
    /// Wraps an `ort` error with what we were doing.
    pub fn ort(context: impl Into<String>, error: impl std::fmt::Display) -> Self {
        Error::Ort {
            context: context.into(),
            message: error.to_string(),
        }
    }
}

impl From<Error> for genai_engine::Error {
    fn from(error: Error) -> Self {
        genai_engine::Error::backend("ort", error)
    }
}
