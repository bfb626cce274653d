//! The native CUDA decoder behind the engine's [`Decoder`] and [`DecodeBackend`] traits.
//!
//! Prompts run eagerly (in chunks of up to 256 tokens), their dense linear layers as cuBLAS
//! GEMMs where cuBLAS loads (`CudaTuning::prefill_gemm` false keeps the GEMV kernels). Each
//! single-token decode step runs as
//! one CUDA graph, captured at the generation's first decode step and replayed after: the
//! host writes the token id and the position to device memory, launches the graph and reads the
//! logits back. A capture that fails is counted with its reason and the generation continues
//! eagerly; `CudaTuning::graph` false runs eagerly for A/B comparisons. Under a VRAM budget (or when the model does not fit the free device
//! memory) the weights that do not fit are streamed from page-locked host memory by the pager,
//! inside the same captured step. `forward_choose` runs the same step and then chooses the
//! token on the device (`choose.rs`): only its id comes back, and the next step is enqueued
//! before the host waits for it (`decoder/ahead.rs`).

mod ahead;
mod generation;
mod shared;

use crate::cuda::blas;
use crate::cuda::device::Device;
use crate::cuda::graph::{Counters, GraphCounters};
use crate::cuda::kernels::{Kernels, KvKind};
use crate::cuda::model::{DevModel, estimated_bytes};
use crate::cuda::residency::{self, Residency};
use crate::cuda::state::{Buffers, estimated_state_bytes};
use crate::cuda::step_clock::StepSamples;
use crate::error::Error;
use crate::paging::VramBudget;
use crate::settings::{self, CudaTuning};
use genai_engine::{
    BackendCounters, BackendInfo, DecodeBackend, Decoder, PagingCounters, StartOptions,
};
use genai_frontend::DecoderPlan;
use genai_onnx::OnnxModel;
use generation::CudaState;
use shared::{Shared, engine_error};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Options of the native CUDA backend.
#[derive(Debug, Clone, Default)]
pub struct CudaOptions {
    /// Device ordinal.
    pub device: usize,
    /// Device memory the decoder may use (weights, streaming slots, KV cache, workspace),
    /// shared with the other decoders given a budget on the device; what does not fit is
    /// streamed from host memory. `None`: streaming turns on only when the model does not fit
    /// the free device memory.
    pub vram_budget: Option<VramBudget>,
    /// Positions of KV cache the residency plan keeps room for (default: the model's).
    pub planned_length: Option<usize>,
    /// Every tuning switch (graph, device choice, running ahead, prompt GEMMs, the device
    /// memory limit, the kernel cache, the kernels' rules): `NativeTuning::from_lookup`, or
    /// `Default` for what ships.
    pub tuning: CudaTuning,
}

/// A model loaded on a CUDA device, shared by every generation on it.
pub struct CudaDecoder {
    shared: Arc<Shared>,
    info: BackendInfo,
}

impl CudaDecoder {
    /// Opens the device, compiles (or reads from the cache) the kernels and uploads the
    /// plan's weights.
    pub fn load(
        model: &OnnxModel,
        plan: &DecoderPlan,
        options: &CudaOptions,
    ) -> Result<Self, Error> {
        crate::cuda::check_plan(plan).map_err(|why| Error::Invalid { what: "plan", why })?;
        let tuning = &options.tuning;
        let device = Device::open(options.device)?;
        let mut kernels = Kernels::load(&device, tuning)?;
        let stream = device.ctx.default_stream();
        let limit = tuning.device_memory_limit;
        let driver_free = device.ctx.mem_get_info().map_or(0, |(free, _)| free as u64);
        let free = limit.map_or(driver_free, |l| l.min(driver_free));
        let planned_length = options
            .planned_length
            .unwrap_or(plan.dims.max_positions)
            .clamp(1, plan.dims.max_positions.max(1));
        // Streaming may be needed: read the weights first, then plan where they go.
        let may_stream = options.vram_budget.is_some()
            || estimated_bytes(plan) + estimated_state_bytes(plan, planned_length, tuning) > free;
        let mut dev_model = DevModel::load(&stream, model, plan, !may_stream, tuning)?;
        let layer_linears = dev_model.layers.iter().flat_map(|l| l.linears());
        kernels.fit_gemv_rule(layer_linears.filter_map(|l| l.one_row_dense()));
        let last_qkv = dev_model.layers.iter().filter_map(|l| l.qkv.parts.last());
        kernels.fit_attention_rule(last_qkv.filter_map(|(p, _)| p.one_row_dense()));
        let (prefill_gemm, gemm_reason) = blas::choose(tuning, &stream);
        let residency = if may_stream {
            let state_bytes =
                Buffers::bytes(&dev_model, planned_length, prefill_gemm, tuning) as u64;
            residency::place(
                &device,
                options.device,
                &stream,
                &mut dev_model,
                options.vram_budget,
                state_bytes,
                free,
            )?
        } else {
            Residency::resident()
        };
        stream.synchronize().map_err(|e| Error::Cuda {
            what: "weight upload",
            message: format!("{e:?}"),
        })?;
        let (graph, device_choice) = (tuning.graph, tuning.device_sampling);
        let mut reasons = vec![format!(
            "native CUDA decoder on {}, kernels: {} compiled, {} from the cache; {:.1} MB \
                 of weights per token; decode step {}",
            device.describe(),
            kernels.compiled,
            kernels.cached,
            dev_model.weight_bytes_per_token() as f64 / 1e6,
            if graph {
                "captured as a CUDA graph"
            } else {
                "eager"
            }
        )];
        reasons.push(gemm_reason);
        reasons.push(kernels.decode.describe());
        let kv = KvKind::chosen(dev_model.act, tuning.kv_f32);
        reasons.push(format!(
            "KV cache in {} ({} bytes a value; {}=1 keeps it in f32)",
            kv.name(),
            kv.bytes(),
            settings::KV_F32
        ));
        let head_sizes: Vec<usize> = dev_model.layers.iter().map(|l| l.head_size).collect();
        reasons.push(kernels.prompt.describe(kv, dev_model.act, &head_sizes));
        reasons.push(kernels.describe_one_row());
        reasons.extend(residency.reason.clone());
        let info = BackendInfo {
            backend: "native".into(),
            device: "cuda".into(),
            reasons,
        };
        let shared = Shared {
            device,
            kernels,
            model: dev_model,
            residency,
            counters: Counters::default(),
            graph,
            device_choice,
            prefill_gemm,
            run_ahead: graph && tuning.run_ahead,
            peak_device_bytes: AtomicU64::new(0),
            time_steps: tuning.step_events,
            step_samples: StepSamples::default(),
        };
        shared.sample_memory();
        Ok(CudaDecoder {
            shared: Arc::new(shared),
            info,
        })
    }

