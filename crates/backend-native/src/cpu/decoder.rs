//! The native CPU decoder behind the engine's [`Decoder`] and [`DecodeBackend`] traits.

use crate::cpu::forward::{LayerCache, LogitsOf, forward};
use crate::cpu::model::NativeModel;
use crate::cpu::threads::ThreadPool;
use crate::error::Error;
use genai_engine::{BackendInfo, DecodeBackend, Decoder, StartOptions, StepInput};
use genai_frontend::DecoderPlan;
use genai_onnx::OnnxModel;
use std::sync::Arc;

/// Options of the native CPU backend.
#[derive(Debug, Clone, Default)]
pub struct CpuOptions {
    /// Worker threads; all available cores when `None`.
    pub threads: Option<usize>,
}

/// A loaded model, shared by every generation on it.
pub struct CpuDecoder {
    model: Arc<NativeModel>,
    pool: Arc<ThreadPool>,
    info: BackendInfo,
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
        let native = NativeModel::load(model, plan)?;
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
        })
    }

    /// Adds a reason to the backend's description (routing notes).
    pub fn add_reason(&mut self, reason: impl Into<String>) {
        self.info.reasons.insert(0, reason.into());
    }
}

impl Decoder for CpuDecoder {
    fn start(&self, options: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
        if options.batch != 1 {
            return Err(genai_engine::Error::backend(
                "native",
                format!(
                    "batch size {} is not supported yet: the native CPU decoder runs one sequence",
                    options.batch
                ),
            ));
        }
        let capacity = options.max_length;
        let mut kv_bytes = 0u64;
        for layer in &self.model.layers {
            let layer_bytes = genai_engine::memory::checked_bytes(
                "the KV cache",
                &[2, layer.kv_heads, capacity, layer.head_size],
                size_of::<f32>(),
            )?;
            kv_bytes = kv_bytes.saturating_add(layer_bytes);
        }
        genai_engine::memory::ensure_fits(
            &format!("the native KV cache for max_length {capacity}"),
            kv_bytes,
            None,
        )?;
        let caches = self
            .model
            .layers
            .iter()
            .map(|layer| {
                let len = layer.kv_heads * capacity * layer.head_size;
                LayerCache {
                    k: vec![0.0; len],
                    v: vec![0.0; len],
                }
            })
            .collect();
        Ok(Box::new(CpuState {
            model: Arc::clone(&self.model),
            pool: Arc::clone(&self.pool),
            caches,
            capacity,
            len: 0,
        }))
    }

    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn vocab_size(&self) -> usize {
        self.model.vocab
    }
}

/// One generation: its KV cache and position.
struct CpuState {
    model: Arc<NativeModel>,
    pool: Arc<ThreadPool>,
    caches: Vec<LayerCache>,
    capacity: usize,
    len: usize,
}

impl CpuState {
    fn run(
        &mut self,
        input: &StepInput<'_>,
        logits_of: LogitsOf,
    ) -> genai_engine::Result<Vec<f32>> {
        let past = input
            .total_len
            .checked_sub(input.new_len)
            .filter(|&p| p == self.len)
            .ok_or_else(|| {
                genai_engine::Error::InvalidState(format!(
                    "step starts at position {} but the KV cache holds {}",
                    input.total_len.saturating_sub(input.new_len),
                    self.len
                ))
            })?;
        if input.tokens.len() != input.new_len {
            return Err(genai_engine::Error::backend(
                "native",
                "batch size 1 expected",
            ));
        }
        let ids: Vec<i64> = input.tokens.iter().map(|&t| i64::from(t)).collect();
        let logits = forward(
            &self.model,
            &mut self.caches,
            self.capacity,
            past,
            &ids,
            logits_of,
            &self.pool,
        )
        .map_err(|e| genai_engine::Error::backend("native", e))?;
        self.len = input.total_len;
        Ok(logits)
    }
}

impl DecodeBackend for CpuState {
    fn forward(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
        self.run(input, LogitsOf::Last)
    }

    fn forward_all(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
        self.run(input, LogitsOf::Every)
    }

    fn rewind_to(&mut self, len: usize) -> genai_engine::Result<()> {
        self.len = len.min(self.len);
        Ok(())
    }

    fn cached_len(&self) -> usize {
        self.len
    }
}
