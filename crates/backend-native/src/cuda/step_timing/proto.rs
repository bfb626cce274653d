//! The step-timing prototype itself: its source and shapes, the phases of a layer, the
//! compiled prototype and one step's buffers with its launches (one launch per phase, or one
//! persistent cooperative launch).

use crate::cuda::compile::{self, Source};
use crate::cuda::device::Device;
use crate::cuda::gemv_timing::{model_cases, time_graph};
use crate::cuda::launch::{launch_error as cuda, launch_raw, launch_with, opt_in_shared, param};
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use crate::settings::NvrtcDefine;
use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig, sys};
use std::sync::Arc;

use super::trace::{EVENTS, TraceSummary};

/// The prototype's source (compiled with the prelude like every kernel family; CI compiles it).
pub const STEP_PROTO: Source = Source {
    family: "step_proto",
    code: concat!(
        include_str!("../../../benches/step_proto.cu"),
        include_str!("../../../benches/step_stream.cu")
    ),
    symbols: &["step_phase", "step_persistent", "step_stream", "fill_f16"],
};

/// `step_stream`'s consumer warps (`SS_CONSUMERS`); its block adds the producer warp.
pub(super) const CONSUMERS: usize = 16;
/// A block's rows of a GLU phase at most (`SS_YMAX`: their sums wait in shared memory).
pub(super) const SUMS_MAX: usize = 512;

/// Threads and warps of a prototype block, and columns per warp item (`SP_*`).
pub(super) const THREADS: u32 = 256;
pub(super) const WARPS: usize = 8;
pub(super) const COLS: usize = 4;

/// The layers of a model shape the step runs: (hidden, qkv width, MLP width, layers); `tiny`
/// is 64 layers of 64-wide rows, where the phases' work is negligible and what is timed is
/// their boundaries.
pub fn step_shape(model: &str) -> Option<(usize, usize, usize, usize)> {
    if model == "tiny" {
        return Some((64, 64, 64, 64));
    }
    let layers = match model {
        "qwen2.5-0.5b" => 24,
        "qwen2.5-1.5b" => 28,
        "llama3-8b" => 32,
        _ => return None,
    };
    let cases = model_cases(model)?;
    Some((cases[0].k, cases[0].n, cases[3].k, layers))
}

/// What a phase does (`Phase::kind` in the prototype).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PhaseKind {
    /// A GEMV, weights `[n, k]` at `w`.
    Gemv = 0,
    /// A one-block RMS norm over `n` values.
    Norm = 1,
    /// The attention's stand-in: a norm, then `SP_ATTN_NS` of waiting.
    Attention = 2,
}

/// One phase as the kernels read it (`struct Phase`: seven 64-bit words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    pub kind: PhaseKind,
    pub n: usize,
    pub k: usize,
    /// The rows are (gate, up) pairs and y has `n / 2` values silu(gate . x) * (up . x) (the
    /// decoder's order and epilogue for a gated MLP).
    pub glu: bool,
    pub w: u64,
    pub x: u64,
    pub y: u64,
}

impl Phase {
    fn words(&self) -> [u64; 7] {
        let flag = |b: bool| u64::from(b);
        let (n, k) = (self.n as u64, self.k as u64);
        [
            self.kind as u64,
            n,
            k,
            flag(self.glu),
            self.w,
            self.x,
            self.y,
        ]
    }
}

/// Activation buffers of the chain: the residual row, the normed row, qkv, the attention
/// stand-in's output, o's output, the second normed row, silu(gate) * up.
#[derive(Debug, Clone, Copy)]
pub struct Rows {
    pub a: u64,
    pub b: u64,
    pub q: u64,
    pub t: u64,
    pub a2: u64,
    pub b2: u64,
    pub g: u64,
}

/// The seven phases of one layer over weights (qkv, o, gate/up, down) and the rows.
pub fn layer_phases((hidden, qkv, mlp): (usize, usize, usize), w: [u64; 4], r: Rows) -> [Phase; 7] {
    let tiny = |kind, x, y| Phase {
        kind,
        n: hidden,
        k: 0,
        glu: false,
        w: 0,
        x,
        y,
    };
    let gemv = |w, n, k, glu, x, y| Phase {
        kind: PhaseKind::Gemv,
        n,
        k,
        glu,
        w,
        x,
        y,
    };
    [
        tiny(PhaseKind::Norm, r.a, r.b),
        gemv(w[0], qkv, hidden, false, r.b, r.q),
        tiny(PhaseKind::Attention, r.q, r.t),
        gemv(w[1], hidden, hidden, false, r.t, r.a2),
        tiny(PhaseKind::Norm, r.a2, r.b2),
        gemv(w[2], 2 * mlp, hidden, true, r.b2, r.g),
        gemv(w[3], hidden, mlp, false, r.g, r.a),
    ]
}

