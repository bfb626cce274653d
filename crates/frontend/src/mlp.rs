//! The feed-forward block: gated (`down(act(gate(x)) * up(x))`, with gate and up apart or fused
//! and `Split`) or plain (`down(act(up(x)))`), and the activation between (SiLU as
//! `Sigmoid` + `Mul`, tanh-GELU as com.microsoft `FastGelu` or `Gelu(approximate="tanh")`, erf GELU).

use crate::attention::split_sizes;
use crate::context::Cx;
use crate::error::Lift;
use crate::graph::{Graph, MS, Use};
use crate::plan::{Activation, Linear, Mlp, Tensor};
use crate::weights::{dense, is_linear, linear};

/// A lifted MLP and the value holding its output (before the residual add).
pub(crate) struct MlpOut<'m> {
    pub mlp: Mlp,
    pub out: &'m str,
    pub last: usize,
}

/// A recognised activation: `out = act(x)`, where a `FastGelu` may add `bias` first.
struct Act<'m> {
    act: Activation,
    out: &'m str,
    last: usize,
    bias: Option<Tensor>,
}

/// The MLP fed by `normed`, the output of the MLP norm `norm_node`.
pub(crate) fn mlp<'m>(
    g: &Graph<'m>,
    cx: &Cx,
    normed: &'m str,
    norm_node: usize,
) -> Lift<MlpOut<'m>> {
    let mut projections = Vec::new();
    for u in g.uses(normed) {
        match u {
            Use::Node { node, slot } if is_linear(g, node, slot) => projections.push(node),
            Use::Node { node, .. } => {
                return Err(g.err(
                    node,
                    format!(
                        "{} consumes the MLP norm's output where the plan expects the gate/up \
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
    match projections[..] {
        [p] => single(g, cx, p),
        [a, b] => gated(g, cx, a, b),
        _ => Err(g.err(
            norm_node,
            format!(
                "its output feeds {} projections; expected 1 or 2",
                projections.len()
            ),
        )),
    }
}

/// Attaches an activation's bias (a `FastGelu` bias input) to the projection before it.
fn attach(g: &Graph, lin: &mut Linear, bias: Option<Tensor>, node: usize) -> Lift<()> {
    if let Some(bias) = bias {
        if lin.bias.is_some() || bias.dims != [lin.n] {
            return Err(g.err(node, "its bias input does not fit the projection before it"));
        }
        lin.bias = Some(bias);
    }
    Ok(())
}

/// One projection: gate and up fused (`Split` into two halves), or a plain MLP.
fn single<'m>(g: &Graph<'m>, cx: &Cx, p: usize) -> Lift<MlpOut<'m>> {
    let mut first = linear(g, p, cx.hidden, None)?;
    let uses = g.uses(first.out);
    let split = match uses[..] {
        [Use::Node { node, slot: 0 }] if g.is_op(node, "", "Split") => Some(node),
        _ => None,
    };
    let Some(split) = split else {
        let act = activation(g, first.out, first.last, "up", first.linear.n)?;
        attach(g, &mut first.linear, act.bias, act.last)?;
        let (down, out, last) = down(g, cx, act.out, act.last, first.linear.n)?;
        let mlp = Mlp::Plain {
            up: first.linear,
            down,
            activation: act.act,
        };
        return Ok(MlpOut { mlp, out, last });
    };
    let n = first.linear.n;
    if n % 2 != 0 {
        return Err(g.err(split, format!("splits a projection of odd width {n}")));
    }
    let width = n / 2;
    split_sizes(g, split, &[width, width])?;
    g.claim(split);
    let (gate, up) = (g.output(split, 0), g.output(split, 1));
    let act = activation(g, gate, split, "gate", width)?;
    if act.bias.is_some() {
        return Err(g.err(
            act.last,
            "a bias on half of a fused gate/up projection is not supported",
        ));
    }
    let (mul, out) = gate_times_up(g, &act, up, split)?;
    let (down, out, last) = down(g, cx, out, mul, width)?;
    let mlp = Mlp::GatedFused {
        gate_up: first.linear,
        width,
        down,
        activation: act.act,
    };
    Ok(MlpOut { mlp, out, last })
}

/// Two projections: the one feeding an activation is the gate, the other the up projection.
fn gated<'m>(g: &Graph<'m>, cx: &Cx, a: usize, b: usize) -> Lift<MlpOut<'m>> {
    let la = linear(g, a, cx.hidden, None)?;
    let lb = linear(g, b, cx.hidden, None)?;
    // The up projection's only consumer is the final Mul; the gate feeds an activation.
    let act_score = |out: &str| {
        g.uses(out)
            .iter()
            .map(|u| match *u {
                Use::Node { node, .. } if g.is_op(node, "", "Mul") => 0,
                Use::Node { node, .. } if is_known_act(g, node) => 2,
                _ => 1,
            })
            .max()
            .unwrap_or(0)
    };
    let (mut gate, up) = match (act_score(la.out), act_score(lb.out)) {
        (sa, sb) if sa > sb => (la, lb),
        (sa, sb) if sb > sa => (lb, la),
        _ => {
            return Err(g.err(
                a,
                "cannot tell the gate projection from the up projection (no single activation)",
            ));
        }
    };
    if gate.linear.n != up.linear.n {
        return Err(g.err(
            up.last,
            format!(
                "up width {} differs from gate width {}",
                up.linear.n, gate.linear.n
            ),
        ));
    }
    let width = gate.linear.n;
    let act = activation(g, gate.out, gate.last, "gate", width)?;
    attach(g, &mut gate.linear, act.bias.clone(), act.last)?;
    let (mul, out) = gate_times_up(g, &act, up.out, up.last)?;
    let (down, out, last) = down(g, cx, out, mul, width)?;
    let mlp = Mlp::Gated {
        gate: gate.linear,
        up: up.linear,
        down,
        activation: act.act,
    };
    Ok(MlpOut { mlp, out, last })
}

/// The `Mul` of the activated gate and `up` (output of `up_owner`): its node and output.
fn gate_times_up<'m>(
    g: &Graph<'m>,
    act: &Act<'m>,
    up: &'m str,
    up_owner: usize,
) -> Lift<(usize, &'m str)> {
    let want = "the Mul with the up projection";
    let (mul, slot) = g.one_use(act.out, act.last, want, |n, _| g.is_op(n, "", "Mul"))?;
    let other = g.input(mul, 1 - slot);
    if g.source(other) != up {
        return Err(g.err(
            mul,
            format!("multiplies the activation by `{other}`, not the up projection"),
        ));
    }
    g.only_uses(
        up,
        up_owner,
        &[Use::Node {
            node: mul,
            slot: 1 - slot,
        }],
        want,
    )?;
    g.claim(mul);
    Ok((mul, g.output(mul, 0)))
}

