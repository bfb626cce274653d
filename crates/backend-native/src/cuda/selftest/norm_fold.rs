//! The RMS norm folded into the one-row dense GEMV (`kernels/gemv_norm.cu`) against the CPU:
//! the norm on the host (s = x + round(delta), r = 1 / sqrt(mean(s²) + eps), round(s r g)) fed
//! to the CPU linear kernels, through every entry (walk, pipe, shared) at splits 1, 2 and 4;
//! the residual handed on (`x_out`) bit for bit as the host rounds it and as `skip_norm` writes
//! it back, `x` untouched, and a launch without `x_out` (0) writing none.

use super::epilogue::{host_epilogue, round_act};
use super::linear::{Dt, bitwise_equal, rounded, weight_bytes};
use super::{Check, Ctx, Rng, rel};
use crate::cpu::kernels::{self as cpu, DenseWeight, Weight};
use crate::cuda::kernels::{DevPtr, LinearShape, NormIn, OneRow, RowKernel};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

/// One case: (dt, act, k, n, delta, glu): `dt` weights, the activation precision `act` (0 f32,
/// 1 f16, 2 bf16; it rounds delta, `x_out` and the plain outputs), `k` inputs, `n` outputs,
/// with or without a delta, with `glu` (`n` SiLU(gate) * up pairs) or without (plus a bias).
type Case = (Dt, i32, usize, usize, bool, bool);

/// k 896 and 1536 (multiples of 8: vector loads of x), 1000 (125 units, not a multiple of a
/// warp's 32), 1004 (a multiple of 4, not 8: the last unit partial), 1001 and 203 (odd).
const CASES: [Case; 11] = [
    (Dt::F32, 0, 896, 96, true, false),
    // Shared at split 1: 48 KB of f32 weight slots a block, the default limit.
    (Dt::F32, 0, 1536, 200, false, false),
    (Dt::F32, 0, 1001, 96, true, true),
    (Dt::F16, 1, 1536, 200, true, false),
    (Dt::F16, 1, 896, 96, false, true),
    (Dt::F16, 1, 203, 96, true, false),
    (Dt::Bf16, 2, 896, 200, true, true),
    (Dt::Bf16, 2, 1000, 96, false, false),
    // Weights and activations of different precisions.
    (Dt::F16, 2, 1536, 96, true, false),
    (Dt::Bf16, 0, 203, 200, true, false),
    (Dt::F32, 1, 1004, 96, true, true),
];

/// Relative limit of y against the oracle. The oracle rounds each normed value to the
/// activation precision (as the two launches do), the fold multiplies unrounded s g and applies
/// r to the sums: each input differs by up to half an ulp (2^-11 f16, 2^-8 bf16), errors that
/// mostly cancel over a row, and a plain output's two roundings (the product's, then with the
/// bias) can each land one ulp (2^-10, 2^-7 of max |y|) apart. f32: only the sums' order.
/// On the host, the fold's arithmetic (f32 sums of W s g, times r) stayed within a fifth of
/// these limits on every case over five seeds (f32: 6e-7).
fn limit(act: i32) -> f32 {
    match act {
        1 => 4e-3,
        2 => 3e-2,
        _ => 1e-5,
    }
}

/// s = x + round(delta); without delta, x bit for bit (x + 0 would turn -0 into 0).
fn host_sum(x: &[f32], delta: Option<&[f32]>, act: i32) -> Vec<f32> {
    match delta {
        Some(d) => x
            .iter()
            .zip(d)
            .map(|(&v, &d)| v + round_act(d, act))
            .collect(),
        None => x.to_vec(),
    }
}

/// r = 1 / sqrt(mean(s²) + eps) (the squares summed in f64).
fn host_scale(s: &[f32], eps: f32) -> f32 {
    let squares: f64 = s.iter().map(|&v| f64::from(v) * f64::from(v)).sum();
    (1.0 / (squares / s.len() as f64 + f64::from(eps)).sqrt()) as f32
}

/// The linear's input: round(s r g), as `skip_norm` writes it.
fn host_normed(s: &[f32], r: f32, g: &[f32], act: i32) -> Vec<f32> {
    s.iter()
        .zip(g)
        .map(|(&v, &w)| round_act(v * r * w, act))
        .collect()
}

/// Every value rounded to the activations: round(s) is the residual handed on.
fn round_all(v: &[f32], act: i32) -> Vec<f32> {
    v.iter().map(|&v| round_act(v, act)).collect()
}

