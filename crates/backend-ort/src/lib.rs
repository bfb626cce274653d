//! The ONNX Runtime backend: loads the decoder graph of a model folder into an ONNX Runtime
//! session (CPU or CUDA execution provider) and drives it with a KV cache, implementing the
//! engine's [`genai_engine::Decoder`] and [`genai_engine::DecodeBackend`].

mod cuda_graph;
mod device;
mod error;
mod io;
mod kv;
pub mod library;
mod session;
mod shared;
mod state;
mod tensors;

pub use device::Device;
pub use error::Error;
pub use session::{OrtDecoder, OrtOptions};
