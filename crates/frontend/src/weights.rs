//! Weights: dense float initializers checked against expected shapes, and linear layers
//! (`MatMul` on a dense weight, directly or through a `Transpose`, or com.microsoft `MatMulNBits`
//! with 4 bits), with a following bias `Add` folded in.

use genai_onnx::DataType;

use crate::error::Lift;
use crate::graph::{Graph, MS, Use};
use crate::plan::{Int4Weight, Linear, Tensor, Weight, WeightDType};

/// The plan's element type for a stored float tensor.
pub(crate) fn weight_dtype(dtype: DataType) -> Option<WeightDType> {
    match dtype {
        DataType::Float => Some(WeightDType::F32),
        DataType::Float16 => Some(WeightDType::F16),
        DataType::BFloat16 => Some(WeightDType::BF16),
        _ => None,
    }
}

/// Shape as usizes (negative dims never pass the loader, but are rejected here too).
fn dims_of(dims: &[i64]) -> Vec<usize> {
    dims.iter()
        .map(|&d| usize::try_from(d).unwrap_or(usize::MAX))
        .collect()
}

/// The initializer `name` feeding node `node` as `what`, with its dtype and shape.
fn initializer<'g>(
    g: &Graph<'g>,
    node: usize,
    what: &str,
    name: &str,
) -> Lift<(DataType, Vec<usize>)> {
    if name.is_empty() {
        return Err(g.err(node, format!("{what} input missing")));
    }
    match g.model.initializer(name) {
        Some(t) => Ok((t.dtype, dims_of(t.dims))),
        None => Err(g.err(
            node,
            format!("{what} `{name}` is not a stored weight (computed weights are not supported)"),
        )),
    }
}

/// A float weight `name` (input `what` of node `node`) whose shape must be `dims`.
pub(crate) fn dense(
    g: &Graph,
    node: usize,
    what: &str,
    name: &str,
    dims: &[usize],
) -> Lift<Tensor> {
    let t = dense_any(g, node, what, name)?;
    if t.dims != dims {
        return Err(g.err(
            node,
            format!("{what} `{name}` has shape {:?}, expected {dims:?}", t.dims),
        ));
    }
    Ok(t)
}

/// A float weight of any shape.
pub(crate) fn dense_any(g: &Graph, node: usize, what: &str, name: &str) -> Lift<Tensor> {
    let (dtype, dims) = initializer(g, node, what, name)?;
    let Some(dtype) = weight_dtype(dtype) else {
        return Err(g.err(
            node,
            format!(
                "{what} `{name}` is {}, expected float, float16 or bfloat16",
                dtype.name()
            ),
        ));
    };
    Ok(Tensor {
        name: name.to_string(),
        dtype,
        dims,
    })
}

/// A uint8 weight whose shape must be one of `shapes`.
fn packed(g: &Graph, node: usize, what: &str, name: &str, shapes: &[Vec<usize>]) -> Lift<()> {
    let (dtype, dims) = initializer(g, node, what, name)?;
    if dtype != DataType::Uint8 {
        return Err(g.err(
            node,
            format!("{what} `{name}` is {}, expected uint8", dtype.name()),
        ));
    }
    if !shapes.contains(&dims) {
        return Err(g.err(
            node,
            format!(
                "{what} `{name}` has shape {dims:?}, expected {:?}",
                shapes[0]
            ),
        ));
    }
    Ok(())
}

/// Whether node `i` takes an activation at `slot` as a linear layer can.
pub(crate) fn is_linear(g: &Graph, i: usize, slot: usize) -> bool {
    slot == 0 && (g.is_op(i, "", "MatMul") || g.is_op(i, MS, "MatMulNBits"))
}

/// A recognised linear layer and the value holding its result (after any bias `Add`).
pub(crate) struct LinearOut<'m> {
    pub linear: Linear,
    pub out: &'m str,
    /// The node producing `out` (the matmul, or the bias `Add`).
    pub last: usize,
}

