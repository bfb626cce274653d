//! The gpt2 layout written by ONNX Runtime's transformer optimizer: com.microsoft
//! `EmbedLayerNormalization` (word + learned position embeddings, then layer 0's input LayerNorm)
//! and com.microsoft `Attention` with one `[hidden, 3 * hidden]` q/k/v weight and a combined
//! `past_%d` / `present_%d` KV cache per layer.

use genai_onnx::DataType;

use crate::attention::AttnOut;
use crate::context::Cx;
use crate::error::Lift;
use crate::graph::{Graph, MS, Use};
use crate::norms::{epsilon, unused_outputs};
use crate::plan::{Attention, Embedding, Linear, Norm, NormKind, Qkv, Table, Weight};
use crate::weights::{dense, dense_any, is_linear, linear};

/// What `EmbedLayerNormalization` contributes: the embedding, layer 0's attention norm, the normed
/// value (its input) and the embedding sum (the residual stream).
pub(crate) struct EmbedLn<'m> {
    pub embedding: Embedding,
    pub attn_norm: Norm,
    pub normed: &'m str,
    pub node: usize,
    pub resid: &'m str,
}

/// Node `i` is `Cast(to=int32)`.
fn is_int32_cast(g: &Graph, i: usize) -> bool {
    g.is_op(i, "", "Cast")
        && g.int_attr(i, "to").ok().flatten() == Some(i64::from(DataType::Int32.to_onnx()))
}

/// Resolves `value` to a graph input, through an int32 `Cast` (claimed) used only by `user`.
fn graph_input_through_cast<'m>(
    g: &Graph<'m>,
    value: &'m str,
    user: usize,
    slot: usize,
) -> Lift<&'m str> {
    match g.producer(value) {
        Some((c, _)) if is_int32_cast(g, c) => {
            g.only_attrs(c, &["to"])?;
            g.only_uses(value, c, &[Use::Node { node: user, slot }], &g.label(user))?;
            g.claim(c);
            Ok(g.input(c, 0))
        }
        Some((p, _)) => Err(g.err(p, "unexpected computation of an index input")),
        None => Ok(value),
    }
}

/// The `EmbedLayerNormalization` node reading the token ids, if the graph has one.
pub(crate) fn find(g: &Graph, first: usize, slot: usize) -> Option<usize> {
    if g.is_op(first, MS, "EmbedLayerNormalization") && slot == 0 {
        return Some(first);
    }
    if !is_int32_cast(g, first) {
        return None;
    }
    match g.uses(g.output(first, 0))[..] {
        [Use::Node { node, slot: 0 }] if g.is_op(node, MS, "EmbedLayerNormalization") => Some(node),
        _ => None,
    }
}

/// `EmbedLayerNormalization` node `i`.
pub(crate) fn embed_layer_norm<'m>(g: &Graph<'m>, cx: &Cx, i: usize) -> Lift<EmbedLn<'m>> {
    g.only_attrs(i, &["epsilon", "mask_index_type"])?;
    let eps = epsilon(g, i)?;
    if g.node(i).input.len() > 9 {
        return Err(g.err(i, "unexpected extra input"));
    }
    for (slot, what) in [
        (1, "segment ids"),
        (4, "segment embeddings"),
        (7, "a mask input"),
    ] {
        if !g.input(i, slot).is_empty() {
            return Err(g.err(i, format!("{what} are not supported")));
        }
    }
    let ids = graph_input_through_cast(g, g.input(i, 0), i, 0)?;
    if ids != cx.inputs.input_ids {
        return Err(g.err(i, format!("reads `{ids}`, not the token ids")));
    }
    let words = dense(
        g,
        i,
        "word embedding",
        g.input(i, 2),
        &[cx.vocab, cx.hidden],
    )?;
    let positions = dense_any(g, i, "position embedding", g.input(i, 3))?;
    if positions.dims.len() != 2 || positions.dims[1] != cx.hidden || positions.dims[0] == 0 {
        return Err(g.err(
            i,
            format!(
                "position embedding has shape {:?}, expected [positions, {}]",
                positions.dims, cx.hidden
            ),
        ));
    }
    let gamma = dense(g, i, "norm weight", g.input(i, 5), &[cx.hidden])?;
    let beta = dense(g, i, "norm bias", g.input(i, 6), &[cx.hidden])?;
    if g.input(i, 8).is_empty() {
        return Err(g.err(
            i,
            "no position_ids input: positions would restart at 0 every step",
        ));
    }
    let pos = graph_input_through_cast(g, g.input(i, 8), i, 8)?;
    if pos != cx.inputs.position_ids || !g.is_graph_input(pos) {
        return Err(g.err(
            i,
            format!(
                "position ids `{pos}` are not the graph input `{}`",
                cx.inputs.position_ids
            ),
        ));
    }
    unused_outputs(g, i, 1, Some(2))?;
    let resid = g.output(i, 2);
    if resid.is_empty() || g.uses(resid).is_empty() {
        return Err(g.err(
            i,
            "the embedding sum (output 2) is not used: no residual stream",
        ));
    }
    g.claim(i);
    Ok(EmbedLn {
        embedding: Embedding {
            tokens: Table::Dense(words),
            positions: Some(positions),
            scale: None,
        },
        attn_norm: Norm {
            kind: NormKind::Layer,
            weight: gamma,
            bias: Some(beta),
            epsilon: eps,
        },
        normed: g.output(i, 0),
        node: i,
        resid,
    })
}

const ATTRS: &[&str] = &[
    "num_heads",
    "unidirectional",
    "mask_filter_value",
    "scale",
    "qkv_hidden_sizes",
    "do_rotary",
    "past_present_share_buffer",
    "rotary_embedding_dim",
];

