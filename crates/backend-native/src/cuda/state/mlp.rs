//! Whether a one-row step runs a layer's MLP as one fused launch (`kernels/mlp.rs`), and the
//! route's line that says so.

use crate::cuda::kernels::{FusedMlp, Kernels, MLP_FUSED_ENV, fused_entry};
use crate::cuda::model::{DevLayer, DevModel};

/// One line for the route's reasons: how one-row steps run the MLP.
pub(crate) fn describe_mlp(k: &Kernels, model: &DevModel) -> String {
    if !k.mlp.on {
        return format!(
            "one-row MLP: two launches ({MLP_FUSED_ENV}=1 fuses them where every weight of \
             the MLP fits in the device's shared memory at once)"
        );
    }
    let plans: Vec<FusedMlp> = model
        .layers
        .iter()
        .filter_map(|l| fused_mlp(k, l, model.hidden))
        .collect();
    let slice = plans.first().map_or(String::new(), |p| {
        format!(", {} intermediate units a block", p.slice)
    });
    format!(
        "one-row MLP: {} of {} layers as one launch ({MLP_FUSED_ENV}=1{slice}), the rest as two",
        plans.len(),
        model.layers.len()
    )
}

/// The layer's MLP as one fused launch, where it is on and suits the layer: one (gate, up)
/// weight and a down projection without a bias, both dense of one half-precision kind and in
/// device memory, and a slice that fits (`Kernels::mlp_fused_slice`).
pub(super) fn fused_mlp(k: &Kernels, l: &DevLayer, hidden: usize) -> Option<FusedMlp> {
    let mlp = &l.mlp;
    let [(gate_up, 0)] = mlp.parts.as_slice() else {
        return None;
    };
    if !mlp.glu || !mlp.gated || mlp.down.has_bias() {
        return None;
    }
    let (kind, gu, gu_bias) = gate_up.dense_resident()?;
    let (down_kind, down, _) = mlp.down.dense_resident()?;
    let inter = mlp.width;
    let shapes =
        (gate_up.k, gate_up.n, mlp.down.k, mlp.down.n) == (hidden, 2 * inter, inter, hidden);
    if kind != down_kind || !shapes {
        return None;
    }
    let slice = k.mlp_fused_slice(kind, hidden, inter)?;
    Some(FusedMlp {
        entry: fused_entry(kind)?,
        slice,
        hidden,
        inter,
        gate_up: gu,
        gate_up_bias: gu_bias,
        down,
        activation: mlp.activation,
    })
}