/// The linear layer at node `i` (see [`is_linear`]), whose input width must be `k` and, when
/// given, output width `n`.
pub(crate) fn linear<'m>(
    g: &Graph<'m>,
    i: usize,
    k: usize,
    n: Option<usize>,
) -> Lift<LinearOut<'m>> {
    let (weight, n_found, bias) = if g.is_op(i, MS, "MatMulNBits") {
        matmul_nbits(g, i, k)?
    } else {
        (matmul_weight(g, i, k)?, 0, None)
    };
    let n_found = match &weight {
        Weight::Dense { tensor, transposed } => {
            let d = &tensor.dims;
            if *transposed { d[0] } else { d[1] }
        }
        Weight::Int4(_) => n_found,
    };
    if let Some(n) = n.filter(|&n| n != n_found) {
        return Err(g.err(i, format!("output width {n_found}, expected {n}")));
    }
    g.claim(i);
    let mut out = LinearOut {
        linear: Linear {
            weight,
            bias,
            k,
            n: n_found,
        },
        out: g.output(i, 0),
        last: i,
    };
    fold_bias(g, &mut out)?;
    Ok(out)
}

/// A `MatMul`'s B: a `[k, n]` weight, or a `[n, k]` one through `Transpose(perm=[1, 0])`.
fn matmul_weight(g: &Graph, i: usize, k: usize) -> Lift<Weight> {
    g.only_attrs(i, &[])?;
    let b = g.input(i, 1);
    if g.node(i).input.len() != 2 {
        return Err(g.err(i, "expected 2 inputs"));
    }
    if let Some((t, _)) = g.producer(b).filter(|&(t, _)| g.is_op(t, "", "Transpose")) {
        g.only_attrs(t, &["perm"])?;
        if g.ints_attr(t, "perm")?.as_deref() != Some(&[1, 0]) {
            return Err(g.err(t, "only perm [1, 0] is supported for a transposed weight"));
        }
        let tensor = dense_any(g, t, "transposed weight", g.input(t, 0))?;
        if tensor.dims.len() != 2 || tensor.dims[1] != k {
            return Err(g.err(
                t,
                format!("weight {:?} does not give a [{k}, n] matrix", tensor.dims),
            ));
        }
        g.only_uses(b, t, &[Use::Node { node: i, slot: 1 }], "the MatMul")?;
        g.claim(t);
        return Ok(Weight::Dense {
            tensor,
            transposed: true,
        });
    }
    let tensor = dense_any(g, i, "weight", b)?;
    if tensor.dims.len() != 2 || tensor.dims[0] != k {
        return Err(g.err(
            i,
            format!(
                "weight `{b}` has shape {:?}, expected [{k}, n]",
                tensor.dims
            ),
        ));
    }
    Ok(Weight::Dense {
        tensor,
        transposed: false,
    })
}

/// com.microsoft MatMulNBits with 4 bits: (weight, N, bias input).
fn matmul_nbits(g: &Graph, i: usize, k: usize) -> Lift<(Weight, usize, Option<Tensor>)> {
    g.only_attrs(i, &["K", "N", "bits", "block_size", "accuracy_level"])?;
    let bits = g.req_int(i, "bits")?;
    if bits != 4 {
        return Err(g.err(i, format!("bits {bits} is not supported (only 4)")));
    }
    let k_attr = g.req_int(i, "K")?;
    if usize::try_from(k_attr).ok() != Some(k) {
        return Err(g.err(i, format!("K {k_attr} does not match the input width {k}")));
    }
    let n_attr = g.req_int(i, "N")?;
    let block = g.req_int(i, "block_size")?;
    let accuracy_level = g.int_attr(i, "accuracy_level")?.unwrap_or(0);
    if !(0..=4).contains(&accuracy_level) {
        return Err(g.err(
            i,
            format!("accuracy_level {accuracy_level} is not supported"),
        ));
    }
    let (Ok(n), Ok(bs)) = (usize::try_from(n_attr), usize::try_from(block)) else {
        return Err(g.err(i, format!("N {n_attr} / block_size {block} out of range")));
    };
    if n == 0 || bs < 16 || !bs.is_power_of_two() {
        return Err(g.err(i, format!("N {n} / block_size {bs} is not supported")));
    }
    let int4 = int4_parts(g, i, g.input(i, 1), (2, 3), k, n, bs, accuracy_level)?;
    let inputs = &g.node(i).input;
    if !g.input(i, 4).is_empty() {
        return Err(g.err(i, "g_idx (act-order) input is not supported"));
    }
    let bias = match g.input(i, 5) {
        "" => None,
        b => Some(dense(g, i, "bias", b, &[n])?),
    };
    if inputs.len() > 6 {
        return Err(g.err(i, "too many inputs"));
    }
    Ok((Weight::Int4(int4), n, bias))
}