/// The CPU linear over `normed` of the `[k, cols]` weights `kn` (with `glu`, gate then up,
/// each `[k, n]`), through the GEMV epilogue at `act`.
fn oracle(
    c: &Ctx,
    normed: &[f32],
    kn: &[f32],
    bias: &[f32],
    case: Case,
) -> Result<Vec<f32>, Error> {
    let (_, act, k, n, _, glu) = case;
    let weight = |kn: &[f32]| DenseWeight::from_f32(k, n, kn).map(Weight::Dense);
    let mut want = vec![0f32; n];
    if glu {
        let (gate, up): (Vec<f32>, Vec<f32>) = (0..k)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| (kn[i * 2 * n + j], kn[i * 2 * n + n + j]))
            .unzip();
        let (mut g, mut u) = (vec![0f32; n], vec![0f32; n]);
        cpu::linear(normed, 1, &weight(&gate)?, None, &mut g, &c.pool)?;
        cpu::linear(normed, 1, &weight(&up)?, None, &mut u, &c.pool)?;
        cpu::silu_mul(&g, &u, &mut want)?;
        return Ok(want);
    }
    cpu::linear(normed, 1, &weight(kn)?, None, &mut want, &c.pool)?;
    Ok(host_epilogue(&want, Some(bias), n, act, -1))
}

/// What a word of the name says: `ok` when the property held, else `bad` (upper case).
fn say(ok: bool, good: &'static str, bad: &'static str) -> &'static str {
    if ok { good } else { bad }
}

/// Fills `x_out` before each launch, so a launch that writes none leaves these bits.
const UNWRITTEN: f32 = 1234.5;

fn check(c: &Ctx, rng: &mut Rng, case: Case) -> Result<Check, Error> {
    let (dt, act, k, n, delta, glu) = case;
    let x: Vec<f32> = rng.vec(k).iter().map(|v| 4.0 * v).collect();
    let d = rng.vec(k);
    let g: Vec<f32> = rng.vec(k).iter().map(|v| 1.0 + 0.5 * v).collect();
    let eps = 1e-6;
    let cols = if glu { 2 * n } else { n };
    let kn = rounded(dt, &rng.vec(k * cols));
    let bias = if glu { Vec::new() } else { rng.vec(n) };
    let sum = host_sum(&x, delta.then_some(&d[..]), act);
    let normed = host_normed(&sum, host_scale(&sum, eps), &g, act);
    let want = oracle(c, &normed, &kn, &bias, case)?;
    let x_out = round_all(&sum, act);
    // Device rows: [cols, k], with GLU the rows of gate j and up j adjacent.
    let order: Vec<usize> = match glu {
        true => (0..n).flat_map(|j| [j, n + j]).collect(),
        false => (0..n).collect(),
    };
    let nk: Vec<f32> = order
        .into_iter()
        .flat_map(|cj| (0..k).map(move |i| (i, cj)))
        .map(|(i, cj)| kn[i * cols + cj])
        .collect();
    let kind = match dt {
        Dt::F32 => "gemv_f32",
        Dt::F16 => "gemv_f16",
        Dt::Bf16 => "gemv_bf16",
    };
    let dw = c.up(&weight_bytes(dt, &nk, 0))?;
    let (dx, dd, dg) = (c.up(&x)?, c.up(&d)?, c.up(&g)?);
    let dd: DevPtr = if delta { dd.ptr } else { 0 };
    let db = if glu { None } else { Some(c.up(&bias)?) };
    let bias: DevPtr = db.as_ref().map_or(0, |b| b.ptr);
    let s = LinearShape {
        ldy: n,
        ..LinearShape::one_row(cols, k, if glu { 0 } else { -1 })
    };
    // One launch: y, what x_out's buffer holds after it (filled with UNWRITTEN), x after it.
    let run = |plan: OneRow, write: bool| -> Result<[Vec<f32>; 3], Error> {
        let y = DevBuf::<f32>::zeros(&c.stream, n)?;
        let out = c.up(&vec![UNWRITTEN; k])?;
        let x_out = if write { out.ptr } else { 0 };
        let norm = NormIn {
            x: dx.ptr,
            delta: dd,
            weight: dg.ptr,
            x_out,
            eps,
            act,
        };
        c.ops()
            .gemv_one_row_norm(kind, dw.ptr, &norm, bias, y.ptr, s, act, plan)?;
        Ok([c.down(&y, n)?, c.down(&out, k)?, c.down(&dx, k)?])
    };
    let (mut worst, mut failed, mut first) = (0f32, Vec::new(), None);
    let (mut plans_equal, mut out_ok, mut x_ok) = (true, true, true);
    for split in [1, 2, 4] {
        let plans = [RowKernel::Walk, RowKernel::Pipe, RowKernel::Shared]
            .map(|via| OneRow { via, split })
            .into_iter()
            .filter(|&p| p.via != RowKernel::Shared || c.kernels.one_row_fits(kind, &s, p));
        let mut walk: Option<Vec<f32>> = None;
        for plan in plans {
            let [y, out, after] = match run(plan, true) {
                Ok(got) => got,
                Err(e) => {
                    failed.push(format!("{:?} split {split}: {e}", plan.via));
                    continue;
                }
            };
            worst = worst.max(rel(&y, &want));
            out_ok &= bitwise_equal(&out, &x_out);
            x_ok &= bitwise_equal(&after, &x);
            plans_equal &= walk.as_ref().is_none_or(|w| bitwise_equal(w, &y));
            first.get_or_insert_with(|| y.clone());
            walk.get_or_insert(y);
        }
    }
    // No x_out: the buffer keeps its fill, and y is the same as with one.
    let none_ok = match run(OneRow::walk(1), false) {
        Ok([y, out, after]) => {
            x_ok &= bitwise_equal(&after, &x);
            out.iter().all(|v| v.to_bits() == UNWRITTEN.to_bits())
                && first.is_none_or(|w| bitwise_equal(&w, &y))
        }
        Err(e) => {
            failed.push(format!("no x_out: {e}"));
            false
        }
    };
    // skip_norm's write-back of the same row: the residual the two launches hand on.
    let (xs, out) = (c.up(&x)?, DevBuf::<f32>::zeros(&c.stream, k)?);
    let rows = (1, k, 1, k);
    c.ops()
        .skip_norm(xs.ptr, dd, dg.ptr, 0, out.ptr, rows, eps, true, true, act)?;
    let skip_ok = bitwise_equal(&c.down(&xs, k)?, &x_out);
    let all_ok = plans_equal && out_ok && x_ok && none_ok && skip_ok && failed.is_empty();
    let launches = match failed.is_empty() {
        true => String::new(),
        false => format!(", launches FAILED: {}", failed.join("; ")),
    };
    Ok(Check {
        name: format!(
            "{kind} norm fold act {act} k{k} n{n}{}{}: walk/pipe/shared at splits 1, 2, 4 \
             bitwise {}, x_out {} the host's, skip_norm's x {} the host's, x {}, none {}{launches}",
            if delta { " +delta" } else { "" },
            if glu { " SiLU GLU" } else { " +bias" },
            say(plans_equal, "equal", "DIFFERENT"),
            say(out_ok, "equals", "DIFFERENT from"),
            say(skip_ok, "equals", "DIFFERENT from"),
            say(x_ok, "unchanged", "CHANGED"),
            say(none_ok, "writes nothing", "WROTE or DIFFERENT y"),
        ),
        rel_diff: if all_ok { worst } else { f32::INFINITY },
        limit: limit(act),
    })
}

