//! The residual-stream walk: from the token-ids input through the embedding, then layer by layer
//! (attention norm, attention, residual add + MLP norm, MLP, residual add + next norm) until a
//! norm whose sum nobody reads — the final norm — and the lm_head producing the logits output.
//! Every node of the graph must end up accounted for by the plan.

use genai_config::Config;
use genai_onnx::OnnxModel;

use crate::context::Cx;
use crate::error::{Lift, Unsupported};
use crate::graph::{Graph, Use};
use crate::norms::{SkipNorm, is_plain_norm, is_skip_norm, plain_norm, skip_norm};
use crate::plan::{DecoderPlan, Dims, KvLayout, Layer, Linear, Mlp, Norm, Rotary, Tensor};
use crate::weights::{is_linear, linear};
use crate::{attention, embedding, gpt2, mlp};

/// Where a layer starts: its attention norm, that norm's output and node, and the residual stream
/// (its value, producer and the uses it has besides the coming residual add).
struct LayerStart<'m> {
    attn_norm: Norm,
    normed: &'m str,
    norm_node: usize,
    resid: &'m str,
    resid_owner: usize,
    resid_uses: Vec<Use<'m>>,
}

/// Lifts the decoder in `model`, checking it against `config`.
pub fn lift(model: &OnnxModel, config: &Config) -> Result<DecoderPlan, Unsupported> {
    let g = Graph::new(model)?;
    let cx = Cx::new(config);
    let ids = cx.inputs.input_ids.as_str();
    if !g.is_graph_input(ids) {
        return Err(Unsupported::graph(
            ids,
            "graph input",
            "the graph has no such input (the config's input_ids)",
        ));
    }
    let (first, slot) = embedding::ids_use(&g, ids)?;
    let combined = gpt2::find(&g, first, slot);
    let (embedding, mut start) = match combined {
        Some(eln) => {
            let e = gpt2::embed_layer_norm(&g, &cx, eln)?;
            let start = LayerStart {
                attn_norm: e.attn_norm,
                normed: e.normed,
                norm_node: e.node,
                resid: e.resid,
                resid_owner: e.node,
                resid_uses: Vec::new(),
            };
            (e.embedding, start)
        }
        None => {
            let e = embedding::token_embedding(&g, &cx, ids)?;
            (e.embedding, first_norm(&g, &cx, e.out, e.last)?)
        }
    };
    let mut layers = Vec::new();
    let mut rotaries = Vec::new();
    let (final_norm, final_normed, final_node) = loop {
        let index = layers.len();
        if index >= cx.layers {
            return Err(g.err(
                start.norm_node,
                format!(
                    "starts decoder layer {index}, but the config's num_hidden_layers is {}",
                    cx.layers
                ),
            ));
        }
        let mut attn = if combined.is_some() {
            gpt2::attention(&g, &cx, index, start.normed, start.norm_node)?
        } else {
            attention::attention(&g, &cx, index, start.normed, start.norm_node)?
        };
        let (post, post_node) = residual_add(&g, &cx, attn.out, attn.last, &start, "attention")?;
        attach_bias(&g, &mut attn.attention.output, post.bias, post_node)?;
        let Some(sum) = post.sum else {
            return Err(g.err(
                post_node,
                "its sum output is unused: the MLP result would never reach the residual stream",
            ));
        };
        let mut m = mlp::mlp(&g, &cx, post.normed, post_node)?;
        let mid = LayerStart {
            attn_norm: post.norm.clone(),
            normed: post.normed,
            norm_node: post_node,
            resid: sum,
            resid_owner: post_node,
            resid_uses: Vec::new(),
        };
        let (next, next_node) = residual_add(&g, &cx, m.out, m.last, &mid, "MLP")?;
        let down = match &mut m.mlp {
            Mlp::Gated { down, .. } | Mlp::GatedFused { down, .. } | Mlp::Plain { down, .. } => {
                down
            }
        };
        attach_bias(&g, down, next.bias, next_node)?;
        layers.push(Layer {
            attn_norm: start.attn_norm,
            attention: attn.attention,
            mlp_norm: post.norm,
            mlp: m.mlp,
        });
        rotaries.push(attn.rotary);
        match next.sum {
            Some(sum) => {
                start = LayerStart {
                    attn_norm: next.norm,
                    normed: next.normed,
                    norm_node: next_node,
                    resid: sum,
                    resid_owner: next_node,
                    resid_uses: Vec::new(),
                }
            }
            None => break (next.norm, next.normed, next_node),
        }
    };
    if layers.len() != cx.layers {
        return Err(Unsupported::graph(
            "graph",
            "graph",
            format!(
                "{} decoder layers, but the config's num_hidden_layers is {}",
                layers.len(),
                cx.layers
            ),
        ));
    }
    let lm_head = lm_head(&g, &cx, final_normed, final_node)?;
    let rotary = one_rotary(rotaries)?;
    check_accounted(&g, &cx, combined.is_some())?;
    let max_positions = match (&rotary, &embedding.positions) {
        (Some(r), _) => r.cos.dims[0],
        (None, Some(p)) => p.dims[0],
        (None, None) => cx.context_length,
    };
    Ok(DecoderPlan {
        dims: Dims {
            hidden: cx.hidden,
            vocab: cx.vocab,
            layers: cx.layers,
            heads: cx.heads,
            kv_heads: cx.kv_heads,
            head_size: cx.head,
            max_positions,
        },
        embedding,
        layers,
        final_norm,
        lm_head,
        rotary,
        kv_layout: if combined.is_some() {
            KvLayout::Combined
        } else {
            KvLayout::Split
        },
    })
}