/// The 4-bit weight read by node `i`: packed data `packed_name` (`[n, blocks, block/2]` uint8;
/// the node may read it through a `Reshape`), scales and optional uint8 zero points at input
/// `slots.0` / `slots.1`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn int4_parts(
    g: &Graph,
    i: usize,
    packed_name: &str,
    slots: (usize, usize),
    k: usize,
    n: usize,
    bs: usize,
    accuracy_level: i64,
) -> Lift<Int4Weight> {
    let blocks = k.div_ceil(bs);
    packed(
        g,
        i,
        "packed weight",
        packed_name,
        &[vec![n, blocks, bs / 2]],
    )?;
    let scales_name = g.input(i, slots.0);
    let scales = dense_any(g, i, "scales", scales_name)?;
    if scales.dims != [n, blocks] && scales.dims != [n.saturating_mul(blocks)] {
        return Err(g.err(
            i,
            format!(
                "scales `{scales_name}` has shape {:?}, expected [{n}, {blocks}]",
                scales.dims
            ),
        ));
    }
    let zero_points = match g.input(i, slots.1) {
        "" => None,
        zp => {
            if g.model
                .initializer(zp)
                .is_some_and(|t| weight_dtype(t.dtype).is_some())
            {
                return Err(g.err(i, "float zero points are not supported (only packed uint8)"));
            }
            let half = blocks.div_ceil(2);
            packed(
                g,
                i,
                "zero points",
                zp,
                &[vec![n, half], vec![n.saturating_mul(half)]],
            )?;
            Some(zp.to_string())
        }
    };
    Ok(Int4Weight {
        packed: packed_name.to_string(),
        scales,
        zero_points,
        k,
        n,
        block_size: bs,
        accuracy_level,
    })
}

/// Folds `Add(out, bias)` into the linear when `out`'s only use is such an Add with a stored
/// `[n]` bias.
fn fold_bias<'m>(g: &Graph<'m>, lin: &mut LinearOut<'m>) -> Lift<()> {
    let uses = g.uses(lin.out);
    let [Use::Node { node: add, slot }] = uses[..] else {
        return Ok(());
    };
    if !g.is_op(add, "", "Add") || g.node(add).input.len() != 2 {
        return Ok(());
    }
    let bias_name = g.input(add, 1 - slot);
    let n = lin.linear.n;
    let is_bias = g.model.initializer(bias_name).is_some_and(|t| {
        weight_dtype(t.dtype).is_some() && t.dims.len() == 1 && t.dims[0] == n as i64
    });
    if !is_bias {
        return Ok(());
    }
    if lin.linear.bias.is_some() {
        return Err(g.err(
            add,
            "a second bias after a linear layer that already has one",
        ));
    }
    lin.linear.bias = Some(dense(g, add, "bias", bias_name, &[n])?);
    g.claim(add);
    lin.out = g.output(add, 0);
    lin.last = add;
    Ok(())
}
