//! Checks of the spread RMSNorm (`kernels/spread.rs`): a producer GEMV that adds its row to the
//! residual and writes the partial sums of squares, then a consumer GEMV that normalises its
//! input as it reads it, against the CPU doing the same in three steps (linear, RMSNorm with
//! the skip add, linear): the consumer's output and the residual within the limit, and both
//! bitwise equal when the chain runs again, and again with the producer's last block summing
//! the partials for the consumer (the ticket mode).

use super::epilogue::{host_epilogue, round_act};
use super::linear::{Dt, bitwise_equal, rounded, weight_bytes};
use super::{Check, Ctx, Rng, rel};
use crate::cpu::kernels::{self as cpu, DenseWeight, Weight};
use crate::cuda::kernels::{LinearShape, SpreadIn, SpreadOut};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

/// One chain: a `[n, k]` producer, then a consumer of `k2 = n` inputs and `n2` outputs (with
/// `glu`, `n2` (gate, up) pairs), activations rounded to `act` (0 f32, 1 f16, 2 bf16).
#[derive(Debug, Clone, Copy)]
pub(super) struct Spread {
    dt: Dt,
    k: usize,
    n: usize,
    n2: usize,
    glu: bool,
    act: i32,
}

/// The cases `selftest::run` checks: the bench shapes' producer → consumer pairs (o → gate/up,
/// down → qkv, down → lm_head-like), an odd width, and f16/bf16 rounding of the activations.
pub(super) fn cases() -> Vec<Spread> {
    let c = |dt, k, n, n2, glu, act| Spread {
        dt,
        k,
        n,
        n2,
        glu,
        act,
    };
    vec![
        c(Dt::F16, 896, 896, 100, true, 0),
        c(Dt::F16, 4864, 896, 1152, false, 0),
        c(Dt::F16, 14_336, 4096, 6144, false, 0),
        c(Dt::Bf16, 1536, 1536, 2048, false, 0),
        c(Dt::F32, 1001, 1000, 77, false, 0),
        c(Dt::F16, 8960, 1536, 2048, false, 1),
        c(Dt::Bf16, 999, 130, 64, true, 2),
    ]
}

/// `[n, k]` device rows from a `[k, n]` matrix.
fn rows(kn: &[f32], k: usize, n: usize) -> Vec<f32> {
    (0..n)
        .flat_map(|j| (0..k).map(move |i| kn[i * n + j]))
        .collect()
}

