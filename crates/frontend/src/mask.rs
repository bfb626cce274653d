//! The attention-mask subgraph that feeds GroupQueryAttention: `seqlens_k = int32(ReduceSum(mask,
//! axis 1) - 1)` and `total_sequence_length = int32(Shape(mask)[1])`. The plan derives both from
//! the mask itself, so these nodes are accounted for once their role is verified.

use genai_onnx::DataType;

use crate::context::Cx;
use crate::error::Lift;
use crate::graph::{Graph, MS, Use};

/// Node `i` is `Cast(to=int32)` of one input.
fn is_int32_cast(g: &Graph, i: usize) -> Lift<bool> {
    Ok(g.is_op(i, "", "Cast")
        && g.node(i).attribute.len() == 1
        && g.int_attr(i, "to")? == Some(i64::from(DataType::Int32.to_onnx())))
}

/// The single constant value 1 (scalar or `[1]`).
fn is_one(g: &Graph, value: &str) -> bool {
    g.const_i64s(value).as_deref() == Some(&[1])
}

/// Checks that `value`, input `slot` of GroupQueryAttention node `gqa`, is the mask-derived value
/// the plan assumes (`slot` 5: seqlens_k, 6: total_sequence_length). Each value is checked once.
pub(crate) fn check(g: &Graph, cx: &Cx, gqa: usize, slot: usize, value: &str) -> Lift<()> {
    let what = if slot == 5 {
        "seqlens_k"
    } else {
        "total_sequence_length"
    };
    if value.is_empty() {
        return Err(g.err(gqa, format!("{what} input missing")));
    }
    if cx.checked.borrow().contains(value) {
        return Ok(());
    }
    if !g.is_graph_input(&cx.inputs.attention_mask) {
        return Err(g.err(
            gqa,
            format!(
                "the graph has no `{}` input to derive {what} from",
                cx.inputs.attention_mask
            ),
        ));
    }
    let wrong = |why: &str| {
        g.err(
            gqa,
            format!(
                "{what} `{value}` is not {}: {why}",
                if slot == 5 {
                    "int32(ReduceSum(attention_mask, axis 1) - 1)"
                } else {
                    "int32(Shape(attention_mask)[1])"
                }
            ),
        )
    };
    let Some((cast, _)) = g.producer(value) else {
        return Err(wrong("it is not computed in the graph"));
    };
    if !is_int32_cast(g, cast)? {
        return Err(wrong("its producer is not a Cast to int32"));
    }
    // Every use of the mask-derived value must be the same input of a GroupQueryAttention.
    for u in g.uses(value) {
        let fine = matches!(u, Use::Node { node, slot: s } if s == slot
            && g.is_op(node, MS, "GroupQueryAttention"));
        if !fine {
            return Err(g.extra_use(u, value, cast, &format!("GroupQueryAttention's {what}")));
        }
    }
    let inner = g.input(cast, 0);
    if slot == 5 {
        seqlens(g, cx, cast, inner)?;
    } else {
        total(g, cx, cast, inner)?;
    }
    g.claim(cast);
    cx.checked.borrow_mut().insert(value.to_string());
    Ok(())
}

/// `Sub(ReduceSum(mask, [1], keepdims 0), 1)`, used only by `cast`.
fn seqlens(g: &Graph, cx: &Cx, cast: usize, value: &str) -> Lift<()> {
    let sub = match g.producer(value) {
        Some((sub, _)) if g.is_op(sub, "", "Sub") && is_one(g, g.input(sub, 1)) => sub,
        _ => return Err(g.err(cast, "seqlens_k: the value cast to int32 is not `x - 1`")),
    };
    g.only_uses(
        value,
        sub,
        &[Use::Node {
            node: cast,
            slot: 0,
        }],
        "the Cast to int32",
    )?;
    let summed = g.input(sub, 0);
    let rs = match g.producer(summed) {
        Some((rs, _)) if g.is_op(rs, "", "ReduceSum") => rs,
        _ => return Err(g.err(sub, "seqlens_k: expected ReduceSum(attention_mask) - 1")),
    };
    if g.input(rs, 0) != cx.inputs.attention_mask {
        return Err(g.err(
            rs,
            format!(
                "seqlens_k: sums `{}`, not the attention mask",
                g.input(rs, 0)
            ),
        ));
    }
    g.only_attrs(rs, &["keepdims", "noop_with_empty_axes", "axes"])?;
    let axes = match g.input(rs, 1) {
        "" => g.ints_attr(rs, "axes")?,
        a => g.const_i64s(a),
    };
    if axes.as_deref() != Some(&[1]) {
        return Err(g.err(
            rs,
            format!("seqlens_k: sums over axes {axes:?}, expected [1]"),
        ));
    }
    if g.int_attr(rs, "keepdims")? != Some(0) {
        return Err(g.err(rs, "seqlens_k: keepdims must be 0"));
    }
    g.int_in(rs, "noop_with_empty_axes", 0, &[0])?;
    g.only_uses(summed, rs, &[Use::Node { node: sub, slot: 0 }], "the Sub")?;
    g.claim(sub);
    g.claim(rs);
    Ok(())
}

/// `Gather(Shape(mask), 1, axis 0)`, used only by `cast`.
fn total(g: &Graph, cx: &Cx, cast: usize, value: &str) -> Lift<()> {
    let gather = match g.producer(value) {
        Some((n, _)) if g.is_op(n, "", "Gather") && is_one(g, g.input(n, 1)) => n,
        _ => {
            return Err(g.err(
                cast,
                "total_sequence_length: the value cast to int32 is not Shape(attention_mask)[1]",
            ));
        }
    };
    g.only_attrs(gather, &["axis"])?;
    g.int_in(gather, "axis", 0, &[0])?;
    g.only_uses(
        value,
        gather,
        &[Use::Node {
            node: cast,
            slot: 0,
        }],
        "the Cast to int32",
    )?;
    let shape_out = g.input(gather, 0);
    let shape = match g.producer(shape_out) {
        Some((n, _)) if g.is_op(n, "", "Shape") => n,
        _ => return Err(g.err(gather, "total_sequence_length: does not index a Shape")),
    };
    if g.input(shape, 0) != cx.inputs.attention_mask {
        return Err(g.err(
            shape,
            format!(
                "total_sequence_length: shape of `{}`, not the attention mask",
                g.input(shape, 0)
            ),
        ));
    }
    g.only_attrs(shape, &[])?;
    g.only_uses(
        shape_out,
        shape,
        &[Use::Node {
            node: gather,
            slot: 0,
        }],
        "the Gather",
    )?;
    g.claim(gather);
    g.claim(shape);
    Ok(())
}