    /// Graph counters over every generation of this decoder.
    pub fn counters(&self) -> GraphCounters {
        self.shared.counters.snapshot()
    }

    /// Bytes of weights read per decoded token.
    pub fn weight_bytes_per_token(&self) -> usize {
        self.shared.model.weight_bytes_per_token()
    }

    /// Kernel families compiled at load and read from the disk cache.
    pub fn kernel_origins(&self) -> (usize, usize) {
        (self.shared.kernels.compiled, self.shared.kernels.cached)
    }
}

impl Decoder for CudaDecoder {
    fn start(&self, options: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
        Ok(Box::new(
            CudaState::start(&self.shared, options).map_err(engine_error)?,
        ))
    }

    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn vocab_size(&self) -> usize {
        self.shared.model.vocab
    }

    fn weight_bytes_per_token(&self) -> Option<u64> {
        Some(self.shared.model.weight_bytes_per_token() as u64)
    }

    fn counters(&self) -> BackendCounters {
        let c = self.counters();
        BackendCounters {
            graph_captures: c.captures,
            graph_replays: c.replays,
            eager_steps: c.eager_steps,
            graph_fallbacks: c.fallbacks,
            graph_fallback_reasons: c.fallback_reasons,
            run_ahead_steps: c.ahead_steps,
            run_ahead_unused: c.ahead_unused,
            peak_device_bytes: Some(self.shared.peak_device_bytes.load(Ordering::Relaxed)),
            paging: self.paging_counters(),
            step_clock: self.shared.step_samples.summary(),
        }
    }
}

impl CudaDecoder {
    /// The residency plan and what the pager measured, when a budget is in effect.
    fn paging_counters(&self) -> Option<PagingCounters> {
        let r = &self.shared.residency;
        let summary = r.summary.as_ref()?;
        let stats = r.pager.as_ref().map(|p| p.stats()).unwrap_or_default();
        let steps = stats.passes;
        let per_token = if steps > 0 {
            stats.streamed_bytes as f64 / steps as f64
        } else {
            summary.streamed_weight_bytes as f64
        };
        let read = self.shared.model.weight_bytes_per_token() as f64;
        // Timing figures only when every measured step could be timed.
        let timed = steps > 0 && stats.untimed_passes == 0;
        Some(PagingCounters {
            budget_bytes: summary.budget_bytes,
            resident_weight_bytes: summary.resident_weight_bytes,
            streamed_weight_bytes: summary.streamed_weight_bytes,
            mapped_bytes: summary.mapped_bytes,
            slots: summary.slots as u64,
            slot_bytes: summary.slot_bytes as u64,
            decode_steps: steps,
            streamed_bytes_per_token: per_token,
            byte_hit_rate: if read > 0.0 {
                (1.0 - per_token / read).clamp(0.0, 1.0)
            } else {
                1.0
            },
            copy_stall_ms_per_token: timed.then(|| stats.stall_ms / steps as f64),
            h2d_gbs: (timed && stats.copy_ms > 0.0)
                .then(|| stats.streamed_bytes as f64 / (stats.copy_ms / 1e3) / 1e9),
            h2d_peak_gbs: summary.h2d_bytes_per_s / 1e9,
        })
    }
}