pub(super) fn check(c: &Ctx, rng: &mut Rng, case: Spread) -> Result<Check, Error> {
    let Spread {
        dt,
        k,
        n,
        n2,
        glu,
        act,
    } = case;
    let kernel = match dt {
        Dt::F32 => "gemv_f32",
        Dt::F16 => "gemv_f16",
        Dt::Bf16 => "gemv_bf16",
    };
    let eps = 1e-6f32;
    let x = rng.vec(k);
    let w1 = rounded(dt, &rng.vec(k * n));
    let b1 = rng.vec(n);
    let resid: Vec<f32> = rng.vec(n).iter().map(|v| 4.0 * v).collect();
    let norm_w: Vec<f32> = rng.vec(n).iter().map(|v| 1.0 + 0.5 * v).collect();
    let cols = if glu { 2 * n2 } else { n2 };
    let w2 = rounded(dt, &rng.vec(n * cols));
    // The CPU, step by step (the producer's output rounded to `act` as the decoder's linears).
    let dense = |kn: &[f32], k, n| DenseWeight::from_f32(k, n, kn).map(Weight::Dense);
    let mut y1 = vec![0f32; n];
    cpu::linear(&x, 1, &dense(&w1, k, n)?, None, &mut y1, &c.pool)?;
    let stored = host_epilogue(&y1, Some(&b1), n, act, -1);
    let sums: Vec<f32> = (0..n)
        .map(|j| resid[j] + round_act(stored[j], act))
        .collect();
    let want_resid: Vec<f32> = sums.iter().map(|&s| round_act(s, act)).collect();
    let mean_sq = sums.iter().map(|&s| s * s).sum::<f32>() / n as f32;
    let inv = 1.0 / (mean_sq + eps).sqrt();
    let normed: Vec<f32> = (0..n)
        .map(|j| round_act(sums[j] * inv * norm_w[j], act))
        .collect();
    let mut want = vec![0f32; n2];
    if glu {
        let (gate, up): (Vec<f32>, Vec<f32>) = (0..n)
            .flat_map(|i| (0..n2).map(move |j| (i, j)))
            .map(|(i, j)| (w2[i * cols + j], w2[i * cols + n2 + j]))
            .unzip();
        let (mut g, mut u) = (vec![0f32; n2], vec![0f32; n2]);
        cpu::linear(&normed, 1, &dense(&gate, n, n2)?, None, &mut g, &c.pool)?;
        cpu::linear(&normed, 1, &dense(&up, n, n2)?, None, &mut u, &c.pool)?;
        cpu::silu_mul(&g, &u, &mut want)?;
    } else {
        cpu::linear(&normed, 1, &dense(&w2, n, n2)?, None, &mut want, &c.pool)?;
        want.iter_mut().for_each(|v| *v = round_act(*v, act));
    }
    // The device: the producer's rows, the consumer's (a GLU's gate j and up j adjacent).
    let consumer_rows = if glu {
        let w2 = &w2;
        (0..n2)
            .flat_map(|j| [j, n2 + j])
            .flat_map(|cj| (0..n).map(move |i| w2[i * cols + cj]))
            .collect()
    } else {
        rows(&w2, n, n2)
    };
    let (dw1, dw2) = (
        c.up(&weight_bytes(dt, &rows(&w1, k, n), 0))?,
        c.up(&weight_bytes(dt, &consumer_rows, 0))?,
    );
    let (dx, db1, dnw) = (c.up(&x)?, c.up(&b1)?, c.up(&norm_w)?);
    let partials = DevBuf::<f32>::zeros(&c.stream, n + 1)?;
    let ticket = DevBuf::<i32>::zeros(&c.stream, 4)?;
    let producer = LinearShape {
        m: 1,
        k,
        n,
        ldx: k,
        ldy: n,
        glu: -1,
    };
    let consumer = LinearShape {
        m: 1,
        k: n,
        n: cols,
        ldx: n,
        ldy: n2,
        glu: if glu { 0 } else { -1 },
    };
    let chain = |total: bool| -> Result<(Vec<f32>, Vec<f32>), Error> {
        let (r, delta, out) = (
            c.up(&resid)?,
            DevBuf::<f32>::zeros(&c.stream, n)?,
            DevBuf::<f32>::zeros(&c.stream, n2)?,
        );
        let ops = c.ops();
        let parts = ops.spread_parts(kernel, &producer);
        let spread_out = SpreadOut {
            resid: r.ptr,
            partials: partials.ptr,
            act,
            ticket: if total { ticket.ptr } else { 0 },
        };
        ops.gemv_spread_out(
            kernel,
            dw1.ptr,
            dx.ptr,
            db1.ptr,
            delta.ptr,
            producer,
            act,
            &spread_out,
        )?;
        let spread_in = SpreadIn {
            weight: dnw.ptr,
            bias: 0,
            partials: if total {
                partials.ptr + 4 * parts as u64
            } else {
                partials.ptr
            },
            parts: if total { 1 } else { parts },
            eps,
            act,
        };
        let consumer_act = if glu { 0 } else { act };
        ops.gemv_spread_in(
            kernel,
            dw2.ptr,
            delta.ptr,
            0,
            out.ptr,
            consumer,
            consumer_act,
            &spread_in,
        )?;
        Ok((c.down(&out, n2)?, c.down(&r, n)?))
    };
    let (first, first_resid) = chain(false)?;
    let (again, again_resid) = chain(false)?;
    let (summed, summed_resid) = chain(true)?;
    let (summed_again, _) = chain(true)?;
    let same = bitwise_equal(&first, &again)
        && bitwise_equal(&first_resid, &again_resid)
        && bitwise_equal(&first, &summed)
        && bitwise_equal(&first_resid, &summed_resid)
        && bitwise_equal(&first, &summed_again);
    let diff = rel(&first, &want).max(rel(&first_resid, &want_resid));
    Ok(Check {
        name: format!(
            "spread RMSNorm {kernel} k{k} n{n} -> n{n2}{} act {act}: consumer and residual \
             against the CPU, twice and twice with the producer's total, bitwise {}",
            if glu { " SiLU GLU" } else { "" },
            if same { "equal" } else { "DIFFERENT" }
        ),
        rel_diff: if same { diff } else { f32::INFINITY },
        // f32 activations: summation order only; rounded ones may flip a normalised value by
        // one unit of the activation precision.
        limit: if act == 0 { 1e-4 } else { 1e-2 },
    })
}