/// Every case's check.
pub(super) fn checks(c: &Ctx, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    CASES.into_iter().map(|case| check(c, rng, case)).collect()
}

#[cfg(test)]
mod tests {
    use super::{host_normed, host_scale, host_sum, round_all};

    #[test]
    fn the_host_norm_of_a_hand_checked_row() {
        let q = |e: i32| 2f32.powi(e);
        let x = [1.0f32, 3.0, 5.0];
        let delta = [1.0 + q(-12), 1.0 - q(-13), -1.0 + q(-13)];
        // f32 keeps delta: s = (2 + 2^-12, 4 - 2^-13, 4 + 2^-13), exact sums.
        let s = host_sum(&x, Some(&delta), 0);
        assert_eq!(s, [2.0 + q(-12), 4.0 - q(-13), 4.0 + q(-13)]);
        // f16 steps are 2^-10 above 1 and 2^-11 below: delta rounds to (1, 1, -1) and
        // s = (2, 4, 4); mean(s²) = 36 / 3 = 12, eps 4: r = 1 / sqrt(16) = 0.25.
        let s = host_sum(&x, Some(&delta), 1);
        assert_eq!(
            (s.as_slice(), host_scale(&s, 4.0)),
            (&[2.0, 4.0, 4.0][..], 0.25)
        );
        // s r g = (1, 0.5 + 3 2^-12, -1 - 2^-12), kept by f32. f16 (steps 2^-11 over
        // [0.5, 1)): 0.5 + 3 2^-12 is a tie between 0.5 + 2^-11 (odd) and 0.5 + 2^-10 (even),
        // the even one; -1 - 2^-12 is less than half a step (2^-11) from -1. bf16 (steps 2^-8
        // over [0.5, 1)): 0.5.
        let g = [2.0f32, 0.5 + 3.0 * q(-12), -1.0 - q(-12)];
        assert_eq!(host_normed(&s, 0.25, &g, 0), [1.0, g[1], g[2]]);
        assert_eq!(host_normed(&s, 0.25, &g, 1), [1.0, 0.5 + q(-10), -1.0]);
        assert_eq!(host_normed(&s, 0.25, &g, 2), [1.0, 0.5, -1.0]);
        // round(s): 2 + 2^-12 is less than half an f16 step at 2 (2^-10) from 2; 1 + 2^-8 is
        // an f16 value, and a bf16 tie (steps 2^-7 at 1) between 1 (even) and 1 + 2^-7.
        let s = [2.0 + q(-12), 1.0 + q(-8)];
        assert_eq!(round_all(&s, 0), s);
        assert_eq!(round_all(&s, 1), [2.0, 1.0 + q(-8)]);
        assert_eq!(round_all(&s, 2), [2.0, 1.0]);
        // No delta: s is x bit for bit (-0 stays -0, which x + 0 would not).
        assert_eq!(
            host_sum(&[-0.0, 1.0], None, 1)[0].to_bits(),
            (-0.0f32).to_bits()
        );
    }
}
