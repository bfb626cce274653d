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

use crate::cuda::blas;
use crate::cuda::choose::{Chooser, process_ids};
use crate::cuda::device::Device;
use crate::cuda::graph::{Counters, GraphCounters, StepGraph};
use crate::cuda::kernels::CHUNK;
use crate::cuda::kernels::{Kernels, KvKind, Ops};
use crate::cuda::launch::launch_error;
use crate::cuda::memory::DevPtr;
use crate::cuda::model::{DevModel, estimated_bytes};
use crate::cuda::pager::PagerPass;
use crate::cuda::pass::Pass;
use crate::cuda::residency::{self, Residency};
use crate::cuda::state::{Buffers, enqueue, estimated_state_bytes};
use crate::cuda::step_clock::{Point, StepEvents, StepSamples};
use crate::error::Error;
use crate::paging::{Reservation, VramBudget};
use crate::settings::{self, CudaTuning};
use ahead::Ahead;
use cudarc::driver::{CudaEvent, CudaStream};
use genai_engine::{
    BackendCounters, BackendInfo, DecodeBackend, Decoder, PagingCounters, SamplingSpec,
    StartOptions, StepInput,
};
use genai_frontend::DecoderPlan;
use genai_onnx::OnnxModel;
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

struct Shared {
    device: Device,
    kernels: Kernels,
    model: DevModel,
    residency: Residency,
    counters: Counters,
    graph: bool,
    /// Whether `forward_choose` chooses on the device.
    device_choice: bool,
    /// Whether generations run prompts' dense layers as cuBLAS GEMMs.
    prefill_gemm: bool,
    /// Whether device-chosen steps enqueue the next step before the host reads the token.
    run_ahead: bool,
    /// Highest device memory in use seen (total minus free), sampled where this decoder
    /// allocates: after load, at each generation's start and after each graph capture.
    peak_device_bytes: AtomicU64,
    /// Single-token steps are timed with events (`CudaTuning::step_events`), into these.
    time_steps: bool,
    step_samples: StepSamples,
}

impl Shared {
    /// Samples the driver's memory figures into the peak.
    fn sample_memory(&self) {
        if let Ok((free, total)) = self.device.ctx.mem_get_info() {
            let used = total.saturating_sub(free) as u64;
            self.peak_device_bytes.fetch_max(used, Ordering::Relaxed);
        }
    }
}

/// A model loaded on a CUDA device, shared by every generation on it.
pub struct CudaDecoder {
    shared: Arc<Shared>,
    info: BackendInfo,
}

fn engine_error(e: Error) -> genai_engine::Error {
    genai_engine::Error::backend("native", e)
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

    fn start_state(&self, options: &StartOptions) -> Result<CudaState, Error> {
        if options.batch != 1 {
            return Err(Error::Invalid {
                what: "batch",
                why: format!(
                    "batch size {} is not supported yet: the native CUDA decoder runs one sequence",
                    options.batch
                ),
            });
        }
        let stream = self
            .shared
            .device
            .ctx
            .new_stream()
            .map_err(|e| Error::Cuda {
                what: "stream",
                message: format!("{e:?}"),
            })?;
        let model = &self.shared.model;
        let reservation = match &self.shared.residency.budget {
            Some(budget) => {
                let gemm = self.shared.prefill_gemm;
                let tuning = &self.shared.kernels.tuning;
                let bytes = Buffers::bytes(model, options.max_length, gemm, tuning) as u64;
                Some(budget.reserve(bytes).map_err(|_| Error::Invalid {
                    what: "VRAM budget",
                    why: format!(
                        "this generation's KV cache and workspace ({:.2} GB for max_length {}) do \
                         not fit in what is left of the VRAM budget ({:.2} GB); lower max_length \
                         or raise the budget",
                        bytes as f64 / 1e9,
                        options.max_length,
                        budget.available() as f64 / 1e9
                    ),
                })?)
            }
            None => None,
        };
        let (gemm, tuning) = (self.shared.prefill_gemm, &self.shared.kernels.tuning);
        let buffers = Buffers::new(&stream, model, options.max_length, gemm, tuning)?;
        self.shared.sample_memory();
        let clock = if self.shared.time_steps {
            Some(StepEvents::new(&self.shared.device.ctx)?)
        } else {
            None
        };
        Ok(CudaState {
            shared: Arc::clone(&self.shared),
            stream,
            buffers,
            _reservation: reservation,
            graph: None,
            graph_failed: false,
            len: 0,
            chooser: None,
            clock,
            ahead: None,
            ready_event: None,
        })
    }
}