/// The down projection reading `value` (output of `owner`, `k` wide).
fn down<'m>(
    g: &Graph<'m>,
    cx: &Cx,
    value: &'m str,
    owner: usize,
    k: usize,
) -> Lift<(Linear, &'m str, usize)> {
    let want = "the down projection (MatMul or MatMulNBits)";
    let (d, _) = g.one_use(value, owner, want, |n, s| is_linear(g, n, s))?;
    let lin = linear(g, d, k, Some(cx.hidden))?;
    Ok((lin.linear, lin.out, lin.last))
}

/// A single-node activation op.
fn is_known_act(g: &Graph, i: usize) -> bool {
    g.is_op(i, "", "Sigmoid")
        || g.is_op(i, "", "Gelu")
        || g.is_op(i, MS, "Gelu")
        || g.is_op(i, MS, "FastGelu")
        || g.is_op(i, MS, "QuickGelu")
}

/// The activation applied to `value` (output of `owner`, `width` wide, after the `role`
/// projection).
fn activation<'m>(
    g: &Graph<'m>,
    value: &'m str,
    owner: usize,
    role: &str,
    width: usize,
) -> Lift<Act<'m>> {
    let unknown = |n: usize| {
        g.err(
            n,
            format!(
                "activation {} after the {role} projection is not a known activation",
                g.node(n).op_type
            ),
        )
    };
    let uses = g.uses(value);
    let act = match uses[..] {
        [Use::Node { node, slot: 0 }] => {
            let (act, bias) =
                single_op_act(g, node, width).map_err(|e| e.unwrap_or_else(|| unknown(node)))?;
            g.claim(node);
            Act {
                act,
                out: g.output(node, 0),
                last: node,
                bias,
            }
        }
        [
            Use::Node { node: a, slot: sa },
            Use::Node { node: b, slot: sb },
        ] => {
            let (mul, unary, unary_slot) = match (g.is_op(a, "", "Mul"), g.is_op(b, "", "Mul")) {
                (true, false) => (a, b, sb),
                (false, true) => (b, a, sa),
                _ => {
                    return Err(g.err(
                        owner,
                        format!(
                            "its output feeds two {}s; expected an activation",
                            g.node(a).op_type
                        ),
                    ));
                }
            };
            if unary_slot != 0 || !g.is_op(unary, "", "Sigmoid") {
                return Err(unknown(unary));
            }
            g.only_attrs(unary, &[])?;
            let s_out = g.output(unary, 0);
            let (m, ms) = g.one_use(s_out, unary, "the Mul of x * sigmoid(x)", |n, _| n == mul)?;
            if g.source(g.input(m, 1 - ms)) != value {
                return Err(g.err(mul, "does not multiply the sigmoid by its own input"));
            }
            g.claim(unary);
            g.claim(mul);
            Act {
                act: Activation::Silu,
                out: g.output(mul, 0),
                last: mul,
                bias: None,
            }
        }
        [] => {
            return Err(g.err(
                owner,
                format!("its output is unused; expected an activation after the {role} projection"),
            ));
        }
        _ => {
            let u = uses.iter().find(|u| !matches!(**u, Use::Node { node, .. } if g.is_op(node, "", "Mul") || g.is_op(node, "", "Sigmoid")));
            return Err(match u {
                Some(u) => g.extra_use(
                    *u,
                    value,
                    owner,
                    &format!("the activation after the {role} projection"),
                ),
                None => g.err(
                    owner,
                    format!(
                        "its output feeds {} nodes; expected an activation",
                        uses.len()
                    ),
                ),
            });
        }
    };
    Ok(act)
}

