//! Tokenizer for genai-bridge: encode/decode with ONNX Runtime GenAI 0.18 semantics, streaming
//! detokenization and Hugging Face compatible chat templates, loaded from a model folder.
//!
//! Conventions (those of ONNX Runtime GenAI): `encode` adds no special tokens (no BOS), `decode`
//! skips special tokens, batch encoding pads on the right with the `pad_token_id` of
//! genai_config.json, and token ids are `i32`.
//!
//! BPE tokenizers follow the rules of the runtime's own tokenizer (onnxruntime-extensions), not
//! those of the `tokenizers` library where the two differ (modules `model`, `encoder`, `spm`,
//! `bytelevel`, `pretok`, `bpe` and `detok` say how). The text given to `encode` ends at its
//! first NUL, as a C string would.

mod bpe;
mod bytelevel;
mod chat;
mod config;
mod detok;
mod encoder;
mod error;
mod model;
mod pretok;
mod pyfmt;
mod spm;
mod stream;
mod strftime;
mod tokenizer;

pub use error::Error;
pub use stream::StreamDecoder;
pub use tokenizer::{SpecialTokens, Tokenizer};
