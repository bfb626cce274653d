//! One generation's device state: KV cache, activation buffers, step scalars, sized for up to
//! `CHUNK` new tokens a pass (the pass itself is `forward.rs`). Every address is fixed for the
//! generation and the position is read from device memory (`step[0]`), so the sequence for one
//! token can be captured once as a CUDA graph and replayed at any position.

use crate::cuda::blas::{Blas, GemmScratch};
use crate::cuda::host::Form;
use crate::cuda::kernels::{ATTN_CHUNK, CHUNK, GemmType, KvKind};
use crate::cuda::memory::DevBuf;
use crate::cuda::model::{DevLayer, DevModel};
use crate::error::Error;
use crate::settings::CudaTuning;
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// Device buffers of one generation.
pub(crate) struct Buffers {
    pub capacity: usize,
    pub splits: usize,
    /// `[past_len, new_len, 0, 0]`.
    pub step: DevBuf<i32>,
    pub ids: DevBuf<i32>,
    pub(crate) x: DevBuf<f32>,
    pub(crate) normed: DevBuf<f32>,
    pub(crate) delta: DevBuf<f32>,
    pub(crate) qkv: DevBuf<f32>,
    pub(crate) attn: DevBuf<f32>,
    pub(crate) part: DevBuf<f32>,
    /// Attention tickets `[CHUNK, heads]`, zero between launches.
    pub(crate) counts: DevBuf<i32>,
    pub(crate) gu: DevBuf<f32>,
    pub(crate) h: DevBuf<f32>,
    pub(crate) qa: DevBuf<i8>,
    pub(crate) sa: DevBuf<f32>,
    pub logits: DevBuf<f32>,
    /// Per layer: keys and values `[kv_heads, capacity, head_size]` of `kv_kind` (bytes).
    pub(crate) kv: Vec<(DevBuf<u8>, DevBuf<u8>)>,
    pub kv_kind: KvKind,
    /// The cuBLAS handle, workspace and scratch of prompt GEMMs, when they are on.
    pub blas: Option<Blas>,
}

/// Element counts of one generation's buffers (f32 unless noted).
struct Sizes {
    qkv: usize,
    attn: usize,
    part: usize,
    counts: usize,
    gu: usize,
    h: usize,
    /// i8 values and f32 scales.
    quant: (usize, usize),
    splits: usize,
    /// Per layer: keys (and values) elements.
    kv: Vec<usize>,
    kv_kind: KvKind,
    /// Prompt GEMMs' scratch, when they are on and the layers have dense weights.
    gemm: Option<GemmScratch>,
}

impl Sizes {
    fn of(model: &DevModel, capacity: usize, gemm: bool, tuning: &CudaTuning) -> Sizes {
        let layers = &model.layers;
        let max = |f: &dyn Fn(&DevLayer) -> usize| layers.iter().map(f).max().unwrap_or(0);
        let mut quant = model.lm_head.quant_scratch();
        for p in layers.iter().flat_map(DevLayer::linears) {
            let (q, s) = p.quant_scratch();
            quant = (quant.0.max(q), quant.1.max(s));
        }
        let splits = capacity.div_ceil(ATTN_CHUNK).max(1);
        Sizes {
            qkv: CHUNK * max(&|l| l.qkv_width()),
            attn: CHUNK * max(&|l| l.heads * l.head_size),
            part: CHUNK * max(&|l| l.heads * (l.head_size + 2)) * splits,
            counts: CHUNK * max(&|l| l.heads),
            gu: CHUNK * max(&|l| l.mlp.width * if l.mlp.gated { 2 } else { 1 }),
            h: CHUNK * max(&|l| l.mlp.width),
            quant: (CHUNK * quant.0, CHUNK * quant.1),
            splits,
            kv: layers
                .iter()
                .map(|l| l.kv_heads * capacity * l.head_size)
                .collect(),
            kv_kind: KvKind::chosen(model.act, tuning.kv_f32),
            // No layer a GEMM can run (CompInt8 int4 weights only): no handle either.
            gemm: gemm
                .then(|| gemm_scratch(model, tuning.dequant_values))
                .filter(|g| g.out > 0),
        }
    }

    /// Device bytes of every buffer.
    fn bytes(&self, model: &DevModel) -> usize {
        let f32s = 3 * CHUNK * model.hidden
            + self.qkv
            + self.attn
            + self.part
            + self.counts
            + self.gu
            + self.h
            + self.quant.1
            + model.vocab
            + CHUNK
            + model.hidden
            + 13;
        let kv = 2 * self.kv.iter().sum::<usize>() * self.kv_kind.bytes();
        4 * f32s + kv + self.quant.0 + self.gemm.map_or(0, |g| g.bytes())
    }
}

/// The GEMM scratch for the layers' dense and CompFp32 int4 linears (the lm_head runs on one
/// row: a GEMV), int4 layers dequantised `dequant_values` values at a time.
fn gemm_scratch(model: &DevModel, dequant_values: usize) -> GemmScratch {
    let linears = || model.layers.iter().flat_map(DevLayer::linears);
    let dense = linears().filter_map(|p| match p.form {
        Form::Dense { kernel } => GemmType::of(kernel).map(|t| (t, p.k, p.n)),
        Form::Int4 { .. } => None,
    });
    let int4 = linears().filter_map(|p| match p.form {
        Form::Int4 {
            int8: false,
            prompt,
            ..
        } => Some((prompt, p.k, p.n)),
        _ => None,
    });
    GemmScratch::of(dense, int4, dequant_values)
}

