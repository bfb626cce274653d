//! What the caller of [`Session`](crate::Session) asks for when it opens a model.

use genai_engine::{BackendRequest, DeviceKind};

/// The caller's choices; each one left unset goes to the [`Settings`](crate::Settings) or the
/// config.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// The backend; `None`: `GENAI_BRIDGE_BACKEND`, else auto.
    pub backend: Option<BackendRequest>,
    /// The device; `None`: what genai_config.json's providers ask for.
    pub device: Option<DeviceKind>,
    /// Decoder threads; `None`: the config's `intra_op_num_threads` when positive, else the
    /// backend's choice.
    pub threads: Option<usize>,
    /// Run a short teacher-forced parity check of the native decoder against ONNX Runtime and
    /// fall back to ONNX Runtime when it is out of tolerance.
    pub verify: bool,
    /// `BYTES|PERCENT`: the device memory the native CUDA decoder may use, streaming the
    /// weights that do not fit. Overrides `GENAI_BRIDGE_VRAM_BUDGET` and the config's `cuda`
    /// provider option `vram_budget`.
    pub vram_budget: Option<String>,
    /// Positions of KV cache a VRAM budget plans room for (default: the config's max_length).
    pub planned_length: Option<usize>,
    /// Load the tokenizer while opening, before the decoder, so a missing or broken tokenizer
    /// fails the open; otherwise on its first use.
    pub eager_tokenizer: bool,
}
