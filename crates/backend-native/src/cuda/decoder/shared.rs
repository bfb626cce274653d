//! What the generations of one CUDA decoder share ([`Shared`]), and its errors as the engine's.

use crate::cuda::device::Device;
use crate::cuda::graph::Counters;
use crate::cuda::kernels::Kernels;
use crate::cuda::model::DevModel;
use crate::cuda::residency::Residency;
use crate::cuda::step_clock::StepSamples;
use crate::error::Error;
use std::sync::atomic::{AtomicU64, Ordering};

/// What every generation on a decoder shares: the device, kernels, model and residency, the
/// counters, and the switches the tuning set at load.
pub(super) struct Shared {
    pub(super) device: Device,
    pub(super) kernels: Kernels,
    pub(super) model: DevModel,
    pub(super) residency: Residency,
    pub(super) counters: Counters,
    pub(super) graph: bool,
    /// Whether `forward_choose` chooses on the device.
    pub(super) device_choice: bool,
    /// Whether generations run prompts' dense layers as cuBLAS GEMMs.
    pub(super) prefill_gemm: bool,
    /// Whether device-chosen steps enqueue the next step before the host reads the token.
    pub(super) run_ahead: bool,
    /// Highest device memory in use seen (total minus free), sampled where this decoder
    /// allocates: after load, at each generation's start and after each graph capture.
    pub(super) peak_device_bytes: AtomicU64,
    /// Single-token steps are timed with events (`CudaTuning::step_events`), into these.
    pub(super) time_steps: bool,
    pub(super) step_samples: StepSamples,
}

impl Shared {
    /// Samples the driver's memory figures into the peak.
    pub(super) fn sample_memory(&self) {
        if let Ok((free, total)) = self.device.ctx.mem_get_info() {
            let used = total.saturating_sub(free) as u64;
            self.peak_device_bytes.fetch_max(used, Ordering::Relaxed);
        }
    }
}

/// A decoder error as the engine's.
pub(super) fn engine_error(e: Error) -> genai_engine::Error {
    genai_engine::Error::backend("native", e)
}
