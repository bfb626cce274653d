//! Normalisations: `SimplifiedLayerNormalization` / `LayerNormalization` (a block's input norm)
//! and com.microsoft `SkipSimplifiedLayerNormalization` / `SkipLayerNormalization` (the residual
//! add of the previous block fused with the next norm).

use crate::error::Lift;
use crate::graph::{Graph, MS};
use crate::plan::{Norm, NormKind, Tensor};
use crate::weights::dense;

/// Whether node `i` takes a value at `slot` as a plain (non-skip) norm does.
pub(crate) fn is_plain_norm(g: &Graph, i: usize, slot: usize) -> bool {
    slot == 0
        && (g.is_op(i, "", "SimplifiedLayerNormalization") || g.is_op(i, "", "LayerNormalization"))
}

/// Whether node `i` is a skip norm taking a value at `slot` (input or skip).
pub(crate) fn is_skip_norm(g: &Graph, i: usize, slot: usize) -> bool {
    slot < 2
        && (g.is_op(i, MS, "SkipSimplifiedLayerNormalization")
            || g.is_op(i, MS, "SkipLayerNormalization"))
}

/// A norm's `epsilon`, which must be given explicitly.
pub(crate) fn epsilon(g: &Graph, i: usize) -> Lift<f32> {
    match g.float_attr(i, "epsilon")? {
        Some(e) if e.is_finite() && e > 0.0 => Ok(e),
        Some(e) => Err(g.err(i, format!("epsilon {e} is not supported"))),
        None => Err(g.err(i, "epsilon attribute missing")),
    }
}

/// The norm's weight (and bias) of `width`, from inputs `w_slot` and `b_slot`.
pub(crate) fn weights(
    g: &Graph,
    i: usize,
    width: usize,
    w_slot: usize,
    b_slot: Option<usize>,
) -> Lift<(Tensor, Option<Tensor>)> {
    if g.input(i, w_slot).is_empty() {
        return Err(g.err(i, "weight input missing"));
    }
    let weight = dense(g, i, "norm weight", g.input(i, w_slot), &[width])?;
    let bias = match b_slot.map(|s| g.input(i, s)) {
        None | Some("") => None,
        Some(b) => Some(dense(g, i, "norm bias", b, &[width])?),
    };
    Ok((weight, bias))
}

/// Fails when an output of node `i` from `first` on (besides `keep`) is used.
pub(crate) fn unused_outputs(g: &Graph, i: usize, first: usize, keep: Option<usize>) -> Lift<()> {
    for slot in first..g.node(i).output.len() {
        let out = g.output(i, slot);
        if Some(slot) != keep && !out.is_empty() && !g.uses(out).is_empty() {
            return Err(g.err(
                i,
                format!("output {slot} (`{out}`) is used; the plan has no such value"),
            ));
        }
    }
    Ok(())
}

/// A plain norm over `width` at node `i`: the norm and its output value.
pub(crate) fn plain_norm<'m>(g: &Graph<'m>, i: usize, width: usize) -> Lift<(Norm, &'m str)> {
    let simplified = g.is_op(i, "", "SimplifiedLayerNormalization");
    g.only_attrs(i, &["epsilon", "axis", "stash_type"])?;
    let epsilon = epsilon(g, i)?;
    g.int_in(i, "axis", -1, &[-1])?;
    g.int_in(i, "stash_type", 1, &[1])?;
    let max_inputs = if simplified { 2 } else { 3 };
    if g.node(i).input.len() > max_inputs {
        return Err(g.err(i, "unexpected extra input"));
    }
    let (weight, bias) = weights(g, i, width, 1, (!simplified).then_some(2))?;
    unused_outputs(g, i, 1, None)?;
    g.claim(i);
    let kind = if simplified {
        NormKind::Rms
    } else {
        NormKind::Layer
    };
    Ok((
        Norm {
            kind,
            weight,
            bias,
            epsilon,
        },
        g.output(i, 0),
    ))
}

/// A recognised skip norm: `normed = norm(input + skip + bias)`, `sum = input + skip + bias`.
pub(crate) struct SkipNorm<'m> {
    pub norm: Norm,
    pub normed: &'m str,
    /// The sum (output 3), when something uses it.
    pub sum: Option<&'m str>,
    /// The bias input: the preceding linear layer's bias, fused here.
    pub bias: Option<Tensor>,
}

/// The skip norm over `width` at node `i`.
pub(crate) fn skip_norm<'m>(g: &Graph<'m>, i: usize, width: usize) -> Lift<SkipNorm<'m>> {
    let simplified = g.is_op(i, MS, "SkipSimplifiedLayerNormalization");
    g.only_attrs(i, &["epsilon"])?;
    let epsilon = epsilon(g, i)?;
    let (beta_slot, bias_slot) = if simplified { (None, 3) } else { (Some(3), 4) };
    if g.node(i).input.len() > bias_slot + 1 {
        return Err(g.err(i, "unexpected extra input"));
    }
    let (weight, beta) = weights(g, i, width, 2, beta_slot)?;
    let bias = match g.input(i, bias_slot) {
        "" => None,
        b => Some(dense(g, i, "bias", b, &[width])?),
    };
    unused_outputs(g, i, 1, Some(3))?;
    let sum = Some(g.output(i, 3)).filter(|s| !s.is_empty() && !g.uses(s).is_empty());
    g.claim(i);
    let kind = if simplified {
        NormKind::Rms
    } else {
        NormKind::Layer
    };
    Ok(SkipNorm {
        norm: Norm {
            kind,
            weight,
            bias: beta,
            epsilon,
        },
        normed: g.output(i, 0),
        sum,
        bias,
    })
}
