//! The native CUDA decoder behind the engine's [`Decoder`] and [`DecodeBackend`] traits.
//!
//! Prompts run eagerly (in chunks of up to 256 tokens). Each single-token decode step runs as
//! one CUDA graph, captured at the generation's first decode step and replayed after: the
//! host writes the token id and the position to device memory, launches the graph and reads the
//! logits back. A capture that fails is counted with its reason and the generation continues
//! eagerly; `CudaOptions::graph = Some(false)` (or `GENAI_BRIDGE_CUDA_GRAPH=0`) runs eagerly
//! for A/B comparisons.

use crate::cuda::device::Device;
use crate::cuda::graph::{Counters, GraphCounters, StepGraph};
use crate::cuda::kernels::{Kernels, Ops};
use crate::cuda::model::DevModel;
use crate::cuda::state::{Buffers, CHUNK, enqueue};
use crate::error::Error;
use cudarc::driver::CudaStream;
use genai_engine::{BackendCounters, BackendInfo, DecodeBackend, Decoder, StartOptions, StepInput};
use genai_frontend::DecoderPlan;
use genai_onnx::OnnxModel;
use std::sync::Arc;

/// Environment variable: `0` turns the decode-step graph off.
pub const GRAPH_ENV: &str = "GENAI_BRIDGE_CUDA_GRAPH";

/// Options of the native CUDA backend.
#[derive(Debug, Clone, Default)]
pub struct CudaOptions {
    /// Device ordinal.
    pub device: usize,
    /// Capture the decode step as a CUDA graph; `None`: yes unless `GENAI_BRIDGE_CUDA_GRAPH=0`.
    pub graph: Option<bool>,
}

struct Shared {
    device: Device,
    kernels: Kernels,
    model: DevModel,
    counters: Counters,
    graph: bool,
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
        let device = Device::open(options.device)?;
        let kernels = Kernels::load(&device)?;
        let stream = device.ctx.default_stream();
        let dev_model = DevModel::load(&stream, model, plan)?;
        stream.synchronize().map_err(|e| Error::Cuda {
            what: "weight upload",
            message: format!("{e:?}"),
        })?;
        let graph = options
            .graph
            .unwrap_or_else(|| std::env::var(GRAPH_ENV).map_or(true, |v| v != "0"));
        let info = BackendInfo {
            backend: "native".into(),
            device: "cuda".into(),
            reasons: vec![format!(
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
            )],
        };
        Ok(CudaDecoder {
            shared: Arc::new(Shared {
                device,
                kernels,
                model: dev_model,
                counters: Counters::default(),
                graph,
            }),
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
        let buffers = Buffers::new(&stream, &self.shared.model, options.max_length)?;
        Ok(CudaState {
            shared: Arc::clone(&self.shared),
            stream,
            buffers,
            graph: None,
            graph_failed: false,
            len: 0,
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
        }
    }
}

/// One generation: its device buffers, KV cache, graph and position.
struct CudaState {
    shared: Arc<Shared>,
    stream: Arc<CudaStream>,
    buffers: Buffers,
    graph: Option<StepGraph>,
    graph_failed: bool,
    len: usize,
}

impl CudaState {
    fn run(&mut self, tokens: &[i32]) -> Result<Vec<f32>, Error> {
        let s = &self.shared;
        let ops = Ops {
            k: &s.kernels,
            stream: &self.stream,
        };
        let mut past = self.len;
        for chunk in tokens.chunks(CHUNK) {
            let m = chunk.len();
            self.buffers.ids.write(&self.stream, chunk)?;
            let step = [past as i32, m as i32, 0, 0];
            self.buffers.step.write(&self.stream, &step)?;
            if m == 1 && s.graph && !self.graph_failed && self.graph.is_none() {
                match StepGraph::capture(&self.stream, || enqueue(&ops, &s.model, &self.buffers, 1))
                {
                    Ok(graph) => {
                        s.counters.captured();
                        self.graph = Some(graph);
                    }
                    Err(e) => {
                        s.counters
                            .fallback(format!("decode-step capture failed: {e}"));
                        self.graph_failed = true;
                    }
                }
            }
            match (&self.graph, m) {
                (Some(graph), 1) => {
                    graph.launch()?;
                    s.counters.replayed();
                }
                _ => {
                    enqueue(&ops, &s.model, &self.buffers, m)?;
                    if m == 1 {
                        s.counters.eager_step();
                    }
                }
            }
            past += m;
        }
        let mut logits = vec![0.0f32; s.model.vocab];
        self.buffers.logits.read(&self.stream, &mut logits)?;
        self.stream.synchronize().map_err(|e| Error::Cuda {
            what: "forward pass",
            message: format!("{e:?}"),
        })?;
        Ok(logits)
    }
}

impl DecodeBackend for CudaState {
    fn forward(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
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
        let logits = self.run(input.tokens).map_err(engine_error)?;
        self.len = input.total_len;
        Ok(logits)
    }

    fn rewind_to(&mut self, len: usize) -> genai_engine::Result<()> {
        // Positions past `len` are overwritten by the next steps; the graph reads the position
        // from device memory, so it stays valid.
        self.len = len.min(self.len);
        Ok(())
    }

    fn cached_len(&self) -> usize {
        self.len
    }
}
