//! Checks of the fused one-row MLP (`mlp_fused_*`, kernels/mlp_fused.cu) and the norm that
//! reads its sums (`skip_norm_fixed_f32`): the down projection's sums against the host's f64
//! MLP over the same half-precision weights; the same sums bit for bit on a second launch (the
//! fixed-point adds do not depend on the blocks' order); the fixed norm bit for bit against the
//! plain norm given those sums as f32, and every sum word cleared behind it. Shapes: the
//! Qwen2.5-0.5B MLP at its one-wave slice, a last block with fewer units than the slice, the
//! widest hidden row (2,048), a row narrower than a warp's pieces, each activation and the
//! gate/up bias.

use super::halves::host_half;
use super::linear::bitwise_equal;
use super::{Check, Ctx, Rng};
use crate::cuda::blas::GemmType;
use crate::cuda::kernels::{ACC_WORDS, FusedMlp, fused_entry};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

/// One case: weights' type, hidden, intermediate units, the slice a block takes, the GLU's
/// activation and whether gate/up has a bias.
type Case = (GemmType, usize, usize, usize, i32, bool);

const CASES: [Case; 4] = [
    (GemmType::F16, 896, 4864, 40, 0, false),
    (GemmType::Bf16, 256, 200, 24, 1, true),
    (GemmType::F16, 2048, 64, 8, 2, true),
    (GemmType::Bf16, 64, 8, 8, 0, false),
];

/// The host's activation in f64 (0 SiLU, 1 GELU, 2 GELU tanh), as kernels/prelude.cuh's.
fn activation(x: f64, kind: i32) -> f64 {
    match kind {
        0 => x / (1.0 + (-x).exp()),
        1 => 0.5 * x * (1.0 + erf(x / std::f64::consts::SQRT_2)),
        _ => {
            let inner = 0.797_884_560_802_865_4 * (x + 0.044715 * x * x * x);
            0.5 * x * (1.0 + inner.tanh())
        }
    }
}

/// erf(x) = 2 / sqrt(pi) * the integral of exp(-t^2) over [0, x], by Simpson's rule on 2,000
/// intervals: within ~1e-12 for the |x| < 10 the checks reach (std has no erf).
fn erf(x: f64) -> f64 {
    let n = 2000;
    let h = x / n as f64;
    let f = |t: f64| (-t * t).exp();
    let mut s = f(0.0) + f(x);
    for i in 1..n {
        s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
    }
    s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
}

fn half_to_f64(ty: GemmType, bits: u16) -> f64 {
    match ty {
        GemmType::Bf16 => f64::from(half::bf16::from_bits(bits).to_f32()),
        _ => f64::from(half::f16::from_bits(bits).to_f32()),
    }
}

/// The fused checks.
pub(super) fn checks(c: &Ctx, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    let mut checks = Vec::new();
    for (ty, hidden, inter, slice, act, bias) in CASES {
        let kind = if ty == GemmType::Bf16 {
            "gemv_bf16"
        } else {
            "gemv_f16"
        };
        let wgu = host_half(ty, &rng.vec(2 * inter * hidden));
        let wd = host_half(ty, &rng.vec(hidden * inter));
        let x = rng.vec(hidden);
        let bgu: Vec<f32> = if bias { rng.vec(2 * inter) } else { Vec::new() };
        let (dgu, dd, dx) = (c.up(&wgu)?, c.up(&wd)?, c.up(&x)?);
        let dbias = if bias { Some(c.up(&bgu)?) } else { None };
        let mut acc = DevBuf::<u64>::zeros(&c.stream, ACC_WORDS * hidden)?;
        let p = FusedMlp {
            entry: fused_entry(kind).ok_or(Error::Invalid {
                what: "selftest",
                why: format!("no fused entry for {kind}"),
            })?,
            slice,
            hidden,
            inter,
            gate_up: dgu.ptr,
            gate_up_bias: dbias.as_ref().map_or(0, |b| b.ptr),
            down: dd.ptr,
            activation: act,
        };
        let stride = acc_stride(c, &p, &dx, &acc, hidden)?;
        let words = c.down(&acc, ACC_WORDS * hidden)?;
        let sums: Vec<f32> = (0..hidden)
            .map(|o| (words[o * stride] as i64) as f32 * 2f32.powi(-32))
            .collect();
        // The host's MLP in f64 over the same half weights.
        let h: Vec<f64> = (0..inter)
            .map(|j| {
                let dot = |row: usize| {
                    let w = &wgu[row * hidden..(row + 1) * hidden];
                    let b = if bias { f64::from(bgu[row]) } else { 0.0 };
                    b + w
                        .iter()
                        .zip(&x)
                        .map(|(&w, &x)| half_to_f64(ty, w) * f64::from(x))
                        .sum::<f64>()
                };
                activation(dot(2 * j), act) * dot(2 * j + 1)
            })
            .collect();
        let want: Vec<f32> = (0..hidden)
            .map(|o| {
                let row = &wd[o * inter..(o + 1) * inter];
                row.iter()
                    .zip(&h)
                    .map(|(&w, h)| half_to_f64(ty, w) * h)
                    .sum::<f64>() as f32
            })
            .collect();
        let name =
            format!("mlp_fused {ty:?} hidden {hidden} inter {inter} slice {slice} act {act}");
        checks.push(Check {
            name: format!("{name} bias {bias}: sums against the host's f64"),
            rel_diff: super::rel(&sums, &want),
            limit: 2e-5,
        });
        // Again from zero: the same words.
        let zero = vec![0u64; ACC_WORDS * hidden];
        acc.write(&c.stream, &zero)?;
        c.ops().mlp_fused(&p, dx.ptr, acc.ptr)?;
        let again = c.down(&acc, ACC_WORDS * hidden)? == words;
        checks.push(verdict(format!("{name}: a second launch's sums"), again));
        checks.push(norm_check(c, rng, &acc, &sums, hidden, act)?);
    }
    Ok(checks)
}

