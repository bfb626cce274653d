//! The ONNX Runtime GenAI C ABI over genai-bridge: the `Oga*` functions with the official names,
//! signatures and semantics, built as the drop-in `onnxruntime-genai` shared library. A model
//! opens as a `genai_runtime::Session`, with the CLI's router and rules; built with
//! `--features cuda`, a config asking for the cuda provider can route to the native CUDA decoder.
//!
//! # Contract at the boundary
//! - Fallible functions return `OgaResult*`: null on success, an error object otherwise, read
//!   with `OgaResultGetError` and freed with `OgaDestroyResult`. No panic crosses the boundary:
//!   every body runs under `catch_unwind`.
//! - Every handle is checked against a registry of live handles before use, so a null,
//!   destroyed or mistyped pointer is an error, not undefined behaviour; every `Destroy`
//!   function accepts null and ignores a pointer it does not know (a second destroy included).
//! - Strings returned through `const char**` out-parameters by `Decode`, `ApplyChatTemplate`,
//!   `ModelGetType` and `ModelGetDeviceType` are owned by the caller (`OgaDestroyString`);
//!   pointers returned by getters (sequence data, next tokens, EOS ids, stream chunks, string
//!   array entries, error messages) stay owned by their object.
//!
//! # Thread safety
//! As the official library documents it: a model and a tokenizer may be shared by any number of
//! threads; a generator, its params, a tokenizer stream, sequences and tensors belong to one
//! thread at a time (calls on them are serialised by a lock, so misuse is safe but meaningless),
//! except `OgaGenerator_SetRuntimeOption("terminate_session", …)`, which may be called from any
//! thread while another generates. Destroying a handle while another thread uses it is the
//! caller's error, as there.

mod config;
mod ffi;
mod generator;
mod log;
mod log_options;
mod model;
mod params;
mod sequences;
mod stream;
mod strings;
mod tensor;
mod tokenizer;
mod unsupported;

pub use config::OgaConfig;
pub use ffi::{Error, OgaResult, live_count};
pub use generator::OgaGenerator;
pub use model::OgaModel;
pub use params::OgaGeneratorParams;
pub use sequences::OgaSequences;
pub use stream::OgaTokenizerStream;
pub use strings::OgaStringArray;
pub use tensor::*;
pub use tokenizer::OgaTokenizer;
