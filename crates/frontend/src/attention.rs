//! The attention block of the GroupQueryAttention families: from the attention norm's output
//! through the q/k/v projections (one fused projection, fused and `Split`, or three), optional
//! per-head q/k norms (`Reshape` → norm → `Reshape`) and separate `RotaryEmbedding`s, the
//! attention node itself, and the output projection.

use crate::context::Cx;
use crate::error::Lift;
use crate::gqa::gqa;
use crate::graph::{Graph, MS, Use};
use crate::norms::plain_norm;
use crate::plan::{Attention, Linear, Norm, Qkv, Rotary};
use crate::rotary::{RopeNode, rope_node};
use crate::weights::{LinearOut, is_linear, linear};

/// A lifted attention block and the value holding its output (before the residual add).
pub(crate) struct AttnOut<'m> {
    pub attention: Attention,
    pub out: &'m str,
    /// The node producing `out`.
    pub last: usize,
    pub rotary: Option<Rotary>,
}

/// What lies between one projection output and the attention node.
struct PathEnd {
    gqa: usize,
    slot: usize,
    norm: Option<Norm>,
    rope: Option<RopeNode>,
}

fn is_gqa(g: &Graph, i: usize) -> bool {
    g.is_op(i, MS, "GroupQueryAttention")
}

/// The attention block fed by `normed`, the output of the attention norm `norm_node`.
pub(crate) fn attention<'m>(
    g: &Graph<'m>,
    cx: &Cx,
    layer: usize,
    normed: &'m str,
    norm_node: usize,
) -> Lift<AttnOut<'m>> {
    let mut projections = Vec::new();
    for u in g.uses(normed) {
        match u {
            Use::Node { node, slot } if is_linear(g, node, slot) => projections.push(node),
            Use::Node { node, .. } if g.is_op(node, MS, "Attention") => {
                return Err(g.err(
                    node,
                    "attention with the q/k/v weights inside the op is only supported in the gpt2 \
                     layout (EmbedLayerNormalization, combined past_%d cache)",
                ));
            }
            Use::Node { node, .. } => {
                return Err(g.err(
                    node,
                    format!(
                        "{} consumes the attention norm's output where the plan expects the q/k/v \
                         projections (MatMul or MatMulNBits)",
                        g.node(node).op_type
                    ),
                ));
            }
            Use::Output(name) => {
                return Err(g.err(
                    norm_node,
                    format!("its output is also the graph output `{name}`"),
                ));
            }
        }
    }
    let (qd, kvd) = (cx.q_width(), cx.kv_width());
    let (qkv, ends, gqa_node) = match projections[..] {
        [p] => {
            let lin = linear(
                g,
                p,
                cx.hidden,
                Some(qd.saturating_add(kvd.saturating_mul(2))),
            )?;
            packed(g, cx, lin, qd, kvd)?
        }
        [a, b, c] => separate(g, cx, [a, b, c], qd, kvd)?,
        _ => {
            return Err(g.err(
                norm_node,
                format!(
                    "its output feeds {} projections; expected 1 (fused q/k/v) or 3 (q, k, v){}",
                    projections.len(),
                    if projections.len() == 2 {
                        " (attention and MLP reading one norm, a parallel block, is not supported)"
                    } else {
                        ""
                    }
                ),
            ));
        }
    };
    let packed_input = ends.is_empty();
    let info = gqa(g, cx, layer, gqa_node, packed_input)?;
    let mut ends = ends.into_iter().map(|e| (e.norm, e.rope));
    let (q_end, k_end, v_end) = (ends.next(), ends.next(), ends.next());
    let (q_norm, q_rope) = q_end.unwrap_or((None, None));
    let (k_norm, k_rope) = k_end.unwrap_or((None, None));
    if let Some((v_norm, v_rope)) = v_end
        && (v_norm.is_some() || v_rope.is_some())
    {
        return Err(g.err(
            gqa_node,
            "a norm or rotary on the value path is not supported",
        ));
    }
    let (q_norm, k_norm) = match (q_norm, k_norm, info.qk_norms) {
        (None, None, None) => (None, None),
        (None, None, Some((q, k))) => (Some(q), Some(k)),
        (Some(q), Some(k), None) => (Some(q), Some(k)),
        _ => {
            return Err(g.err(
                gqa_node,
                "q and k must both have a per-head norm (explicit or fused) or neither",
            ));
        }
    };
    let rotary = match (q_rope, k_rope, info.rotary) {
        (None, None, fused) => fused,
        (Some(q), Some(k), None) => Some(separate_rotary(g, cx, q, k)?),
        (_, _, Some(_)) => {
            return Err(g.err(
                gqa_node,
                "rotary applied both by RotaryEmbedding and by do_rotary",
            ));
        }
        (Some(r), None, None) | (None, Some(r), None) => {
            return Err(g.err(r.node, "RotaryEmbedding on only one of q and k"));
        }
    };
    let (o, _) = g.one_use(
        info.out,
        gqa_node,
        "the output projection (MatMul or MatMulNBits)",
        |n, s| is_linear(g, n, s),
    )?;
    let output = linear(g, o, qd, Some(cx.hidden))?;
    Ok(AttnOut {
        attention: Attention {
            qkv,
            q_norm,
            k_norm,
            output: output.linear,
            heads: cx.heads,
            kv_heads: cx.kv_heads,
            head_size: cx.head,
            scale: info.scale,
            rotary: rotary.is_some(),
            window: info.window,
            softcap: info.softcap,
        },
        out: output.out,
        last: output.last,
        rotary,
    })
}

