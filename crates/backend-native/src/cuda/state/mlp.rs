//! Whether a one-row step runs a layer's MLP as one fused launch (`kernels/mlp.rs`), and the
//! route's line that says so.

use crate::cuda::kernels::{
    FusedMlp, Kernels, MLP_FUSED_ENV, MlpForm, WALK_SPAN, fused_entry, walk_shape_fits,
};
use crate::cuda::model::{DevLayer, DevModel};

/// One line for the route's reasons: how one-row steps run the MLP.
pub(crate) fn describe_mlp(k: &Kernels, model: &DevModel) -> String {
    let form = k.mlp.form;
    if form == MlpForm::Two {
        let why = off_reason(k.mlp.unknown.as_deref(), k.mlp.asked);
        return format!(
            "one-row MLP: two launches ({MLP_FUSED_ENV}=1 fuses them where every weight of \
             the MLP fits in the device's shared memory at once, {MLP_FUSED_ENV}=walk in \
             clusters of blocks on sm_90){why}"
        );
    }
    let plans: Vec<FusedMlp> = model
        .layers
        .iter()
        .filter_map(|l| fused_mlp(k, l, model.hidden))
        .collect();
    let (value, unit) = match form {
        MlpForm::Walk => ("walk", "a cluster"),
        _ => ("1", "a block"),
    };
    let slice = plans.first().map_or(String::new(), |p| {
        format!(", {} intermediate units {unit}", p.slice)
    });
    format!(
        "one-row MLP: {} of {} layers as one launch ({MLP_FUSED_ENV}={value}{slice}), the rest \
         as two",
        plans.len(),
        model.layers.len()
    )
}

/// Why the two launches run where the switch asked for a fused form ("" where it did not).
fn off_reason(unknown: Option<&str>, asked: MlpForm) -> String {
    match (unknown, asked) {
        (Some(v), _) => format!("; {MLP_FUSED_ENV}={v} names no form (1, wave, walk): ignored"),
        (None, MlpForm::Walk) => format!(
            "; {MLP_FUSED_ENV}=walk needs thread block clusters (sm_90), which this device \
             cannot launch"
        ),
        (None, MlpForm::Wave) => format!(
            "; {MLP_FUSED_ENV}=1 needs the one-wave entries opted into large shared memory, \
             which this device refused"
        ),
        (None, MlpForm::Two) => String::new(),
    }
}

/// The layer's MLP as one fused launch, where a form is on and suits the layer: one (gate, up)
/// weight and a down projection without a bias, both dense of one half-precision kind and in
/// device memory; for the one-wave form a slice that fits (`Kernels::mlp_fused_slice`).
pub(super) fn fused_mlp(k: &Kernels, l: &DevLayer, hidden: usize) -> Option<FusedMlp> {
    // Every one-row step asks, layer by layer: answer at once where no form is on.
    let form = k.mlp.form;
    if form == MlpForm::Two {
        return None;
    }
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
    let slice = match form {
        MlpForm::Walk => walk_shape_fits(hidden, inter).then_some(WALK_SPAN)?,
        _ => k.mlp_fused_slice(kind, hidden, inter)?,
    };
    Some(FusedMlp {
        form,
        entry: fused_entry(kind, form)?,
        slice,
        hidden,
        inter,
        gate_up: gu,
        gate_up_bias: gu_bias,
        down,
        activation: mlp.activation,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_says_why_an_asked_form_does_not_run() {
        assert_eq!(off_reason(None, MlpForm::Two), "");
        let typo = off_reason(Some("Walk"), MlpForm::Two);
        assert!(typo.contains("=Walk names no form"), "{typo}");
        assert!(off_reason(None, MlpForm::Walk).contains("needs thread block clusters"));
        assert!(off_reason(None, MlpForm::Wave).contains("large shared memory"));
    }
}