/// Blocks of one phase's own launch: one item of [`COLS`] columns per warp, or one block (with
/// `SP_COLS` set otherwise by a define, warps loop over the items: the same results).
pub fn phase_blocks(p: &Phase) -> usize {
    if p.kind == PhaseKind::Gemv {
        p.n.div_ceil(COLS).div_ceil(WARPS)
    } else {
        1
    }
}

/// One way of running the step, timed.
#[derive(Debug, Clone)]
pub struct StepTiming {
    pub model: String,
    /// `launches`, or `persistent` with `early` (first weights loaded before each barrier).
    pub variant: String,
    pub blocks: usize,
    pub layers: usize,
    pub us_per_layer_median: f64,
    pub us_per_layer_min: f64,
    /// Weight bytes of one layer / median time of one layer.
    pub weight_gbs: f64,
    /// The step's output equals the launch-per-phase run's, bit for bit.
    pub same_bits: bool,
    /// Why this variant did not run (the other fields are then empty).
    pub error: Option<String>,
    /// Where a layer's time went, for a traced `stream` variant.
    pub trace: Option<TraceSummary>,
}

pub(super) struct Proto {
    pub(super) phase: CudaFunction,
    pub(super) persistent: CudaFunction,
    pub(super) stream: CudaFunction,
    pub(super) fill: CudaFunction,
    /// Dynamic shared memory a `step_stream` block may use (None: the driver allows no more
    /// than the default), and whether the device has bulk copies (sm_90 and later).
    pub(super) stream_dynamic: Option<usize>,
    pub(super) bulk_copies: bool,
    /// Dynamic shared memory a block may use (x of the widest GEMV must fit).
    pub(super) dynamic_max: usize,
    pub(super) sms: usize,
}

/// The prototype compiled with `defines` (its `SP_*` / `SS_*` knobs) and loaded.
pub(super) fn load(device: &Device, defines: &[NvrtcDefine]) -> Result<Proto, Error> {
    use sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
    let cubin = compile::compile(&STEP_PROTO, &device.arch, defines)?;
    let module = device
        .ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
        .map_err(cuda("module load"))?;
    let get = |name| module.load_function(name).map_err(cuda("function lookup"));
    let (phase, persistent, stream, fill) = (
        get("step_phase")?,
        get("step_persistent")?,
        get("step_stream")?,
        get("fill_f16")?,
    );
    let floor = 48 * 1024 - 64;
    let a = opt_in_shared(&device.ctx, &phase, 256, floor).unwrap_or(floor);
    let b = opt_in_shared(&device.ctx, &persistent, 256, floor).unwrap_or(floor);
    // The static shared memory: step_stream.cu's GLU sums and the norm's partial sums.
    let stream_static = SUMS_MAX * 4 + 256;
    let stream_dynamic = opt_in_shared(&device.ctx, &stream, stream_static, floor);
    let sms = device
        .ctx
        .attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(cuda("device attributes"))? as usize;
    Ok(Proto {
        phase,
        persistent,
        stream,
        fill,
        stream_dynamic,
        bulk_copies: device.major >= 9,
        dynamic_max: a.min(b),
        sms,
    })
}

/// One model shape's step on the device: its weights, rows and phase table.
pub(super) struct Step {
    pub(super) shape: (usize, usize, usize, usize),
    pub(super) layer_bytes: usize,
    /// Keeps the weights alive for the table's addresses.
    pub(super) _weights: Vec<DevBuf<u16>>,
    /// The chain's rows (a, b, q, t, a2, b2, g), and the residual row every run starts from.
    pub(super) rows: Vec<DevBuf<f32>>,
    pub(super) start: DevBuf<f32>,
    pub(super) phases: Vec<Phase>,
    pub(super) table: DevBuf<u64>,
    pub(super) barrier: DevBuf<u32>,
    /// `step_stream`'s counters: blocks done with each phase.
    pub(super) counters: DevBuf<u32>,
    /// `step_stream`'s trace: [`EVENTS`] words per phase and block.
    pub(super) trace: DevBuf<u64>,
}

