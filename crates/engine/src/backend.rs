//! The boundary between the generator and the decoders (ONNX Runtime, native CPU, native CUDA).
//!
//! A [`Decoder`] is a loaded model, shared between generators; [`Decoder::start`] makes a
//! [`DecodeBackend`], the per-generation state (its KV cache and position).

use crate::Result;
use serde::Serialize;

/// What a backend says about itself, for `route` and `--json` output.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct BackendInfo {
    /// "ort" or "native".
    pub backend: String,
    /// "cpu" or "cuda".
    pub device: String,
    /// Why this backend and device were chosen, and anything notable about them.
    pub reasons: Vec<String>,
}

/// What a backend counts while it runs (CUDA graph captures and replays today), for the
/// `--json` outputs. Zero everywhere for backends without a graph.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct BackendCounters {
    /// Decode-step graphs captured.
    pub graph_captures: u64,
    /// Decode steps run by replaying a captured graph.
    pub graph_replays: u64,
    /// Decode steps run without a graph.
    pub eager_steps: u64,
    /// Captures that failed and left a generation eager.
    pub graph_fallbacks: u64,
    /// Why, for the first few.
    pub graph_fallback_reasons: Vec<String>,
}

/// How one generation's state is laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartOptions {
    /// Rows decoded together.
    pub batch: usize,
    /// Total sequence capacity (prompt + generated).
    pub max_length: usize,
    /// One KV buffer of `max_length` per layer that past inputs and present outputs alias.
    pub past_present_share_buffer: bool,
}

/// Input of one forward pass.
#[derive(Debug, Clone, Copy)]
pub struct StepInput<'a> {
    /// New token ids, row-major `[batch, new_len]`.
    pub tokens: &'a [i32],
    /// Number of new tokens per row.
    pub new_len: usize,
    /// Attention mask over the whole sequence including the new tokens, row-major
    /// `[batch, total_len]`; 1 attends, 0 is padding.
    pub attention_mask: &'a [i64],
    /// Length of every row including the new tokens.
    pub total_len: usize,
}

/// A loaded model that can start generations. Thread safety: shared by any number of threads
/// (`Send + Sync`); each generation gets its own [`DecodeBackend`] state.
pub trait Decoder: Send + Sync {
    /// Creates the per-generation state.
    fn start(&self, options: &StartOptions) -> Result<Box<dyn DecodeBackend>>;
    /// Which backend and device run this model.
    fn info(&self) -> &BackendInfo;
    /// Number of logits per position.
    fn vocab_size(&self) -> usize;
    /// The backend's counters so far, over every generation it started.
    fn counters(&self) -> BackendCounters {
        BackendCounters::default()
    }
    /// Bytes of weights one decode step reads, where the backend knows it (the native ones).
    fn weight_bytes_per_token(&self) -> Option<u64> {
        None
    }
}

/// The state of one generation: runs forward passes and owns the KV cache. Thread safety: may
/// move between threads (`Send`), used by one at a time (`&mut self`).
pub trait DecodeBackend: Send {
    /// Runs the new tokens through the model, extending the KV cache, and returns the logits of
    /// the last new position of every row, row-major `[batch, vocab]`, as f32.
    fn forward(&mut self, input: &StepInput<'_>) -> Result<Vec<f32>>;
    /// Like [`forward`](Self::forward), but returns the logits of every new position,
    /// row-major `[batch, new_len, vocab]` (what the model's `logits` output holds).
    fn forward_all(&mut self, input: &StepInput<'_>) -> Result<Vec<f32>> {
        let _ = input;
        Err(crate::Error::InvalidState(
            "this backend returns the logits of the last position only".into(),
        ))
    }
    /// Keeps the first `len` positions of the KV cache and drops the rest.
    fn rewind_to(&mut self, len: usize) -> Result<()>;
    /// Positions held in the KV cache.
    fn cached_len(&self) -> usize;
}
