//! com.microsoft `GroupQueryAttention`: attributes checked against the config, the KV cache inputs
//! and outputs against the config's names, the mask-derived length inputs, the fused rotary
//! caches, and the fused per-head q/k norm weights.

use crate::context::Cx;
use crate::error::Lift;
use crate::graph::{Graph, Use};
use crate::mask;
use crate::plan::{Norm, NormKind, Rotary};
use crate::rotary::caches;
use crate::weights::dense;

/// What one GroupQueryAttention node contributes to the plan.
pub(crate) struct Gqa<'m> {
    pub out: &'m str,
    pub scale: f32,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
    /// The rotary it applies itself (`do_rotary=1`).
    pub rotary: Option<Rotary>,
    /// Fused per-head q/k RMSNorm (inputs 14 and 15).
    pub qk_norms: Option<(Norm, Norm)>,
}

const ATTRS: &[&str] = &[
    "num_heads",
    "kv_num_heads",
    "scale",
    "local_window_size",
    "softcap",
    "do_rotary",
    "rotary_interleaved",
    "smooth_softmax",
    "qk_norm_epsilon",
    "qk_output",
    "sliding_window_cache",
    "kv_cache_bit_width",
    "k_quant_type",
    "v_quant_type",
];

/// Checks GroupQueryAttention node `i` of decoder layer `layer`; `packed` when input 0 carries q,
/// k and v together.
pub(crate) fn gqa<'m>(
    g: &Graph<'m>,
    cx: &Cx,
    layer: usize,
    i: usize,
    packed: bool,
) -> Lift<Gqa<'m>> {
    g.only_attrs(i, ATTRS)?;
    for quant in ["kv_cache_bit_width", "k_quant_type", "v_quant_type"] {
        if g.attr(i, quant).is_some() {
            return Err(g.err(
                i,
                format!("quantized KV cache (`{quant}`) is not supported"),
            ));
        }
    }
    if g.int_attr(i, "sliding_window_cache")?.unwrap_or(0) != 0 {
        return Err(g.err(
            i,
            "a window-sized KV cache (sliding_window_cache=1) is not supported",
        ));
    }
    g.int_in(i, "smooth_softmax", 0, &[0])?;
    g.int_in(i, "qk_output", 0, &[0])?;
    let num_heads = g.req_int(i, "num_heads")?;
    if usize::try_from(num_heads).ok() != Some(cx.heads) {
        return Err(g.err(
            i,
            format!(
                "num_heads {num_heads} does not match the config's num_attention_heads {}",
                cx.heads
            ),
        ));
    }
    let kv_heads = g.req_int(i, "kv_num_heads")?;
    if usize::try_from(kv_heads).ok() != Some(cx.kv_heads) {
        return Err(g.err(
            i,
            format!(
                "kv_num_heads {kv_heads} does not match the config's num_key_value_heads {}",
                cx.kv_heads
            ),
        ));
    }
    let scale = match g.float_attr(i, "scale")?.unwrap_or(0.0) {
        0.0 => 1.0 / (cx.head as f32).sqrt(),
        s if s.is_finite() && s > 0.0 => s,
        s => return Err(g.err(i, format!("scale {s} is not supported"))),
    };
    let window = match g.int_attr(i, "local_window_size")?.unwrap_or(-1) {
        -1 => None,
        w if w > 0 => usize::try_from(w).ok(),
        w => return Err(g.err(i, format!("local_window_size {w} is not supported"))),
    };
    let softcap = match g.float_attr(i, "softcap")?.unwrap_or(0.0) {
        0.0 => None,
        c if c.is_finite() && c > 0.0 => Some(c),
        c => return Err(g.err(i, format!("softcap {c} is not supported"))),
    };
    let do_rotary = g.int_in(i, "do_rotary", 0, &[0, 1])? == 1;
    let interleaved = g.int_in(i, "rotary_interleaved", 0, &[0, 1])? == 1;

    let n_inputs = g.node(i).input.len();
    if n_inputs > 16 {
        return Err(g.err(i, format!("{n_inputs} inputs; at most 16 are known")));
    }
    if packed && !(g.input(i, 1).is_empty() && g.input(i, 2).is_empty()) {
        return Err(g.err(
            i,
            "packed q/k/v input together with separate key/value inputs",
        ));
    }
    kv_io(g, cx, layer, i)?;
    mask::check(g, cx, i, 5, g.input(i, 5))?;
    mask::check(g, cx, i, 6, g.input(i, 6))?;
    let (cos, sin) = (g.input(i, 7), g.input(i, 8));
    let rotary = if do_rotary {
        let (cos, sin, rotary_dim) = caches(g, cx, i, cos, sin)?;
        Some(Rotary {
            cos,
            sin,
            rotary_dim,
            interleaved,
        })
    } else if !cos.is_empty() || !sin.is_empty() {
        return Err(g.err(i, "cos/sin caches are given but do_rotary is 0"));
    } else {
        None
    };
    for (slot, what) in [
        (9, "a position_ids input"),
        (10, "an attention_bias input"),
        (11, "attention sinks"),
        (12, "a k_scale input (quantized KV cache)"),
        (13, "a v_scale input (quantized KV cache)"),
    ] {
        if !g.input(i, slot).is_empty() {
            return Err(g.err(i, format!("{what} is not supported")));
        }
    }
    let qk_norms = qk_norms(g, cx, i)?;
    if g.output(i, 0).is_empty() {
        return Err(g.err(i, "output 0 missing"));
    }
    if g.node(i).output.len() > 3 && !g.output(i, 3).is_empty() {
        return Err(g.err(i, "the attention-probabilities output is not supported"));
    }
    g.claim(i);
    Ok(Gqa {
        out: g.output(i, 0),
        scale,
        window,
        softcap,
        rotary,
        qk_norms,
    })
}

