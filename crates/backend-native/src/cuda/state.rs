//! One generation's device state — KV cache, activation buffers, step scalars — and the launch
//! sequence of one forward pass over up to `CHUNK` new tokens. Every address is fixed for the
//! generation and the position is read from device memory (`step[0]`), so the sequence for one
//! token can be captured once as a CUDA graph and replayed at any position.

use crate::cuda::blas::{Blas, GemmScratch};

use crate::cuda::host::Form;
use crate::cuda::kernels::{
    ATTN_CHUNK, CHUNK, DecodeCall, DecodeHeads, Embedding, KvCache, KvKind, NormRows,
    PromptAttention, RotaryAppend, SkipNorm,
};
use crate::cuda::kernels::{GemmType, HalfCopy, Halves, common_half};
use crate::cuda::memory::DevBuf;
use crate::cuda::model::{DevLayer, DevModel, DevNorm, DevRotary};
use crate::cuda::pass::Pass;
use crate::cuda::span::DevSpan;
use crate::cuda::weights::{DevLinear, XForms};
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
    x: DevBuf<f32>,
    normed: DevBuf<f32>,
    delta: DevBuf<f32>,
    qkv: DevBuf<f32>,
    attn: DevBuf<f32>,
    part: DevBuf<f32>,
    /// Attention tickets `[CHUNK, heads]`, zero between launches.
    counts: DevBuf<i32>,
    gu: DevBuf<f32>,
    h: DevBuf<f32>,
    qa: DevBuf<i8>,
    sa: DevBuf<f32>,
    pub logits: DevBuf<f32>,
    /// Per layer: keys and values `[kv_heads, capacity, head_size]` of `kv_kind` (bytes).
    kv: Vec<(DevBuf<u8>, DevBuf<u8>)>,
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

/// Enqueues one forward pass over `m` new tokens (ids and step already on the device) ending
/// with the last token's logits in `b.logits`. No allocation, host sync or copy.
pub(crate) fn enqueue(
    ops: &Pass<'_>,
    model: &DevModel,
    b: &Buffers,
    m: usize,
) -> Result<(), Error> {
    if m == 0 || m > CHUNK {
        return Err(Error::Invalid {
            what: "tokens",
            why: format!("{m} tokens in one pass (1..={CHUNK})"),
        });
    }
    let act = model.act;
    let hidden = model.hidden;
    let scratch = XForms {
        qa: b.qa.span(),
        sa: b.sa.span(),
        halves: Halves::default(),
    };
    // Where the kernel writing the hidden rows for `consumers` also writes them rounded to 16
    // bits, so that their GEMMs skip the cast (prompt passes through cuBLAS only).
    let hidden_half = |consumers: &[(DevLinear, usize)]| {
        let types = consumers.iter().map(|(p, _)| p.prompt_gemm(ops, m));
        ops.half_copy(m, hidden, common_half(types))
    };
    ops.embedding(&Embedding {
        table: model.embedding.span()?,
        positions: model.positions.as_ref().map(DevBuf::span),
        ids: b.ids.span(),
        step: b.step.span(),
        x: b.x.span(),
        m,
        hidden,
        vocab: model.vocab,
        scale: model.embedding_scale,
        act,
    })?;
    // x += delta (when given), then normed = norm(x), over the m hidden rows, also written
    // rounded to 16 bits where `half` says; what normed's readers get besides it.
    let residual_norm = |n: &DevNorm, delta: Option<&DevBuf<f32>>, half: Option<HalfCopy>| {
        let norm = SkipNorm {
            x: b.x.span(),
            delta: delta.map(DevBuf::span),
            weight: n.weight.span(),
            bias: n.bias_span(),
            out: b.normed.span(),
            rows: NormRows::packed(m, hidden),
            eps: n.eps,
            rms: n.rms,
            write_sum: true,
            act,
        };
        ops.skip_norm_half(&norm, half)?;
        let halves = Halves { x: half, y: None };
        Ok::<_, Error>(XForms { halves, ..scratch })
    };
    // delta = input W (a layer's last linear), then x += delta and normed = norm(x).
    let linear_then_norm = |p: &DevLinear, input: Input, act_p, n: &DevNorm, half| {
        // Through a GEMM with no bias, the epilogue would only round delta, which the norm
        // does anyway (its skip add rounds delta): the same bits without that launch.
        let act_p = if p.prompt_gemm(ops, m).is_some() && !p.has_bias() {
            0
        } else {
            act_p
        };
        let halves = Halves {
            x: input.half,
            y: None,
        };
        let forms = XForms { halves, ..scratch };
        p.run(
            ops,
            input.x,
            input.width,
            b.delta.span(),
            hidden,
            m,
            act_p,
            forms,
        )?;
        residual_norm(n, Some(&b.delta), half)
    };
    // The first norm has no residual to add (with no layers, the final norm).
    let mut forms = match model.layers.first() {
        Some(l) => residual_norm(&l.attn_norm, None, hidden_half(&l.qkv.parts))?,
        None => residual_norm(&model.final_norm, None, None)?,
    };
    for (i, (layer, (kc, vc))) in model.layers.iter().zip(&b.kv).enumerate() {
        let attn = attention_block(ops, model, layer, b, (kc.span(), vc.span()), m, forms)?;
        let mlp_half = hidden_half(&layer.mlp.parts);
        forms = linear_then_norm(&layer.output, attn, act, &layer.mlp_norm, mlp_half)?;
        // The next norm feeds the next layer's qkv, or after the last layer the lm_head (one
        // row: no GEMM).
        let next = model.layers.get(i + 1);
        let norm = next.map_or(&model.final_norm, |l| &l.attn_norm);
        let half = next.and_then(|l| hidden_half(&l.qkv.parts));
        let h = mlp_block(ops, layer, b, m, forms)?;
        // The MLP runs in f32 (as the CPU decoder): its linears round nothing.
        forms = linear_then_norm(&layer.mlp.down, h, 0, norm, half)?;
    }
    let last = b.normed.span_from((m - 1) * hidden)?;
    let y = (b.logits.span(), model.vocab);
    model
        .lm_head
        .run_glu(ops, (last, hidden), y, 1, act, -1, scratch)
        .map(|_| ())
}

