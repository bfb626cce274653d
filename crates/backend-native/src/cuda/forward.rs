//! The launch sequence of one forward pass over up to `CHUNK` new tokens on a generation's
//! buffers (`state.rs`): embedding, per layer the norms, qkv, attention (the fused decode
//! kernel for one token, else rotary + KV append and the prompt attention), output, MLP, and
//! the final norm and lm_head. No allocation, host sync or copy: a single-token pass can be
//! captured as a CUDA graph.

use crate::cuda::kernels::{
    CHUNK, DecodeCall, DecodeHeads, Embedding, KvCache, NormRows, PromptAttention, RotaryAppend,
    SkipNorm,
};
use crate::cuda::kernels::{HalfCopy, Halves, common_half};
use crate::cuda::memory::DevBuf;
use crate::cuda::model::{DevLayer, DevModel, DevNorm, DevRotary};
use crate::cuda::pass::Pass;
use crate::cuda::span::DevSpan;
use crate::cuda::state::Buffers;
use crate::cuda::weights::{DevLinear, LinearIo, XForms};
use crate::error::Error;

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
        let io = LinearIo {
            x: input.x,
            ldx: input.width,
            y: b.delta.span(),
            ldy: hidden,
        };
        p.run(ops, io, m, act_p, forms)?;
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
        .run_glu(ops, io(last, hidden, y), 1, act, -1, scratch)
        .map(|_| ())
}

/// A linear's x (rows `ldx` apart) and y (a span, rows apart).
fn io<'a>(x: DevSpan<'a, f32>, ldx: usize, (y, ldy): (DevSpan<'a, f32>, usize)) -> LinearIo<'a> {
    LinearIo { x, ldx, y, ldy }
}

/// A linear's input: x `[m, width]` and its half copy where the kernel writing it made one.
#[derive(Debug, Clone, Copy)]
struct Input<'a> {
    x: DevSpan<'a, f32>,
    width: usize,
    half: Option<HalfCopy>,
}

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
        p.run_glu(ops, io(b.normed.span(), hidden, y), m, act, -1, forms)?;
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
        let forms = XForms { halves, ..forms };
        let half = p.run_glu(ops, io(x.0, x.1, h), m, 0, mlp.activation, forms)?;
        return Ok(Input {
            x: b.h.span(),
            width: w,
            half,
        });
    }
    let gu_ld = if mlp.gated { 2 * w } else { w };
    for (p, col) in &mlp.parts {
        let y = (b.gu.span_from(*col)?, gu_ld);
        p.run_glu(ops, io(b.normed.span(), p.k, y), m, 0, -1, forms)?;
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
