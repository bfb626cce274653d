//! The ONNX Runtime backend: loads the decoder graph of a model folder into an ONNX Runtime
//! session (CPU or CUDA execution provider) and drives it with a KV cache, implementing the
//! engine's [`genai_engine::Decoder`] and [`genai_engine::DecodeBackend`].

mod error;
mod graph;
mod graph_step;
mod io;
mod kv;
pub mod library;
mod session;
mod state;
mod tensors;

pub use error::Error;
pub use session::{Device, OrtDecoder, OrtOptions};