/// The q/k/v projections, the paths from them to the attention node (none when one packed
/// projection feeds it directly), and that node.
type Found = (Qkv, Vec<PathEnd>, usize);

/// One projection for q, k and v: straight into the attention node, or through a `Split`.
fn packed<'m>(g: &Graph<'m>, cx: &Cx, lin: LinearOut<'m>, qd: usize, kvd: usize) -> Lift<Found> {
    let want = "GroupQueryAttention (packed q/k/v) or a Split into q, k and v";
    let (u, slot) = g.one_use(lin.out, lin.last, want, |n, s| {
        s == 0 && (is_gqa(g, n) || g.is_op(n, "", "Split"))
    })?;
    let qkv = Qkv::Fused {
        linear: lin.linear,
        q: qd,
        k: kvd,
        v: kvd,
    };
    if is_gqa(g, u) && slot == 0 {
        return Ok((qkv, Vec::new(), u));
    }
    let split = u;
    split_sizes(g, split, &[qd, kvd, kvd])?;
    let mut ends = Vec::new();
    for (out_slot, width) in [qd, kvd, kvd].into_iter().enumerate() {
        let end = follow(g, cx, g.output(split, out_slot), width, split)?;
        if end.slot != out_slot {
            return Err(g.err(
                split,
                format!(
                    "output {out_slot} reaches attention input {} instead",
                    end.slot
                ),
            ));
        }
        ends.push(end);
    }
    let gqa_node = ends[0].gqa;
    if ends.iter().any(|e| e.gqa != gqa_node) {
        return Err(g.err(split, "its outputs reach different attention nodes"));
    }
    g.claim(split);
    Ok((qkv, ends, gqa_node))
}

/// Checks that `Split` node `i` cuts its input's last axis into `sizes`.
pub(crate) fn split_sizes(g: &Graph, i: usize, sizes: &[usize]) -> Lift<()> {
    g.only_attrs(i, &["axis", "split", "num_outputs"])?;
    let axis = g.int_attr(i, "axis")?.unwrap_or(0);
    if axis != -1 && axis != 2 {
        return Err(g.err(i, format!("axis {axis} is not the hidden axis")));
    }
    let count = g.node(i).output.len();
    if count != sizes.len() || g.node(i).output.iter().any(String::is_empty) {
        return Err(g.err(i, format!("{count} outputs, expected {}", sizes.len())));
    }
    let given = match g.input(i, 1) {
        "" => g.ints_attr(i, "split")?,
        s => Some(
            g.const_i64s(s)
                .ok_or_else(|| g.err(i, "split sizes are not a constant"))?,
        ),
    };
    let want: Vec<i64> = sizes.iter().map(|&s| s as i64).collect();
    match given {
        Some(given) if given == want => Ok(()),
        Some(given) => Err(g.err(i, format!("split sizes {given:?}, expected {want:?}"))),
        // Equal parts (num_outputs, or no sizes at all).
        None if sizes.iter().all(|&s| s == sizes[0]) => {
            let n = g.int_attr(i, "num_outputs")?.unwrap_or(count as i64);
            if n == count as i64 {
                Ok(())
            } else {
                Err(g.err(i, format!("num_outputs {n} with {count} outputs")))
            }
        }
        None => Err(g.err(i, format!("equal parts, expected sizes {want:?}"))),
    }
}