/// Launches `p` once into the zeroed `acc` and returns the words between two outputs' sums
/// (`MF_ACC_STRIDE`, as the run's defines set it: the largest power of two up to `ACC_WORDS`
/// whose other words all stayed zero).
fn acc_stride(
    c: &Ctx,
    p: &FusedMlp,
    dx: &DevBuf<f32>,
    acc: &DevBuf<u64>,
    hidden: usize,
) -> Result<usize, Error> {
    c.ops().mlp_fused(p, dx.ptr, acc.ptr)?;
    let words = c.down(acc, ACC_WORDS * hidden)?;
    let untouched = |s: usize| words.iter().enumerate().all(|(i, &w)| i % s == 0 || w == 0);
    Ok([16, 8, 4, 2, 1]
        .into_iter()
        .find(|&s| s <= ACC_WORDS && untouched(s))
        .unwrap_or(1))
}

fn verdict(name: String, ok: bool) -> Check {
    Check {
        name: format!("{name} {}", if ok { "bitwise equal" } else { "DIFFERENT" }),
        rel_diff: if ok { 0.0 } else { f32::INFINITY },
        limit: 0.0,
    }
}

/// The fixed norm over `acc` against the plain norm over `sums` (the same values as f32), and
/// `acc` all zero after it.
fn norm_check(
    c: &Ctx,
    rng: &mut Rng,
    acc: &DevBuf<u64>,
    sums: &[f32],
    hidden: usize,
    act: i32,
) -> Result<Check, Error> {
    let residual: Vec<f32> = rng.vec(hidden).iter().map(|v| v * 8.0).collect();
    let weight: Vec<f32> = rng.vec(hidden).iter().map(|v| 1.0 + v).collect();
    let dw = c.up(&weight)?;
    let act = act.clamp(1, 2); // round to a half kind, as a half model's norm does
    let (fx, fout) = (c.up(&residual)?, DevBuf::<f32>::zeros(&c.stream, hidden)?);
    let ops = c.ops();
    ops.skip_norm_fixed(
        (fx.ptr, acc.ptr),
        (dw.ptr, 0),
        fout.ptr,
        hidden,
        (1e-6, true),
        act,
    )?;
    let (px, pout, dd) = (
        c.up(&residual)?,
        DevBuf::<f32>::zeros(&c.stream, hidden)?,
        c.up(sums)?,
    );
    let rows = (1, hidden, 1, hidden);
    ops.skip_norm_half(
        px.ptr,
        dd.ptr,
        (dw.ptr, 0),
        pout.ptr,
        rows,
        (1e-6, true, true, act),
        None,
    )?;
    let same = bitwise_equal(&c.down(&fout, hidden)?, &c.down(&pout, hidden)?)
        && bitwise_equal(&c.down(&fx, hidden)?, &c.down(&px, hidden)?);
    let cleared = c.down(acc, ACC_WORDS * hidden)?.iter().all(|&w| w == 0);
    Ok(verdict(
        format!(
            "skip_norm_fixed width {hidden} act {act}: out and residual against skip_norm, sums cleared"
        ),
        same && cleared,
    ))
}
