//! The native CPU decoder behind the engine's [`Decoder`] and [`DecodeBackend`] traits.

use crate::cpu::batch::CpuBatch;
use crate::cpu::kv::BLOCK_SIZE;
use crate::cpu::model::NativeModel;
use crate::cpu::threads::ThreadPool;
use crate::error::Error;
use crate::settings::CpuTuning;
use genai_engine::batch::{BatchBackend, BatchOptions};
use genai_engine::{BackendInfo, DecodeBackend, Decoder, PaddedBatch, StartOptions};
use genai_frontend::DecoderPlan;
use genai_onnx::OnnxModel;
use std::sync::Arc;

/// Options of the native CPU backend.
#[derive(Debug, Clone, Default)]
pub struct CpuOptions {
    /// Worker threads; all available cores when `None`.
    pub threads: Option<usize>,
    /// The ISA cap and the host memory limit (`NativeTuning::from_lookup`).
    pub tuning: CpuTuning,
}

/// A loaded model, shared by every generation on it.
pub struct CpuDecoder {
    model: Arc<NativeModel>,
    pool: Arc<ThreadPool>,
    info: BackendInfo,
    /// Host memory treated as available at most (`CpuTuning::memory_limit`).
    memory_limit: Option<u64>,
}

impl CpuDecoder {
    /// Prepares the plan's weights from the ONNX model.
    pub fn load(
        model: &OnnxModel,
        plan: &DecoderPlan,
        options: &CpuOptions,
    ) -> Result<Self, Error> {
        let threads = options
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let pool = ThreadPool::new(threads)?;
        // The instruction set is a process-wide choice (`Isa::set_cap`): the last load's cap.
        crate::cpu::kernels::Isa::set_cap(options.tuning.isa_cap);
        let memory_limit = options.tuning.memory_limit;
        let native = NativeModel::load(model, plan, memory_limit)?;
        let info = BackendInfo {
            backend: "native".into(),
            device: "cpu".into(),
            reasons: vec![format!(
                "native CPU decoder, {threads} threads, {} instruction set, {:.1} MB of weights per token",
                crate::cpu::kernels::Isa::best().name(),
                native.weight_bytes_per_token() as f64 / 1e6
            )],
        };
        Ok(CpuDecoder {
            model: Arc::new(native),
            pool: Arc::new(pool),
            info,
            memory_limit,
        })
    }

    /// Adds a reason to the backend's description (routing notes).
    pub fn add_reason(&mut self, reason: impl Into<String>) {
        self.info.reasons.insert(0, reason.into());
    }
}

impl Decoder for CpuDecoder {
    fn start(&self, options: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
        // One sequence per row, each with room for max_length positions.
        let per_row = options.max_length.div_ceil(BLOCK_SIZE) * BLOCK_SIZE;
        let batch = self.start_batch(&BatchOptions {
            kv_positions: options.batch.saturating_mul(per_row),
            max_sequence: options.max_length,
        })?;
        Ok(Box::new(PaddedBatch::new(batch, options.batch)))
    }

    fn start_batch(&self, options: &BatchOptions) -> genai_engine::Result<Box<dyn BatchBackend>> {
        Ok(Box::new(CpuBatch::new(
            Arc::clone(&self.model),
            Arc::clone(&self.pool),
            options,
            self.memory_limit,
        )?))
    }

    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn vocab_size(&self) -> usize {
        self.model.vocab
    }

    fn weight_bytes_per_token(&self) -> Option<u64> {
        Some(self.model.weight_bytes_per_token() as u64)
    }
}