/// A one-node activation at node `i` and its optional bias input; `Err(None)` when the op is not
/// an activation the plan knows.
fn single_op_act(
    g: &Graph,
    i: usize,
    width: usize,
) -> Result<(Activation, Option<Tensor>), Option<crate::Unsupported>> {
    let n_inputs = g.node(i).input.len();
    let no_attrs = |g: &Graph| g.only_attrs(i, &[]).map_err(Some);
    if g.is_op(i, MS, "FastGelu") {
        no_attrs(g)?;
        let bias = match g.input(i, 1) {
            "" => None,
            b => Some(dense(g, i, "bias", b, &[width]).map_err(Some)?),
        };
        if n_inputs > 2 {
            return Err(Some(g.err(i, "unexpected extra input")));
        }
        return Ok((Activation::GeluTanh, bias));
    }
    if n_inputs != 1 {
        return Err(None);
    }
    if g.is_op(i, "", "Gelu") {
        g.only_attrs(i, &["approximate"]).map_err(Some)?;
        return match g.str_attr(i, "approximate").map_err(Some)?.as_deref() {
            None | Some("none") => Ok((Activation::Gelu, None)),
            Some("tanh") => Ok((Activation::GeluTanh, None)),
            Some(other) => Err(Some(
                g.err(i, format!("approximate \"{other}\" is not supported")),
            )),
        };
    }
    if g.is_op(i, MS, "Gelu") {
        no_attrs(g)?;
        return Ok((Activation::Gelu, None));
    }
    if g.is_op(i, MS, "QuickGelu") {
        g.only_attrs(i, &["alpha"]).map_err(Some)?;
        // x * sigmoid(alpha * x) is SiLU only for alpha 1.
        let alpha = g.float_attr(i, "alpha").map_err(Some)?.unwrap_or(1.702);
        if alpha == 1.0 {
            return Ok((Activation::Silu, None));
        }
        return Err(Some(g.err(
            i,
            format!("QuickGelu with alpha {alpha} is not a known activation"),
        )));
    }
    Err(None)
}
