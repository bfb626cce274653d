//! The boundary between the generator and the decoders (ONNX Runtime, native CPU, native CUDA).
//!
//! A [`Decoder`] is a loaded model, shared between generators; [`Decoder::start`] makes a
//! [`DecodeBackend`], the per-generation state (its KV cache and position).

use crate::Result;
use crate::batch::{BatchBackend, BatchOptions};
use crate::choice::SamplingSpec;
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

/// What a backend counts while it runs (CUDA graph captures and replays, weight streaming,
/// device memory), for the `--json` outputs. Zero or absent for backends without them.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
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
    /// Decode steps a device backend enqueued before the host asked for them (on the token it
    /// had chosen on the device), and how many of those the next call did not take.
    pub run_ahead_steps: u64,
    pub run_ahead_unused: u64,
    /// Highest device memory in use (total minus free, as the driver reports it) seen by a
    /// device backend.
    pub peak_device_bytes: Option<u64>,
    /// Weight streaming under a VRAM budget, when the backend pages weights.
    pub paging: Option<PagingCounters>,
    /// Where single-token steps spend their time between the host and the device, when the
    /// backend was asked to time them (the CUDA decoder under `GENAI_BRIDGE_STEP_EVENTS=1`).
    pub step_clock: Option<StepClock>,
}

/// Medians over timed single-token steps of the intervals between four points of a step in
/// the device's stream order, in microseconds: the device idles for `host_gap_us` between the
/// previous step's last operation and this step's first (the host's turn: reading the token,
/// its bookkeeping, queueing the next step), copies the step's inputs in `inputs_us`, runs
/// the step's kernels (from the graph's launch) in `kernels_us` and chooses the token and
/// copies it back in `choice_us`.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StepClock {
    /// Steps timed (the host gap is measured from the second step of a generation on).
    pub steps: u64,
    pub host_gap_us: Option<f64>,
    pub inputs_us: f64,
    pub kernels_us: f64,
    pub choice_us: f64,
}

/// Weight streaming under a VRAM budget: the plan, and what was measured over decode steps.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct PagingCounters {
    /// The budget the plan was made for.
    pub budget_bytes: u64,
    /// Weight bytes kept in device memory.
    pub resident_weight_bytes: u64,
    /// Weight bytes copied from host memory every forward pass.
    pub streamed_weight_bytes: u64,
    /// Table bytes read in place from mapped host memory (a few rows per step).
    pub mapped_bytes: u64,
    /// Device slots the streamed weights rotate through, and their size.
    pub slots: u64,
    pub slot_bytes: u64,
    /// Decode steps measured.
    pub decode_steps: u64,
    /// Bytes copied from the host per decode step (counted over the steps).
    pub streamed_bytes_per_token: f64,
    /// Share of the weight bytes a decode step reads that were already on the device.
    pub byte_hit_rate: f64,
    /// Compute time spent waiting for copies, per decode step (timing events); absent when the
    /// timing could not be read.
    pub copy_stall_ms_per_token: Option<f64>,
    /// Host-to-device bandwidth the copies achieved while they ran (timing events).
    pub h2d_gbs: Option<f64>,
    /// Pinned host-to-device bandwidth measured at load (the link's limit).
    pub h2d_peak_gbs: f64,
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
    /// Creates a state for many sequences over one paged KV cache, stepped together; an error
    /// where the backend has none (the default).
    fn start_batch(&self, options: &BatchOptions) -> Result<Box<dyn BatchBackend>> {
        let _ = options;
        Err(crate::Error::InvalidState(format!(
            "the {} backend on {} runs no batch of independent sequences",
            self.info().backend,
            self.info().device
        )))
    }
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
    /// Runs a forward pass like [`forward`](Self::forward) for batch 1 and chooses the next
    /// token on the backend's device as `spec` says, returning only its id; the logits stay
    /// there. `Ok(None)`: not supported for this spec (the default) and nothing was run, so
    /// the caller takes the full-logits path.
    fn forward_choose(
        &mut self,
        input: &StepInput<'_>,
        spec: &SamplingSpec<'_>,
    ) -> Result<Option<i32>> {
        let _ = (input, spec);
        Ok(None)
    }
    /// Keeps the first `len` positions of the KV cache and drops the rest.
    fn rewind_to(&mut self, len: usize) -> Result<()>;
    /// Positions held in the KV cache.
    fn cached_len(&self) -> usize;
}
