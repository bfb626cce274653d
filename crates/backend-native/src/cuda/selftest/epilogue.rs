//! The linear kernels' epilogue on the host — bias, activation rounding, GLU pairs — and the
//! difference it allows between device and CPU results, for the GEMV and GEMM checks.

use crate::cpu::kernels as cpu;

/// The largest |v| (at least 1e-30, a safe divisor).
pub(super) fn max_abs(v: &[f32]) -> f32 {
    v.iter().fold(1e-30f32, |m, x| m.max(x.abs()))
}

/// Largest relative rounding step (one ulp) of the activation precision.
fn act_ulp(act: i32) -> f32 {
    match act {
        1 => (-10f32).exp2(),
        2 => (-7f32).exp2(),
        _ => 0.0,
    }
}

/// `v` rounded to the activation precision (0 f32, 1 f16, 2 bf16).
pub(super) fn round_act(v: f32, act: i32) -> f32 {
    match act {
        1 => half::f16::from_f32(v).to_f32(),
        2 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// The GEMV epilogue on the host (`linear_store`, or the GLU pairs through the CPU kernels).
pub(super) fn host_epilogue(
    sums: &[f32],
    bias: Option<&[f32]>,
    n: usize,
    act: i32,
    glu: i32,
) -> Vec<f32> {
    let b = |j: usize| bias.map_or(0.0, |b| b[j]);
    if glu < 0 {
        let store = |(i, &v): (usize, &f32)| match (act, bias) {
            (0, None) => v,
            (0, Some(_)) => v + b(i % n),
            (_, None) => round_act(v, act),
            (_, Some(_)) => round_act(round_act(v, act) + b(i % n), act),
        };
        return sums.iter().enumerate().map(store).collect();
    }
    let pairs = n / 2;
    let mut gate: Vec<f32> = (0..sums.len() / 2)
        .map(|i| sums[2 * i] + b(2 * (i % pairs)))
        .collect();
    match glu {
        0 => cpu::silu(&mut gate),
        1 => cpu::gelu(&mut gate),
        _ => cpu::gelu_tanh(&mut gate),
    }
    gate.iter()
        .enumerate()
        .map(|(i, g)| g * (sums[2 * i + 1] + b(2 * (i % pairs) + 1)))
        .collect()
}

/// Relative limit for outputs `want` (through [`host_epilogue`]) whose sums `exact` the device
/// matches within `tol` relative. The sums differ by d <= tol * R (R = max |sums|). Rounding a
/// value moves it by less than one ulp of its precision, so two roundings add at most
/// ulp * (R + W) (W = max |y|). GLU: act(g) * u with g and u off by d and below G = R + 1
/// (bias) moves by at most (max |act'| <= 1.13 plus 1) * d * G, plus the activation
/// functions' own ulps (1e-6).
pub(super) fn epilogue_limit(tol: f32, exact: &[f32], want: &[f32], act: i32, glu: i32) -> f32 {
    let (r, wm) = (max_abs(exact), max_abs(want));
    if glu >= 0 {
        2.2 * tol * r * (r + 1.0) / wm + 1e-6
    } else {
        (tol * r + act_ulp(act) * (r + wm)) / wm
    }
}
