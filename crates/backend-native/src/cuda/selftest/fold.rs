//! Checks of the skip-norm folded into the one-row GEMV (`kernels/fold.rs`): for each case, the
//! folded launch and the two launches it replaces (`gemv_decode_*` or `gemv_decode_pipe_*`,
//! then `skip_norm_f32` with `write_sum`) must leave the same bits in the GEMV's output, the
//! residual and the normalised row, at every split, and a second folded launch (the ticket
//! reset by the first) must give the same bits again.

use super::linear::{Dt, weight_bytes};
use super::{Check, Ctx, Rng};
use crate::cuda::kernels::{DevPtr, LinearShape, NormFold, OneRow};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

/// One case: a `[n, k]` layer of `dt` weights feeding a norm of width `n`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fold {
    dt: Dt,
    k: usize,
    n: usize,
    /// RMSNorm, else LayerNorm.
    rms: bool,
    /// Biases on the linear and on the norm.
    bias: bool,
    /// The activations' precision the norm rounds to (0 f32, 1 f16, 2 bf16).
    act: i32,
}

/// The cases `selftest::run` checks: the model widths (896, 1536, 4096), rows of odd widths
/// (one warp short of full, a single value past a warp, fewer than one warp), the down
/// projections' long rows, LayerNorm with biases and every activation precision.
pub(super) fn cases() -> Vec<Fold> {
    let f = |dt, k, n, rms, bias, act| Fold {
        dt,
        k,
        n,
        rms,
        bias,
        act,
    };
    vec![
        f(Dt::F16, 896, 896, true, false, 1),
        f(Dt::F16, 4864, 896, true, false, 1),
        f(Dt::F16, 1536, 1536, true, false, 1),
        f(Dt::F16, 8960, 1536, true, true, 0),
        f(Dt::F16, 4096, 4096, true, false, 1),
        f(Dt::F16, 14336, 4096, true, false, 1),
        f(Dt::Bf16, 1536, 1536, true, false, 2),
        f(Dt::Bf16, 999, 2049, false, true, 2),
        f(Dt::F32, 1001, 1000, false, true, 0),
        f(Dt::F32, 64, 13, true, true, 0),
        f(Dt::F16, 257, 3, false, false, 1),
        f(Dt::F16, 1536, 4095, false, true, 1),
    ]
}

pub(super) fn check(c: &Ctx, rng: &mut Rng, case: Fold) -> Result<Check, Error> {
    let Fold {
        dt,
        k,
        n,
        rms,
        bias,
        act,
    } = case;
    let kernel = match dt {
        Dt::F32 => "gemv_f32",
        Dt::F16 => "gemv_f16",
        Dt::Bf16 => "gemv_bf16",
    };
    let w = c.up(&weight_bytes(dt, &rng.vec(n * k), 0))?;
    let x = c.up(&rng.vec(k))?;
    // A residual stream of larger values than the delta, as in a model.
    let resid: Vec<f32> = rng.vec(n).iter().map(|v| 4.0 * v).collect();
    let norm_w: Vec<f32> = rng.vec(n).iter().map(|v| 1.0 + 0.5 * v).collect();
    let (norm_w, lin_b, norm_b) = (c.up(&norm_w)?, c.up(&rng.vec(n))?, c.up(&rng.vec(n))?);
    let (lin_b, norm_b) = if bias {
        (lin_b.ptr, norm_b.ptr)
    } else {
        (0, 0)
    };
    let ticket = DevBuf::<i32>::zeros(&c.stream, 4)?;
    let s = LinearShape {
        m: 1,
        k,
        n,
        ldx: k,
        ldy: n,
        glu: -1,
    };
    // One pass: (y, residual, normed) after the two launches or the folded one.
    let pass = |plan: OneRow, folded: bool| -> Result<Vec<f32>, Error> {
        let (y, r, out) = (
            DevBuf::<f32>::zeros(&c.stream, n)?,
            c.up(&resid)?,
            DevBuf::<f32>::zeros(&c.stream, n)?,
        );
        let fold = NormFold {
            resid: r.ptr,
            weight: norm_w.ptr,
            bias: norm_b,
            out: out.ptr,
            eps: 1e-5,
            rms,
            act,
            ticket: ticket.ptr,
        };
        let ops = c.ops();
        if folded {
            ops.gemv_one_row_fold(kernel, w.ptr, x.ptr, lin_b, y.ptr, s, act, plan, &fold)?;
        } else {
            ops.gemv_one_row(kernel, w.ptr, x.ptr, lin_b, y.ptr, s, act, plan)?;
            two_launch_norm(c, &fold, y.ptr, n)?;
        }
        let mut all = c.down(&y, n)?;
        all.extend(c.down(&r, n)?);
        all.extend(c.down(&out, n)?);
        Ok(all)
    };
    let mut equal = true;
    for pipe in [false, true] {
        for split in [1, 2, 4] {
            let plan = OneRow { pipe, split };
            let want = pass(plan, false)?;
            let (first, again) = (pass(plan, true)?, pass(plan, true)?);
            equal &= super::linear::bitwise_equal(&first, &want)
                && super::linear::bitwise_equal(&again, &want);
        }
    }
    let mut ticket_left = [0i32; 1];
    ticket.read(&c.stream, &mut ticket_left)?;
    let reset = ticket_left[0] == 0;
    Ok(Check {
        name: format!(
            "norm fold {kernel} k{k} n{n} {} bias {bias} act {act}: walk and pipe at splits \
             1, 2, 4 against the GEMV then skip_norm, twice, bitwise {}{}",
            if rms { "RMSNorm" } else { "LayerNorm" },
            if equal { "equal" } else { "DIFFERENT" },
            if reset { "" } else { ", ticket NOT reset" }
        ),
        rel_diff: if equal && reset { 0.0 } else { f32::INFINITY },
        limit: 0.0,
    })
}

/// `skip_norm_f32` over the one row `delta` as the fold describes it.
fn two_launch_norm(c: &Ctx, f: &NormFold, delta: DevPtr, n: usize) -> Result<(), Error> {
    c.ops().skip_norm(
        f.resid,
        delta,
        f.weight,
        f.bias,
        f.out,
        (1, n, 1, n),
        f.eps,
        f.rms,
        true,
        f.act,
    )
}