/// An upper bound of [`Buffers::bytes`] from the plan alone, before the model is read: every
/// activation buffer as wide as twice the widest linear output (a gate and an up projection)
/// or the attention's split partials, the int8 scratch as wide as the widest input, and the
/// prompt GEMMs' workspace and scratch (as wide as the widest input and output, and with int4
/// layers an f32 dequantisation slice). Used only to decide whether the model may not fit
/// (an overestimate costs host memory during load, never a wrong placement: the residency
/// planner then sizes everything exactly).
pub(crate) fn estimated_state_bytes(
    plan: &genai_frontend::DecoderPlan,
    capacity: usize,
    tuning: &CudaTuning,
) -> u64 {
    let d = plan.dims;
    let linears = plan.linears();
    let widest_out = linears.iter().map(|l| l.n).max().unwrap_or(0);
    let widest_in = linears.iter().map(|l| l.k).max().unwrap_or(0).max(d.hidden);
    let splits = capacity.div_ceil(ATTN_CHUNK).max(1);
    let activations = 3 * d.hidden
        + 6 * widest_out.max(d.heads * d.head_size)
        + d.heads * (d.head_size + 3) * splits
        + 2 * widest_in;
    // In the activations' precision (`KvKind`), as the cache is allocated: at most 4 bytes.
    let kv = 2 * d.layers * d.kv_heads * d.head_size * capacity * kv_bytes_of(plan, tuning);
    let gemm = GemmScratch {
        cast: CHUNK * widest_in,
        out: CHUNK * widest_out,
        // An int4 layer's dequantised slice, at most 4-byte values.
        dequant: if linears
            .iter()
            .any(|l| matches!(l.weight, genai_frontend::Weight::Int4(_)))
        {
            4 * tuning.dequant_values.max(widest_in)
        } else {
            0
        },
    };
    (4 * (CHUNK * activations + d.vocab + CHUNK + d.hidden + 13) + kv) as u64 + gemm.bytes() as u64
}

/// Bytes of one KV cache element for a plan: the kind its activations' precision takes.
fn kv_bytes_of(plan: &genai_frontend::DecoderPlan, tuning: &CudaTuning) -> usize {
    KvKind::chosen(crate::cuda::model::act_of(plan), tuning.kv_f32).bytes()
}

impl Buffers {
    /// Writes the step scalars a pass reads from device memory (so that a captured pass serves
    /// every position): `past` positions already cached, `new_len` tokens in this pass.
    pub fn write_step(
        &mut self,
        stream: &Arc<CudaStream>,
        past: usize,
        new_len: usize,
    ) -> Result<(), Error> {
        self.step
            .write(stream, &[past as i32, new_len as i32, 0, 0])
    }

    /// Device bytes one generation of `capacity` positions allocates (KV cache and workspace;
    /// with `gemm`, the prompt GEMMs' workspace and scratch), under `tuning` (the cache's kind,
    /// the dequantised slices' width).
    pub fn bytes(model: &DevModel, capacity: usize, gemm: bool, tuning: &CudaTuning) -> usize {
        Sizes::of(model, capacity, gemm, tuning).bytes(model)
    }

    pub fn new(
        stream: &Arc<CudaStream>,
        model: &DevModel,
        capacity: usize,
        gemm: bool,
        tuning: &CudaTuning,
    ) -> Result<Self, Error> {
        let sizes = Sizes::of(model, capacity, gemm, tuning);
        let total = sizes.bytes(model);
        if let Ok((free, _)) = stream.context().mem_get_info()
            && total > free
        {
            return Err(Error::Invalid {
                what: "max_length",
                why: format!(
                    "a KV cache and workspace of {capacity} positions need {:.2} GB of device \
                     memory, {:.2} GB are free",
                    total as f64 / 1e9,
                    free as f64 / 1e9
                ),
            });
        }
        let z = |n: usize| DevBuf::<f32>::zeros(stream, n);
        let kv_bytes = |n: usize| DevBuf::<u8>::zeros(stream, n * sizes.kv_kind.bytes());
        let kv = sizes
            .kv
            .iter()
            .map(|&n| Ok((kv_bytes(n)?, kv_bytes(n)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok(Buffers {
            capacity,
            splits: sizes.splits,
            step: DevBuf::zeros(stream, 4)?,
            ids: DevBuf::zeros(stream, CHUNK)?,
            x: z(CHUNK * model.hidden)?,
            normed: z(CHUNK * model.hidden)?,
            delta: z(CHUNK * model.hidden)?,
            qkv: z(sizes.qkv)?,
            attn: z(sizes.attn)?,
            part: z(sizes.part)?,
            counts: DevBuf::zeros(stream, sizes.counts)?,
            gu: z(sizes.gu)?,
            h: z(sizes.h)?,
            qa: DevBuf::zeros(stream, sizes.quant.0)?,
            sa: z(sizes.quant.1)?,
            logits: z(model.vocab)?,
            kv,
            kv_kind: sizes.kv_kind,
            blas: sizes.gemm.map(|g| Blas::new(stream, g)).transpose()?,
        })
    }
}