impl Step {
    pub(super) fn new(stream: &Arc<CudaStream>, proto: &Proto, model: &str) -> Result<Step, Error> {
        let shape = step_shape(model).ok_or_else(|| {
            crate::error::invalid("model shape", format!("{model} is not a known shape"))
        })?;
        let (hidden, qkv, mlp, layers) = shape;
        if mlp.max(hidden) * 4 > proto.dynamic_max {
            return Err(crate::error::invalid(
                "model shape",
                format!("x of {mlp} floats does not fit {} bytes", proto.dynamic_max),
            ));
        }
        let dims = [
            (qkv, hidden),
            (hidden, hidden),
            (2 * mlp, hidden),
            (hidden, mlp),
        ];
        let mut weights = Vec::new();
        for l in 0..layers {
            for (i, (n, k)) in dims.iter().enumerate() {
                let w = DevBuf::<u16>::zeros(stream, n * k)?;
                fill(stream, &proto.fill, &w, (l * dims.len() + i) as u32)?;
                weights.push(w);
            }
        }
        let widths = [hidden, hidden, qkv, hidden, hidden, hidden, mlp];
        let rows = widths
            .iter()
            .map(|&len| DevBuf::<f32>::zeros(stream, len))
            .collect::<Result<Vec<_>, _>>()?;
        let r = Rows {
            a: rows[0].ptr,
            b: rows[1].ptr,
            q: rows[2].ptr,
            t: rows[3].ptr,
            a2: rows[4].ptr,
            b2: rows[5].ptr,
            g: rows[6].ptr,
        };
        let phases: Vec<Phase> = weights
            .chunks(dims.len())
            .flat_map(|w| {
                layer_phases(
                    (hidden, qkv, mlp),
                    [w[0].ptr, w[1].ptr, w[2].ptr, w[3].ptr],
                    r,
                )
            })
            .collect();
        let words: Vec<u64> = phases.iter().flat_map(Phase::words).collect();
        let start: Vec<f32> = (0..hidden).map(|i| ((i % 17) as f32 - 8.0) / 8.0).collect();
        Ok(Step {
            shape,
            layer_bytes: dims.iter().map(|(n, k)| n * k * 2).sum(),
            _weights: weights,
            rows,
            start: DevBuf::from_host(stream, &start)?,
            table: DevBuf::from_host(stream, &words)?,
            barrier: DevBuf::<u32>::zeros(stream, 1)?,
            counters: DevBuf::<u32>::zeros(stream, phases.len())?,
            trace: DevBuf::<u64>::zeros(stream, phases.len() * proto.sms * EVENTS)?,
            phases,
        })
    }

    /// One launch per phase, each a programmatic dependent launch.
    pub(super) fn launches(&self, stream: &Arc<CudaStream>, proto: &Proto) -> Result<(), Error> {
        for (i, p) in self.phases.iter().enumerate() {
            let index = i as i32;
            let mut params = [param(&self.table.ptr), param(&index)];
            let cfg = config(phase_blocks(p), (p.k * 4) as u32);
            // SAFETY: (table, index) match `step_phase`; the table's addresses are live
            // buffers sized for its phases; the shared memory is within the opt-in.
            unsafe { launch_raw(stream, &proto.phase, cfg, &mut params, true)? };
        }
        Ok(())
    }

    /// Every phase in one cooperative launch of `blocks` blocks.
    pub(super) fn persistent(
        &self,
        stream: &Arc<CudaStream>,
        proto: &Proto,
        blocks: usize,
        early: bool,
    ) -> Result<(), Error> {
        zero_words(stream, self.barrier.ptr, 1)?;
        let (count, early) = (self.phases.len() as i32, i32::from(early));
        let mut params = [
            param(&self.table.ptr),
            param(&count),
            param(&self.barrier.ptr),
            param(&early),
        ];
        let (hidden, _, mlp, _) = self.shape;
        let shared = (mlp.max(hidden) * 4) as u32; // the widest x any GEMV phase stages
        // SAFETY: the parameters match `step_persistent`; every block is resident at once (a
        // cooperative launch, refused otherwise), so the grid barrier cannot wait for a block
        // that never starts; the shared memory holds the widest x and is within the opt-in.
        unsafe {
            cooperative(
                stream,
                &proto.persistent,
                config(blocks, shared),
                &mut params,
            )
        }
    }

