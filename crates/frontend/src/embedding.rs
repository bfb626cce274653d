//! The token embedding: `Gather` from a stored table, from a tied lm_head weight through a
//! `Transpose`, or com.microsoft `GatherBlockQuantized` from a tied 4-bit lm_head weight (with a
//! `Slice` dropping block padding), optionally scaled by a constant `Mul`.

use crate::context::Cx;
use crate::error::{Lift, Unsupported};
use crate::graph::{Graph, MS, Use};
use crate::plan::{Embedding, Table};
use crate::weights::{dense, int4_parts};

/// A lifted token embedding and the value holding the embedded tokens.
pub(crate) struct EmbedOut<'m> {
    pub embedding: Embedding,
    pub out: &'m str,
    /// The node producing `out`.
    pub last: usize,
}

/// The one node reading graph input `ids`, and the input slot.
pub(crate) fn ids_use(g: &Graph, ids: &str) -> Lift<(usize, usize)> {
    let uses = g.uses(ids);
    match uses[..] {
        [Use::Node { node, slot }] => Ok((node, slot)),
        [] => Err(Unsupported::graph(ids, "graph input", "token ids are not used by any node")),
        [_, Use::Node { node, .. }, ..] => Err(g.err(
            node,
            format!("unexpected extra consumer of `{ids}`; the plan expects only the embedding lookup to read it"),
        )),
        _ => Err(Unsupported::graph(ids, "graph input", "token ids are also a graph output")),
    }
}

/// The token embedding reading graph input `ids`.
pub(crate) fn token_embedding<'m>(g: &Graph<'m>, cx: &Cx, ids: &str) -> Lift<EmbedOut<'m>> {
    let (n, slot) = ids_use(g, ids)?;
    let (tokens, out, last) = if g.is_op(n, "", "Gather") && slot == 1 {
        gather(g, cx, n)?
    } else if g.is_op(n, MS, "GatherBlockQuantized") && slot == 1 {
        gather_block_quantized(g, cx, n)?
    } else {
        return Err(g.err(
            n,
            format!(
                "{} reads the token ids where the plan expects the embedding lookup (Gather or \
                 GatherBlockQuantized)",
                g.node(n).op_type
            ),
        ));
    };
    let (scale, out, last) = scale(g, out, last)?;
    Ok(EmbedOut {
        embedding: Embedding {
            tokens,
            positions: None,
            scale,
        },
        out,
        last,
    })
}

/// `Gather(table, ids)` on axis 0, the table stored `[vocab, hidden]` or `[hidden, vocab]` under
/// a `Transpose`.
fn gather<'m>(g: &Graph<'m>, cx: &Cx, n: usize) -> Lift<(Table, &'m str, usize)> {
    g.only_attrs(n, &["axis"])?;
    g.int_in(n, "axis", 0, &[0])?;
    if g.node(n).input.len() != 2 {
        return Err(g.err(n, "expected 2 inputs"));
    }
    let data = g.input(n, 0);
    let table = match g.producer(data) {
        Some((t, _)) if g.is_op(t, "", "Transpose") => {
            g.only_attrs(t, &["perm"])?;
            if g.ints_attr(t, "perm")?.as_deref() != Some(&[1, 0]) {
                return Err(g.err(t, "only perm [1, 0] is supported for a transposed table"));
            }
            let stored = dense(
                g,
                t,
                "embedding table",
                g.input(t, 0),
                &[cx.hidden, cx.vocab],
            )?;
            g.only_uses(
                data,
                t,
                &[Use::Node { node: n, slot: 0 }],
                "the embedding Gather",
            )?;
            g.claim(t);
            Table::Transposed(stored)
        }
        _ => Table::Dense(dense(
            g,
            n,
            "embedding table",
            data,
            &[cx.vocab, cx.hidden],
        )?),
    };
    g.claim(n);
    Ok((table, g.output(n, 0), n))
}

