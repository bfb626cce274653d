//! Rotary position embedding: the cos/sin caches that GroupQueryAttention reads when it applies
//! rotary itself (`do_rotary=1`), and the separate com.microsoft `RotaryEmbedding` op that some
//! execution providers' graphs apply to q and k before attention instead.

use crate::context::Cx;
use crate::error::Lift;
use crate::graph::Graph;
use crate::plan::{Rotary, Tensor};
use crate::weights::dense_any;

/// The cos/sin caches (inputs of node `i`), `[max_positions, rotary_dim / 2]` each.
pub(crate) fn caches(
    g: &Graph,
    cx: &Cx,
    i: usize,
    cos: &str,
    sin: &str,
) -> Lift<(Tensor, Tensor, usize)> {
    let cos_t = dense_any(g, i, "cos_cache", cos)?;
    let sin_t = dense_any(g, i, "sin_cache", sin)?;
    if cos_t.dims.len() != 2 || cos_t.dims[0] == 0 || cos_t.dims[1] == 0 {
        return Err(g.err(
            i,
            format!(
                "cos_cache `{cos}` has shape {:?}, expected [max_positions, rotary_dim / 2]",
                cos_t.dims
            ),
        ));
    }
    if sin_t.dims != cos_t.dims || sin_t.dtype != cos_t.dtype {
        return Err(g.err(
            i,
            format!(
                "sin_cache {:?} {:?} does not match cos_cache {:?} {:?}",
                sin_t.dims, sin_t.dtype, cos_t.dims, cos_t.dtype
            ),
        ));
    }
    let rotary_dim = 2 * cos_t.dims[1];
    if rotary_dim > cx.head {
        return Err(g.err(
            i,
            format!(
                "cos_cache `{cos}` has shape {:?}: rotary dim {rotary_dim} exceeds head_size {}",
                cos_t.dims, cx.head
            ),
        ));
    }
    Ok((cos_t, sin_t, rotary_dim))
}

/// A separate `RotaryEmbedding` node, and its `num_heads` attribute (0 when not given).
pub(crate) struct RopeNode {
    pub node: usize,
    pub rotary: Rotary,
    pub num_heads: usize,
}

/// The com.microsoft `RotaryEmbedding` at node `i` (its input 0 is q or k).
pub(crate) fn rope_node(g: &Graph, cx: &Cx, i: usize) -> Lift<RopeNode> {
    g.only_attrs(
        i,
        &[
            "interleaved",
            "num_heads",
            "rotary_embedding_dim",
            "scale",
            "is_packed_batching",
        ],
    )?;
    let interleaved = g.int_in(i, "interleaved", 0, &[0, 1])? == 1;
    g.int_in(i, "is_packed_batching", 0, &[0])?;
    if g.float_attr(i, "scale")?.is_some_and(|s| s != 1.0) {
        return Err(g.err(i, "a scale other than 1 is not supported"));
    }
    if g.input(i, 1) != cx.inputs.position_ids {
        return Err(g.err(
            i,
            format!(
                "position ids `{}` are not the graph input `{}`",
                g.input(i, 1),
                cx.inputs.position_ids
            ),
        ));
    }
    if !g.is_graph_input(g.input(i, 1)) {
        return Err(g.err(i, "position ids are not a graph input"));
    }
    if g.node(i).input.len() != 4 {
        return Err(g.err(
            i,
            "expected 4 inputs (x, position_ids, cos_cache, sin_cache)",
        ));
    }
    let (cos, sin, rotary_dim) = caches(g, cx, i, g.input(i, 2), g.input(i, 3))?;
    let num_heads = g.int_attr(i, "num_heads")?.unwrap_or(0);
    let dim_attr = g.int_attr(i, "rotary_embedding_dim")?.unwrap_or(0);
    let num_heads = usize::try_from(num_heads)
        .map_err(|_| g.err(i, format!("num_heads {num_heads} is not supported")))?;
    if dim_attr == 0 && rotary_dim != cx.head {
        return Err(g.err(
            i,
            format!(
                "without rotary_embedding_dim the caches must cover the whole head: rotary dim \
                 {rotary_dim}, head_size {}",
                cx.head
            ),
        ));
    }
    if dim_attr != 0 && (usize::try_from(dim_attr).ok() != Some(rotary_dim) || num_heads == 0) {
        return Err(g.err(
            i,
            format!(
                "rotary_embedding_dim {dim_attr} with num_heads {num_heads} does not match caches \
                 of rotary dim {rotary_dim}"
            ),
        ));
    }
    g.claim(i);
    Ok(RopeNode {
        node: i,
        rotary: Rotary {
            cos,
            sin,
            rotary_dim,
            interleaved,
        },
        num_heads,
    })
}