/// A linear's input: x `[m, width]` and its half copy where the kernel writing it made one.
#[derive(Debug, Clone, Copy)]
struct Input<'a> {
    x: DevSpan<'a, f32>,
    width: usize,
    half: Option<HalfCopy>,
}

#[allow(clippy::too_many_arguments)]
fn attention_block<'a>(
    ops: &Pass<'_>,
    model: &DevModel,
    l: &DevLayer,
    b: &'a Buffers,
    (k_cache, v_cache): (DevSpan<'a, u8>, DevSpan<'a, u8>),
    m: usize,
    forms: XForms<'_>,
) -> Result<Input<'a>, Error> {
    let act = model.act;
    let (hidden, ld, hs) = (model.hidden, l.qkv_width(), l.head_size);
    for (p, col) in &l.qkv.parts {
        let y = (b.qkv.span_from(*col)?, ld);
        p.run_glu(ops, (b.normed.span(), hidden), y, m, act, -1, forms)?;
    }
    let heads_norm = [
        (&l.q_norm, 0, l.heads),
        (&l.k_norm, l.heads * hs, l.kv_heads),
    ];
    for (norm, col, heads) in heads_norm {
        if let Some(n) = norm {
            let x = b.qkv.span_from(col)?;
            ops.skip_norm(&SkipNorm {
                x,
                delta: None,
                weight: n.weight.span(),
                bias: n.bias_span(),
                out: x,
                rows: NormRows {
                    rows: m * heads,
                    width: hs,
                    per_row: heads,
                    ld,
                },
                eps: n.eps,
                rms: n.rms,
                write_sum: false,
                act,
            })?;
        }
    }
    let rotary = match (&model.rotary, l.rotary) {
        (Some(r), true) => Some(r),
        (None, true) => {
            return Err(Error::Invalid {
                what: "rotary",
                why: "the plan has no rotary caches".into(),
            });
        }
        (_, false) => None,
    };
    let cache = KvCache {
        k: k_cache,
        v: v_cache,
        capacity: b.capacity,
        kind: b.kv_kind,
    };
    let decode = DecodeHeads {
        heads: l.heads,
        kv_heads: l.kv_heads,
        head_size: hs,
        kv: b.kv_kind,
    };
    let width = l.heads * hs;
    // The output's half copy, where a prompt attention's merge wrote one.
    let half = if m == 1 && ops.k.decode_fits(&decode) {
        // One launch: rotary, the KV append and attention (a decode step, graph-captured).
        ops.attention_decode(&DecodeCall {
            qkv: b.qkv.span(),
            step: b.step.span(),
            rotary: rotary.map(|r| (r.cos.span(), r.sin.span(), r.rotary_dim, r.interleaved)),
            cache,
            part: b.part.span(),
            counts: b.counts.span(),
            out: b.attn.span(),
            heads: decode,
            scale: l.scale,
            window: l.window,
            softcap: l.softcap,
            act,
        })?;
        None
    } else {
        let want = ops.half_copy(m, width, common_half([l.output.prompt_gemm(ops, m)]));
        attention_chunk(ops, l, b, cache, rotary, m, (act, want))?
    };
    Ok(Input {
        x: b.attn.span(),
        width,
        half,
    })
}