/// The past inputs and present outputs must be the config's names for `layer`, used nowhere else.
fn kv_io(g: &Graph, cx: &Cx, layer: usize, i: usize) -> Lift<()> {
    if cx.inputs.past.is_combined() {
        return Err(g.err(
            i,
            "the config names combined past_%d inputs, but GroupQueryAttention takes key and value apart",
        ));
    }
    let inputs = [
        (3, cx.inputs.past.key(layer)),
        (4, cx.inputs.past.value(layer)),
    ];
    for (slot, want) in inputs {
        let got = g.input(i, slot);
        if got.is_empty() {
            return Err(g.err(i, "no past key/value input (a graph without a KV cache)"));
        }
        if got != want || !g.is_graph_input(got) {
            return Err(g.err(
                i,
                format!("past input `{got}` is not the graph input `{want}` the config names for layer {layer}"),
            ));
        }
        g.only_uses(
            got,
            i,
            &[Use::Node { node: i, slot }],
            "this layer's attention",
        )?;
        if let Some(dims) = g.input_dims(got) {
            let bad = |pos: usize, want: usize| {
                dims.get(pos)
                    .copied()
                    .flatten()
                    .is_some_and(|d| usize::try_from(d).ok() != Some(want))
            };
            if dims.len() != 4 || bad(1, cx.kv_heads) || bad(3, cx.head) {
                return Err(g.err(
                    i,
                    format!(
                        "past input `{got}` has shape {dims:?}, expected [batch, {}, seq, {}]",
                        cx.kv_heads, cx.head
                    ),
                ));
            }
        }
    }
    let outputs = [
        (1, cx.outputs.present.key(layer)),
        (2, cx.outputs.present.value(layer)),
    ];
    for (slot, want) in outputs {
        let got = g.output(i, slot);
        if got != want {
            return Err(g.err(
                i,
                format!("present output `{got}` is not the graph output `{want}` the config names for layer {layer}"),
            ));
        }
        g.only_uses(got, i, &[Use::Output(got)], "the graph output")?;
    }
    Ok(())
}

/// Fused q/k RMSNorm weights (inputs 14, 15) with `qk_norm_epsilon`.
fn qk_norms(g: &Graph, cx: &Cx, i: usize) -> Lift<Option<(Norm, Norm)>> {
    let (q, k) = (g.input(i, 14), g.input(i, 15));
    let eps = g.float_attr(i, "qk_norm_epsilon")?;
    if q.is_empty() && k.is_empty() {
        if eps.is_some() {
            return Err(g.err(i, "qk_norm_epsilon without q/k norm weights"));
        }
        return Ok(None);
    }
    if q.is_empty() || k.is_empty() {
        return Err(g.err(i, "only one of the q/k norm weights is given"));
    }
    let epsilon = match eps {
        Some(e) if e.is_finite() && e > 0.0 => e,
        Some(e) => return Err(g.err(i, format!("qk_norm_epsilon {e} is not supported"))),
        None => return Err(g.err(i, "qk_norm_epsilon attribute missing")),
    };
    let norm = |name: &str| -> Lift<Norm> {
        Ok(Norm {
            kind: NormKind::Rms,
            weight: dense(g, i, "q/k norm weight", name, &[cx.head])?,
            bias: None,
            epsilon,
        })
    };
    Ok(Some((norm(q)?, norm(k)?)))
}