    /// Times `enqueue` after a restart of the residual row: (median, min) µs per step, and the
    /// residual row it leaves.
    pub(super) fn time(
        &self,
        stream: &Arc<CudaStream>,
        reps: usize,
        enqueue: &dyn Fn() -> Result<(), Error>,
    ) -> Result<((f64, f64), Vec<f32>), Error> {
        let (hidden, ..) = self.shape;
        let timed = time_graph(stream, 1, reps, |_| {
            copy(stream, self.start.ptr, self.rows[0].ptr, hidden * 4)?;
            enqueue()
        })?;
        let mut result = vec![0f32; hidden];
        self.rows[0].read(stream, &mut result)?;
        Ok((timed, result))
    }
}

pub(super) fn config(blocks: usize, shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: shared,
    }
}

pub(super) fn fill(
    stream: &Arc<CudaStream>,
    f: &CudaFunction,
    w: &DevBuf<u16>,
    seed: u32,
) -> Result<(), Error> {
    let n = w.len as u64;
    let mut params = [param(&w.ptr), param(&n), param(&seed)];
    // SAFETY: (w, n, seed) match `fill_f16`, which writes the n halves of `w` and nothing else.
    unsafe { launch_raw(stream, f, config(1024, 0), &mut params, false) }
}

pub(super) fn copy(
    stream: &Arc<CudaStream>,
    from: u64,
    to: u64,
    bytes: usize,
) -> Result<(), Error> {
    // SAFETY: both addresses are live device buffers of at least `bytes` bytes.
    unsafe { sys::cuMemcpyDtoDAsync_v2(to, from, bytes, stream.cu_stream()) }
        .result()
        .map_err(cuda("copy"))
}

pub(super) fn zero_words(stream: &Arc<CudaStream>, at: u64, words: usize) -> Result<(), Error> {
    // SAFETY: `at` is a live device buffer of at least `words` u32 words.
    unsafe { sys::cuMemsetD32Async(at, 0, words, stream.cu_stream()) }
        .result()
        .map_err(cuda("memset"))
}

/// A cooperative launch (every block resident at once, or the driver refuses it).
///
/// # Safety
/// `params` must match the kernel's signature and point to values that live through the call.
pub(super) unsafe fn cooperative(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    params: &mut [*mut std::ffi::c_void],
) -> Result<(), Error> {
    // SAFETY: an all-zero attribute is a valid value of this plain C union.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attr.value.cooperative = 1;
    // SAFETY: the caller guarantees `params`; the driver refuses a grid that cannot be resident.
    unsafe { launch_with(stream, f, cfg, params, std::slice::from_mut(&mut attr)) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_and_the_phase_table() {
        assert_eq!(step_shape("qwen2.5-0.5b"), Some((896, 1152, 4864, 24)));
        assert_eq!(step_shape("llama3-8b"), Some((4096, 6144, 14_336, 32)));
        assert_eq!(step_shape("gpt-2"), None);
        assert_eq!(step_shape("tiny"), Some((64, 64, 64, 64)));
        let r = Rows {
            a: 1,
            b: 2,
            q: 3,
            t: 4,
            a2: 5,
            b2: 6,
            g: 7,
        };
        let p = layer_phases((896, 1152, 4864), [10, 11, 12, 13], r);
        // The chain: each phase reads what the one before it wrote; down writes the residual.
        for pair in p.windows(2) {
            assert_eq!(pair[1].x, pair[0].y);
        }
        assert_eq!(p[6].y, p[0].x);
        assert_eq!(p.iter().filter(|p| p.kind == PhaseKind::Gemv).count(), 4);
        assert_eq!(p[5].words(), [0, 2 * 4864, 896, 1, 12, 6, 7]);
        assert_eq!(p[6].words(), [0, 896, 4864, 0, 13, 7, 1]);
        assert_eq!(p[0].words()[0], 1);
        assert_eq!(p[2].words()[0], 2);
        // One item of 4 columns per warp, 8 warps a block.
        assert_eq!(phase_blocks(&p[1]), 36);
        assert_eq!(phase_blocks(&p[5]), 304);
        assert_eq!(phase_blocks(&p[0]), 1);
    }

    #[test]
    fn the_rust_constants_match_the_prototype() {
        for (name, value) in [
            ("SP_THREADS", THREADS as usize),
            ("SP_WARPS", WARPS),
            ("SP_COLS", COLS),
            ("SS_EVENTS", EVENTS),
            ("SS_YMAX", SUMS_MAX),
            ("SS_CONSUMERS", CONSUMERS),
        ] {
            assert!(
                STEP_PROTO
                    .code
                    .contains(&format!("#define {name} {value}\n")),
                "{name}"
            );
        }
    }
}