/// `GatherBlockQuantized(Reshape(packed, [vocab, blocks * block / 2]), ids, scales[, zp])`, with
/// a `Slice` to `hidden` when the blocks pad the rows.
fn gather_block_quantized<'m>(g: &Graph<'m>, cx: &Cx, n: usize) -> Lift<(Table, &'m str, usize)> {
    g.only_attrs(n, &["bits", "block_size", "gather_axis", "quantize_axis"])?;
    let bits = g.req_int(n, "bits")?;
    if bits != 4 {
        return Err(g.err(n, format!("bits {bits} is not supported (only 4)")));
    }
    g.int_in(n, "gather_axis", 0, &[0])?;
    g.int_in(n, "quantize_axis", 1, &[1, -1])?;
    let block = g.req_int(n, "block_size")?;
    let bs = usize::try_from(block).unwrap_or(0);
    if bs < 16 || !bs.is_power_of_two() {
        return Err(g.err(n, format!("block_size {block} is not supported")));
    }
    if g.node(n).input.len() > 4 {
        return Err(g.err(n, "unexpected extra input"));
    }
    let blocks = cx.hidden.div_ceil(bs);
    let data = g.input(n, 0);
    let reshape = match g.producer(data) {
        Some((r, _)) if g.is_op(r, "", "Reshape") => r,
        _ => {
            return Err(g.err(
                n,
                "data is not a Reshape of a packed [rows, blocks, block_size / 2] weight",
            ));
        }
    };
    g.only_attrs(reshape, &["allowzero"])?;
    g.int_in(reshape, "allowzero", 0, &[0])?;
    let flat = [cx.vocab as i64, (blocks * bs / 2) as i64];
    if g.const_i64s(g.input(reshape, 1)).as_deref() != Some(&flat[..]) {
        return Err(g.err(reshape, format!("Reshape target is not {flat:?}")));
    }
    g.only_uses(
        data,
        reshape,
        &[Use::Node { node: n, slot: 0 }],
        "the GatherBlockQuantized",
    )?;
    let weight = int4_parts(
        g,
        n,
        g.input(reshape, 0),
        (2, 3),
        cx.hidden,
        cx.vocab,
        bs,
        0,
    )?;
    g.claim(reshape);
    g.claim(n);
    let out = g.output(n, 0);
    if blocks * bs == cx.hidden {
        return Ok((Table::Int4(weight), out, n));
    }
    let want = "a Slice dropping the block padding";
    let (slice, _) = g.one_use(out, n, want, |s, slot| slot == 0 && g.is_op(s, "", "Slice"))?;
    g.only_attrs(slice, &[])?;
    let hidden = cx.hidden as i64;
    let c = |slot: usize| g.const_i64s(g.input(slice, slot));
    let axes_ok = matches!(c(3).as_deref(), Some([-1]) | Some([2]));
    let steps_ok = g.input(slice, 4).is_empty() || c(4).as_deref() == Some(&[1]);
    if c(1).as_deref() != Some(&[0]) || c(2).as_deref() != Some(&[hidden]) || !axes_ok || !steps_ok
    {
        return Err(g.err(
            slice,
            format!("does not keep columns [0, {hidden}) of the last axis"),
        ));
    }
    g.claim(slice);
    Ok((Table::Int4(weight), g.output(slice, 0), slice))
}

/// A `Mul` by a constant scalar right after the lookup.
fn scale<'m>(g: &Graph<'m>, out: &'m str, last: usize) -> Lift<(Option<f32>, &'m str, usize)> {
    let uses = g.uses(out);
    let [Use::Node { node: mul, slot }] = uses[..] else {
        return Ok((None, out, last));
    };
    if !g.is_op(mul, "", "Mul") || g.node(mul).input.len() != 2 {
        return Ok((None, out, last));
    }
    let Some(&[s]) = g.const_f32s(g.input(mul, 1 - slot)).as_deref() else {
        return Ok((None, out, last));
    };
    if !s.is_finite() {
        return Err(g.err(mul, format!("embedding scale {s} is not supported")));
    }
    g.claim(mul);
    Ok((Some(s), g.output(mul, 0), mul))
}