/// Rotary + KV append, then attention, for a chunk of prompt tokens (two launches and a
/// merge); the output's half copy where the merge wrote the one `half` asks for.
fn attention_chunk(
    ops: &Pass<'_>,
    l: &DevLayer,
    b: &Buffers,
    cache: KvCache<'_>,
    rotary: Option<&DevRotary>,
    m: usize,
    (act, half): (i32, Option<HalfCopy>),
) -> Result<Option<HalfCopy>, Error> {
    let (ld, hs) = (l.qkv_width(), l.head_size);
    ops.rotary_append(&RotaryAppend {
        qkv: b.qkv.span(),
        ld,
        step: b.step.span(),
        rotary: rotary.map(|r| (r.cos.span(), r.sin.span(), r.rotary_dim, r.interleaved)),
        m,
        heads: l.heads,
        kv_heads: l.kv_heads,
        hs,
        cache,
        act,
    })?;
    ops.attention(&PromptAttention {
        qkv: b.qkv.span(),
        ld,
        cache,
        step: b.step.span(),
        part: b.part.span(),
        splits: b.splits,
        counts: b.counts.span(),
        out: b.attn.span(),
        m,
        heads: l.heads,
        kv_heads: l.kv_heads,
        hs,
        scale: l.scale,
        window: l.window,
        softcap: l.softcap,
        act,
        half,
    })
}

/// The feed-forward block in f32 (as the CPU decoder runs it) up to the down projection:
/// the down projection's input (with its half copy where a GLU GEMM's epilogue wrote one).
fn mlp_block<'a>(
    ops: &Pass<'_>,
    l: &DevLayer,
    b: &'a Buffers,
    m: usize,
    forms: XForms<'_>,
) -> Result<Input<'a>, Error> {
    let mlp = &l.mlp;
    let w = mlp.width;
    if let [(p, 0)] = mlp.parts.as_slice()
        && mlp.glu
    {
        let (x, h) = ((b.normed.span(), p.k), (b.h.span(), w));
        let y = ops.half_copy(m, w, common_half([mlp.down.prompt_gemm(ops, m)]));
        let halves = Halves { y, ..forms.halves };
        let half = p.run_glu(ops, x, h, m, 0, mlp.activation, XForms { halves, ..forms })?;
        return Ok(Input {
            x: b.h.span(),
            width: w,
            half,
        });
    }
    let gu_ld = if mlp.gated { 2 * w } else { w };
    for (p, col) in &mlp.parts {
        let y = (b.gu.span_from(*col)?, gu_ld);
        p.run_glu(ops, (b.normed.span(), p.k), y, m, 0, -1, forms)?;
    }
    let down_in = if mlp.gated {
        ops.gated(b.gu.span(), b.h.span(), (m, w), mlp.activation)?;
        b.h.span()
    } else {
        ops.activate(b.gu.span(), m * w, mlp.activation)?;
        b.gu.span()
    };
    Ok(Input {
        x: down_in,
        width: w,
        half: None,
    })
}