/// Layer 0's attention norm: the plain norm among the uses of the embedded tokens `x`.
fn first_norm<'m>(g: &Graph<'m>, cx: &Cx, x: &'m str, owner: usize) -> Lift<LayerStart<'m>> {
    let uses = g.uses(x);
    let norm = uses.iter().find_map(|u| match *u {
        Use::Node { node, slot } if is_plain_norm(g, node, slot) => Some(node),
        _ => None,
    });
    let Some(n) = norm else {
        let odd = uses.iter().find_map(|u| match *u {
            Use::Node { node, slot } if !is_skip_norm(g, node, slot) => Some(node),
            _ => None,
        });
        return Err(match odd {
            Some(node) => g.err(
                node,
                format!(
                    "{} reads the embedded tokens where the plan expects the first layer's input \
                     norm (SimplifiedLayerNormalization or LayerNormalization)",
                    g.node(node).op_type
                ),
            ),
            None => g.err(owner, "the embedded tokens feed no first-layer input norm"),
        });
    };
    let (attn_norm, normed) = plain_norm(g, n, cx.hidden)?;
    Ok(LayerStart {
        attn_norm,
        normed,
        norm_node: n,
        resid: x,
        resid_owner: owner,
        resid_uses: vec![Use::Node { node: n, slot: 0 }],
    })
}

/// The skip norm adding `branch` (the `what` block's output, from node `owner`) to the residual
/// stream of `start`: the norm and its node.
fn residual_add<'m>(
    g: &Graph<'m>,
    cx: &Cx,
    branch: &'m str,
    owner: usize,
    start: &LayerStart<'m>,
    what: &str,
) -> Lift<(SkipNorm<'m>, usize)> {
    let want = format!(
        "a SkipSimplifiedLayerNormalization or SkipLayerNormalization adding the {what} output to \
         the residual stream"
    );
    let (s, slot) = g.one_use(branch, owner, &want, |n, s| is_skip_norm(g, n, s))?;
    let other = g.input(s, 1 - slot);
    if g.source(other) != start.resid {
        return Err(g.err(
            s,
            format!("adds `{other}` to the {what} output, not the residual stream"),
        ));
    }
    let mut expected = start.resid_uses.clone();
    expected.push(Use::Node {
        node: s,
        slot: 1 - slot,
    });
    g.only_uses(
        start.resid,
        start.resid_owner,
        &expected,
        "the residual stream's next norms",
    )?;
    Ok((skip_norm(g, s, cx.hidden)?, s))
}

/// Moves a skip norm's bias input onto the linear layer whose output it adds.
fn attach_bias(g: &Graph, lin: &mut Linear, bias: Option<Tensor>, node: usize) -> Lift<()> {
    let Some(bias) = bias else { return Ok(()) };
    if lin.bias.is_some() {
        return Err(g.err(
            node,
            "has a bias input, but the projection before it already has a bias",
        ));
    }
    if bias.dims != [lin.n] {
        return Err(g.err(
            node,
            format!(
                "bias {:?} does not fit the projection's width {}",
                bias.dims, lin.n
            ),
        ));
    }
    lin.bias = Some(bias);
    Ok(())
}

/// The lm_head reading the final norm's output; its result must be the logits output.
fn lm_head(g: &Graph, cx: &Cx, normed: &str, norm_node: usize) -> Lift<Linear> {
    let want = "the lm_head projection (MatMul or MatMulNBits)";
    let (h, _) = g.one_use(normed, norm_node, want, |n, s| is_linear(g, n, s))?;
    let head = linear(g, h, cx.hidden, Some(cx.vocab))?;
    let logits = cx.outputs.logits.as_str();
    match g.uses(head.out)[..] {
        [Use::Output(name)] if name == logits => Ok(head.linear),
        [Use::Node { node, .. }, ..] => Err(g.err(
            node,
            format!(
                "{} after the lm_head is not supported (the logits must be its output)",
                g.node(node).op_type
            ),
        )),
        _ => Err(g.err(
            head.last,
            format!("its result is not (only) the graph output `{logits}`"),
        )),
    }
}

/// All layers that apply rotary must apply the same one.
fn one_rotary(rotaries: Vec<Option<Rotary>>) -> Lift<Option<Rotary>> {
    let mut first: Option<(usize, Rotary)> = None;
    for (layer, r) in rotaries.into_iter().enumerate() {
        let Some(r) = r else { continue };
        match &first {
            None => first = Some((layer, r)),
            Some((l0, r0)) if *r0 != r => {
                return Err(Unsupported::graph(
                    "graph",
                    "graph",
                    format!(
                        "layer {layer} applies a different rotary embedding (caches or layout) than layer {l0}"
                    ),
                ));
            }
            Some(_) => {}
        }
    }
    Ok(first.map(|(_, r)| r))
}

/// Every node must have a role in the plan, and every graph output must be the logits or a
/// present KV output.
fn check_accounted(g: &Graph, cx: &Cx, combined: bool) -> Lift<()> {
    if let Some(i) = g.first_unclaimed() {
        return Err(g.err(
            i,
            "is not part of the decoder the plan describes (no role found for it)",
        ));
    }
    let present = &cx.outputs.present;
    let known = |name: &str| {
        name == cx.outputs.logits
            || (0..cx.layers).any(|l| {
                if combined {
                    present.combined(l).as_deref() == Some(name)
                } else {
                    present.key(l) == name || present.value(l) == name
                }
            })
    };
    if let Some(out) = g.graph_outputs().find(|o| !known(o)) {
        return Err(Unsupported::graph(
            out,
            "graph output",
            "not an output of the decoder the plan describes",
        ));
    }
    Ok(())
}