/// Three projections; which is q, k or v is decided by the attention input each one reaches.
fn separate(g: &Graph, cx: &Cx, nodes: [usize; 3], qd: usize, kvd: usize) -> Lift<Found> {
    let mut found: [Option<(Linear, usize, PathEnd)>; 3] = [None, None, None];
    for p in nodes {
        let lin = linear(g, p, cx.hidden, None)?;
        let end = follow(g, cx, lin.out, lin.linear.n, lin.last)?;
        let slot = end.slot;
        if found[slot].is_some() {
            return Err(g.err(
                p,
                format!("a second projection reaching attention input {slot}"),
            ));
        }
        found[slot] = Some((lin.linear, p, end));
    }
    let [Some(q), Some(k), Some(v)] = found else {
        return Err(g.err(nodes[0], "the three projections do not reach q, k and v"));
    };
    for ((lin, node, _), want, role) in [(&q, qd, "q"), (&k, kvd, "k"), (&v, kvd, "v")] {
        if lin.n != want {
            return Err(g.err(
                *node,
                format!("{role} projection output width {}, expected {want}", lin.n),
            ));
        }
    }
    let gqa_node = q.2.gqa;
    if k.2.gqa != gqa_node || v.2.gqa != gqa_node {
        return Err(g.err(q.1, "q, k and v reach different attention nodes"));
    }
    let qkv = Qkv::Separate {
        q: q.0,
        k: k.0,
        v: v.0,
    };
    Ok((qkv, vec![q.2, k.2, v.2], gqa_node))
}

/// Follows `value` (`width` wide, output of `owner`) to an input of a GroupQueryAttention, through
/// at most one per-head norm and then at most one RotaryEmbedding.
fn follow<'m>(g: &Graph<'m>, cx: &Cx, value: &'m str, width: usize, owner: usize) -> Lift<PathEnd> {
    let want = "GroupQueryAttention (through at most a per-head norm and a RotaryEmbedding)";
    let (mut value, mut owner) = (value, owner);
    let (mut norm, mut rope) = (None, None);
    loop {
        let (n, slot) = g.one_use(value, owner, want, |_, _| true)?;
        if is_gqa(g, n) && slot < 3 {
            return Ok(PathEnd {
                gqa: n,
                slot,
                norm,
                rope,
            });
        }
        if g.is_op(n, "", "Reshape") && slot == 0 && norm.is_none() && rope.is_none() {
            let (found, out, last) = head_norm(g, cx, n, width)?;
            norm = Some(found);
            (value, owner) = (out, last);
        } else if g.is_op(n, MS, "RotaryEmbedding") && slot == 0 && rope.is_none() {
            rope = Some(rope_node(g, cx, n)?);
            (value, owner) = (g.output(n, 0), n);
        } else {
            return Err(g.err(
                n,
                format!(
                    "{} between a q/k/v projection and GroupQueryAttention is not supported",
                    g.node(n).op_type
                ),
            ));
        }
    }
}

/// A `Reshape` node's target, which must be `want`.
fn reshape_to(g: &Graph, i: usize, want: &[i64]) -> Lift<()> {
    g.only_attrs(i, &["allowzero"])?;
    g.int_in(i, "allowzero", 0, &[0])?;
    match g.const_i64s(g.input(i, 1)) {
        Some(t) if t == want => Ok(()),
        Some(t) => Err(g.err(i, format!("Reshape target {t:?}, expected {want:?}"))),
        None => Err(g.err(i, "Reshape target is not a constant")),
    }
}

/// `Reshape([0, -1, head])` → norm over the head → `Reshape([0, -1, width])` from node `first`.
fn head_norm<'m>(
    g: &Graph<'m>,
    cx: &Cx,
    first: usize,
    width: usize,
) -> Lift<(Norm, &'m str, usize)> {
    let head = cx.head as i64;
    reshape_to(g, first, &[0, -1, head])?;
    let (norm_node, _) = g.one_use(g.output(first, 0), first, "a per-head norm", |n, s| {
        crate::norms::is_plain_norm(g, n, s)
    })?;
    let (norm, out) = plain_norm(g, norm_node, cx.head)?;
    let (back, _) = g.one_use(
        out,
        norm_node,
        "a Reshape back to [batch, seq, width]",
        |n, s| s == 0 && g.is_op(n, "", "Reshape"),
    )?;
    reshape_to(g, back, &[0, -1, width as i64])?;
    g.claim(first);
    g.claim(back);
    Ok((norm, g.output(back, 0), back))
}

/// The rotary of separate RotaryEmbedding nodes on q and k, which must agree.
fn separate_rotary(g: &Graph, cx: &Cx, q: RopeNode, k: RopeNode) -> Lift<Rotary> {
    for (r, heads, role) in [(&q, cx.heads, "q"), (&k, cx.kv_heads, "k")] {
        if r.num_heads != 0 && r.num_heads != heads {
            return Err(g.err(
                r.node,
                format!(
                    "num_heads {} on the {role} path, expected {heads}",
                    r.num_heads
                ),
            ));
        }
    }
    if q.rotary != k.rotary {
        return Err(g.err(
            k.node,
            "the k rotary differs from the q rotary (caches or layout)",
        ));
    }
    Ok(q.rotary)
}
