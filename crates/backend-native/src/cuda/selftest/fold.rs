//! The skip-norm folded into the one-row shared-memory GEMV after it
//! (`gemv_decode_shared_norm_*`) against the two launches it replaces (`skip_norm_f32`, then
//! `gemv_decode_shared_*` on the normed row), bit for bit: the linear's output and the new
//! residual, with the residual read left untouched. Widths whose norm runs on 32 to 128
//! threads, rows that are not whole units, norm weights that cannot be copied 16 bytes at a
//! time, RMS and LayerNorm, with and without a bias and a delta, each weight type and
//! activation rounding, plain and GLU outputs, at every split whose slots fit.

use super::linear::{Dt, bitwise_equal, weight_bytes};
use super::{Check, Ctx, Rng};
use crate::cuda::kernels::{LinearShape, NormFold, OneRow, RowKernel};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

/// (k, n, weights, LayerNorm, norm bias, delta, activation rounding, glu)
type Case = (usize, usize, Dt, bool, bool, bool, i32, i32);

const CASES: [Case; 7] = [
    (896, 1152, Dt::F16, false, false, true, 1, -1), // Qwen2.5-0.5B qkv after its norm
    (896, 256, Dt::F16, false, false, true, 1, 0),   // its gate/up (GLU), smaller
    (1024, 96, Dt::Bf16, true, true, true, 2, -1),   // 128 norm threads, LayerNorm
    (64, 40, Dt::F32, false, false, false, 0, -1),   // 32 threads, no delta (the first norm)
    (100, 24, Dt::F32, true, true, true, 0, 0),      // not whole units
    (250, 18, Dt::F16, false, true, true, 1, -1),    // norm rows copied without cp.async
    (520, 66, Dt::Bf16, false, false, true, 2, 0),   // 96 threads, odd pairs
];

pub(super) fn checks(c: &Ctx, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    CASES.iter().map(|&case| check(c, rng, case)).collect()
}

fn check(c: &Ctx, rng: &mut Rng, case: Case) -> Result<Check, Error> {
    let (k, n, dt, layer, has_bias, has_delta, act, glu) = case;
    let kind = match dt {
        Dt::F32 => "gemv_f32",
        Dt::F16 => "gemv_f16",
        Dt::Bf16 => "gemv_bf16",
    };
    let x = rng.vec(k);
    let delta = c.up(&rng.vec(k))?;
    let weight = c.up(&rng.vec(k).iter().map(|v| 1.0 + v / 4.0).collect::<Vec<_>>())?;
    let bias = c.up(&rng.vec(k))?;
    let lin_bias = c.up(&rng.vec(n))?;
    let w = c.up(&weight_bytes(dt, &rng.vec(n * k), 0))?;
    let (delta_ptr, bias_ptr) = (
        if has_delta { delta.ptr } else { 0 },
        if has_bias { bias.ptr } else { 0 },
    );
    let lin_bias_ptr = if glu >= 0 { 0 } else { lin_bias.ptr };
    let outs = if glu >= 0 { n / 2 } else { n };
    let s = LinearShape {
        m: 1,
        k,
        n,
        ldx: k,
        ldy: outs,
        glu,
    };
    let (eps, rms) = (1e-6f32, !layer);
    let mut equal = true;
    let mut ran = 0;
    for split in [1, 2, 4] {
        let plan = OneRow {
            via: RowKernel::Shared,
            split,
        };
        if !c.ops().one_row_fits(kind, &s, plan) {
            continue;
        }
        // The two launches: the norm in place on a copy of x, then the GEMV on the normed row.
        let (x_two, normed) = (c.up(&x)?, DevBuf::<f32>::zeros(&c.stream, k)?);
        let y_two = DevBuf::<f32>::zeros(&c.stream, outs)?;
        let rows = (1, k, 1, k);
        c.ops().skip_norm(
            x_two.ptr, delta_ptr, weight.ptr, bias_ptr, normed.ptr, rows, eps, rms, true, act,
        )?;
        c.ops().gemv_one_row(
            kind,
            w.ptr,
            normed.ptr,
            lin_bias_ptr,
            y_two.ptr,
            s,
            act,
            plan,
        )?;
        // The fold: x read, the new residual written elsewhere.
        let (x_in, x_out) = (c.up(&x)?, DevBuf::<f32>::zeros(&c.stream, k)?);
        let y_fold = DevBuf::<f32>::zeros(&c.stream, outs)?;
        let fold = NormFold {
            x: x_in.ptr,
            delta: delta_ptr,
            weight: weight.ptr,
            bias: bias_ptr,
            x_out: x_out.ptr,
            eps,
            rms,
            act,
        };
        c.ops()
            .gemv_norm_one_row(kind, w.ptr, &fold, lin_bias_ptr, y_fold.ptr, s, act, plan)?;
        equal &= bitwise_equal(&c.down(&y_two, outs)?, &c.down(&y_fold, outs)?);
        equal &= bitwise_equal(&c.down(&x_two, k)?, &c.down(&x_out, k)?);
        equal &= bitwise_equal(&x, &c.down(&x_in, k)?);
        ran += 1;
    }
    Ok(Check {
        name: format!(
            "norm folded into {kind} k{k} n{n}{}{}{}{} act {act}: {ran} splits, output and \
             residual bitwise {}",
            if layer { " LayerNorm" } else { " RMSNorm" },
            if has_bias { " +bias" } else { "" },
            if has_delta { " +delta" } else { "" },
            if glu >= 0 { " GLU" } else { "" },
            if equal { "equal" } else { "DIFFERENT" }
        ),
        rel_diff: if equal && ran > 0 { 0.0 } else { f32::INFINITY },
        limit: 0.0,
    })
}