/// The com.microsoft `Attention` block fed by `normed` (output of `norm_node`) in `layer`.
pub(crate) fn attention<'m>(
    g: &Graph<'m>,
    cx: &Cx,
    layer: usize,
    normed: &'m str,
    norm_node: usize,
) -> Lift<AttnOut<'m>> {
    let (a, _) = g.one_use(normed, norm_node, "com.microsoft Attention", |n, s| {
        s == 0 && g.is_op(n, MS, "Attention")
    })?;
    g.only_attrs(a, ATTRS)?;
    let heads = g.req_int(a, "num_heads")?;
    if usize::try_from(heads).ok() != Some(cx.heads) {
        return Err(g.err(
            a,
            format!(
                "num_heads {heads} does not match the config's num_attention_heads {}",
                cx.heads
            ),
        ));
    }
    if cx.kv_heads != cx.heads {
        return Err(g.err(
            a,
            format!(
                "combined attention has {} heads for q, k and v, but the config gives {} kv heads",
                cx.heads, cx.kv_heads
            ),
        ));
    }
    let uni = g.req_int(a, "unidirectional")?;
    if uni != 1 {
        return Err(g.err(
            a,
            format!("unidirectional {uni} (attention that is not causal) is not supported"),
        ));
    }
    for flag in [
        "do_rotary",
        "past_present_share_buffer",
        "rotary_embedding_dim",
    ] {
        g.int_in(a, flag, 0, &[0])?;
    }
    let qd = cx.q_width();
    let qkv_width = qd.saturating_mul(3);
    if let Some(sizes) = g.ints_attr(a, "qkv_hidden_sizes")?
        && sizes != [qd as i64; 3]
    {
        return Err(g.err(a, format!("qkv_hidden_sizes {sizes:?} are not all {qd}")));
    }
    let scale = match g.float_attr(a, "scale")?.unwrap_or(0.0) {
        0.0 => 1.0 / (cx.head as f32).sqrt(),
        s if s.is_finite() && s > 0.0 => s,
        s => return Err(g.err(a, format!("scale {s} is not supported"))),
    };
    if g.node(a).input.len() > 7 || !g.input(a, 5).is_empty() || !g.input(a, 6).is_empty() {
        return Err(g.err(
            a,
            "attention_bias / past_sequence_length inputs are not supported",
        ));
    }
    let weight = dense(g, a, "q/k/v weight", g.input(a, 1), &[cx.hidden, qkv_width])?;
    let bias = match g.input(a, 2) {
        "" => None,
        b => Some(dense(g, a, "q/k/v bias", b, &[qkv_width])?),
    };
    let mask = graph_input_through_cast(g, g.input(a, 3), a, 3)?;
    if mask != cx.inputs.attention_mask || !g.is_graph_input(mask) {
        return Err(g.err(
            a,
            format!(
                "mask `{mask}` is not the graph input `{}`",
                cx.inputs.attention_mask
            ),
        ));
    }
    combined_kv(g, cx, layer, a)?;
    g.claim(a);
    let (o, _) = g.one_use(
        g.output(a, 0),
        a,
        "the output projection (MatMul or MatMulNBits)",
        |n, s| is_linear(g, n, s),
    )?;
    let output = linear(g, o, qd, Some(cx.hidden))?;
    let qkv = Qkv::Fused {
        linear: Linear {
            weight: Weight::Dense {
                tensor: weight,
                transposed: false,
            },
            bias,
            k: cx.hidden,
            n: qkv_width,
        },
        q: qd,
        k: qd,
        v: qd,
    };
    Ok(AttnOut {
        attention: Attention {
            qkv,
            q_norm: None,
            k_norm: None,
            output: output.linear,
            heads: cx.heads,
            kv_heads: cx.heads,
            head_size: cx.head,
            scale,
            rotary: false,
            window: None,
            softcap: None,
        },
        out: output.out,
        last: output.last,
        rotary: None,
    })
}

/// The combined past input and present output of `layer`, as the config names them.
fn combined_kv(g: &Graph, cx: &Cx, layer: usize, a: usize) -> Lift<()> {
    let (Some(past), Some(present)) = (
        cx.inputs.past.combined(layer),
        cx.outputs.present.combined(layer),
    ) else {
        return Err(g.err(
            a,
            "combined KV attention, but the config names separate key/value caches",
        ));
    };
    let got = g.input(a, 4);
    if got != past || !g.is_graph_input(got) {
        return Err(g.err(a, format!("past input `{got}` is not the graph input `{past}` the config names for layer {layer}")));
    }
    g.only_uses(
        got,
        a,
        &[Use::Node { node: a, slot: 4 }],
        "this layer's attention",
    )?;
    if let Some(dims) = g.input_dims(got) {
        let bad = |pos: usize, want: usize| {
            dims.get(pos)
                .copied()
                .flatten()
                .is_some_and(|d| usize::try_from(d).ok() != Some(want))
        };
        if dims.len() != 5 || bad(0, 2) || bad(2, cx.heads) || bad(4, cx.head) {
            return Err(g.err(
                a,
                format!(
                    "past input `{got}` has shape {dims:?}, expected [2, batch, {}, seq, {}]",
                    cx.heads, cx.head
                ),
            ));
        }
    }
    let out = g.output(a, 1);
    if out != present {
        return Err(g.err(a, format!("present output `{out}` is not the graph output `{present}` the config names for layer {layer}")));
    }
    g.only_uses(out, a, &[Use::Output(out)], "the graph output")?;
    unused_outputs(g, a, 2, None)
}