impl Decoder for CudaDecoder {
    fn start(&self, options: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
        Ok(Box::new(self.start_state(options).map_err(engine_error)?))
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

/// One generation: its device buffers, KV cache, graph and position.
struct CudaState {
    shared: Arc<Shared>,
    stream: Arc<CudaStream>,
    buffers: Buffers,
    /// Its share of the VRAM budget, returned when the generation ends.
    _reservation: Option<Reservation>,
    graph: Option<StepGraph>,
    graph_failed: bool,
    len: usize,
    /// The device choice's buffers, made at its first use.
    chooser: Option<Chooser>,
    /// Timing events of single-token steps, when asked for (`step_clock.rs`).
    clock: Option<StepEvents>,
    /// The step enqueued ahead of the host, if any (`decoder/ahead.rs`).
    ahead: Option<Ahead>,
    /// Recorded after a choice's copy when a step is enqueued behind it: what the host waits
    /// for then.
    ready_event: Option<CudaEvent>,
}

impl CudaState {
    /// Enqueues one forward pass over `m` tokens, with the pager's copies when weights stream.
    fn pass(&self, m: usize, capturing: bool) -> Result<(), Error> {
        let s = &self.shared;
        let pass = s
            .residency
            .pager
            .as_ref()
            .map(|pager| PagerPass::begin(pager, &self.stream, capturing))
            .transpose()?;
        let ops = Pass {
            ops: Ops {
                k: &s.kernels,
                stream: &self.stream,
                // The pager's copies and event waits sit between kernels: plain launches then.
                pdl: s.kernels.pdl && pass.is_none(),
            },
            pager: pass.as_ref(),
            blas: self.buffers.blas.as_ref(),
        };
        enqueue(&ops, &s.model, &self.buffers, m)?;
        pass.map_or(Ok(()), PagerPass::end)
    }

    fn run(&mut self, tokens: &[i32]) -> Result<Vec<f32>, Error> {
        let shared = Arc::clone(&self.shared);
        let s = &shared;
        // Generations on this decoder share the streaming slots: one pass sequence at a time.
        let _slots = s.residency.pager.as_ref().map(|p| p.lock());
        self.mark(tokens.len(), Point::Start);
        self.passes(tokens)?;
        self.mark(tokens.len(), Point::KernelsEnd);
        // The logits' copy waits for the host, so the choice (on the host) falls in the gap.
        self.mark(tokens.len(), Point::End);
        let mut logits = vec![0.0f32; s.model.vocab];
        self.buffers.logits.read(&self.stream, &mut logits)?;
        self.finish(tokens.len())?;
        Ok(logits)
    }

    /// Runs the passes, then chooses on the device with the processing ids `ids` (from
    /// `process_ids`): only the id comes back.
    fn run_choose(
        &mut self,
        tokens: &[i32],
        spec: &SamplingSpec<'_>,
        ids: (&[i32], usize),
    ) -> Result<i32, Error> {
        let shared = Arc::clone(&self.shared);
        let s = &shared;
        let _slots = s.residency.pager.as_ref().map(|p| p.lock());
        self.mark(tokens.len(), Point::Start);
        self.passes(tokens)?;
        self.mark(tokens.len(), Point::KernelsEnd);
        // After the step (a graph launch or eager kernels): plain launches.
        let ops = Ops {
            k: &s.kernels,
            stream: &self.stream,
            pdl: false,
        };
        let logits = (self.buffers.logits.ptr, s.model.vocab);
        let mut chooser = self.chooser.take().ok_or(Error::Invalid {
            what: "device choice",
            why: "no buffers".into(),
        })?;
        let chosen = chooser
            .enqueue(&self.stream, &ops, logits, spec, ids)
            .and_then(|()| {
                self.mark(tokens.len(), Point::End);
                self.wait_for_choice(tokens.len(), chooser.chosen_ptr())
            })
            .and_then(|()| chooser.read());
        self.chooser = Some(chooser);
        let token = chosen?;
        self.ahead_runs_on(token);
        Ok(token)
    }

    /// Waits until the chosen id has been copied to the host: after enqueueing the next step
    /// on it when that step may run ahead (then for the event before that step), else for the
    /// whole stream.
    fn wait_for_choice(&mut self, tokens: usize, chosen: DevPtr) -> Result<(), Error> {
        match self.enqueue_ahead(self.len + tokens, chosen)? {
            Some(ready) => ready.synchronize().map_err(launch_error("token choice")),
            None => self.finish(tokens),
        }
    }

    /// Waits for the step (an explicit synchronize: what the host reads next was copied on
    /// this stream) and does its accounting.
    fn finish(&mut self, tokens: usize) -> Result<(), Error> {
        let s = &self.shared;
        self.stream
            .synchronize()
            .map_err(launch_error("forward pass"))?;
        if let Some(clock) = &mut self.clock {
            if tokens != 1 {
                clock.break_chain();
            } else if let Some(split) = clock.take() {
                s.step_samples.push(split);
            }
        }
        if tokens == 1
            && let Some(pager) = &s.residency.pager
        {
            pager.account_pass();
        }
        Ok(())
    }

    /// Records `point` of a single-token step when steps are timed.
    fn mark(&mut self, tokens: usize, point: Point) {
        if let Some(clock) = self.clock.as_mut().filter(|_| tokens == 1) {
            clock.mark(point, &self.stream);
        }
    }

    /// Captures the single-token step's graph if the generation has none yet (and may have
    /// one). A capture that fails is counted with its reason and leaves the generation eager.
    fn capture_step(&mut self) {
        let s = Arc::clone(&self.shared);
        if s.graph && !self.graph_failed && self.graph.is_none() {
            match StepGraph::capture(&self.stream, || self.pass(1, true)) {
                Ok(graph) => {
                    s.counters.captured();
                    self.graph = Some(graph);
                    // Instantiating the graph takes device memory; steps take none.
                    s.sample_memory();
                }
                Err(e) => {
                    s.counters
                        .fallback(format!("decode-step capture failed: {e}"));
                    self.graph_failed = true;
                }
            }
        }
    }

    /// Enqueues the forward passes over `tokens` (the graph for a single token), unless the
    /// step ahead is that step.
    fn passes(&mut self, tokens: &[i32]) -> Result<(), Error> {
        if self.take_ahead(tokens) {
            self.shared.counters.took_ahead();
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        let s = &shared;
        let mut past = self.len;
        for chunk in tokens.chunks(CHUNK) {
            let m = chunk.len();
            self.buffers.ids.write(&self.stream, chunk)?;
            self.buffers.write_step(&self.stream, past, m)?;
            if m == 1 {
                self.capture_step();
            }
            self.mark(tokens.len(), Point::Launch);
            match (&self.graph, m) {
                (Some(graph), 1) => {
                    graph.launch()?;
                    s.counters.replayed();
                }
                _ => {
                    self.pass(m, false)?;
                    if m == 1 {
                        s.counters.eager_step();
                    }
                }
            }
            past += m;
        }
        Ok(())
    }

    /// The checks of a step's input against the cache.
    fn check_input(&self, input: &StepInput<'_>) -> genai_engine::Result<()> {
        let past = input.total_len.checked_sub(input.new_len);
        if past != Some(self.len) {
            return Err(genai_engine::Error::InvalidState(format!(
                "step starts at position {} but the KV cache holds {}",
                input.total_len.saturating_sub(input.new_len),
                self.len
            )));
        }
        if input.tokens.len() != input.new_len || input.new_len == 0 {
            return Err(genai_engine::Error::backend(
                "native",
                "batch size 1 with at least one new token expected",
            ));
        }
        let vocab = self.shared.model.vocab;
        if let Some((i, &id)) = input
            .tokens
            .iter()
            .enumerate()
            .find(|&(_, &id)| id < 0 || id as usize >= vocab)
        {
            return Err(genai_engine::Error::TokenOutOfRange {
                id: i64::from(id),
                position: self.len + i,
                vocab_size: vocab,
            });
        }
        let limit = self.buffers.capacity.min(self.shared.model.max_positions);
        if input.total_len > limit {
            return Err(engine_error(Error::Invalid {
                what: "sequence",
                why: format!(
                    "{} positions exceed the KV cache's {} (or the model's {} positions)",
                    input.total_len, self.buffers.capacity, self.shared.model.max_positions
                ),
            }));
        }
        Ok(())
    }
}

impl DecodeBackend for CudaState {
    fn forward(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
        self.check_input(input)?;
        let logits = self.run(input.tokens).map_err(engine_error)?;
        self.len = input.total_len;
        Ok(logits)
    }

    fn forward_choose(
        &mut self,
        input: &StepInput<'_>,
        spec: &SamplingSpec<'_>,
    ) -> genai_engine::Result<Option<i32>> {
        if !self.shared.device_choice || spec.no_repeat_ngram != 0 {
            return Ok(None);
        }
        self.check_input(input)?;
        if self.chooser.is_none() {
            let chooser = Chooser::new(&self.stream, self.buffers.capacity);
            self.chooser = Some(chooser.map_err(engine_error)?);
        }
        // The distinct penalised ids, computed once per step (the whole sequence's).
        let (ids, penalized) = process_ids(spec);
        if !self.chooser.as_ref().is_some_and(|c| c.fits(ids.len())) {
            return Ok(None);
        }
        let token = self
            .run_choose(input.tokens, spec, (&ids, penalized))
            .map_err(engine_error)?;
        self.len = input.total_len;
        Ok(Some(token))
    }

    fn rewind_to(&mut self, len: usize) -> genai_engine::Result<()> {
        // Positions past `len` are overwritten by the next steps; the graph reads the position
        // from device memory, so it stays valid. A step ahead is not taken after a rewind.
        self.ahead = None;
        self.len = len.min(self.len);
        Ok(())
    }

    fn cached_len(&self) -> usize {
        self.len
    }
}
