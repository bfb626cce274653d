//! Checks of the one-row entries that fold an RMS norm into the linear after it or the
//! residual add into the linear before it (`RowMode`, `cuda/fold.rs`): every entry (walk,
//! pipelined, shared; x aligned and not) at splits 1, 2 and 4 bitwise equal to the two launches
//! it replaces — `skip_norm_f32` then the plain entry at the same split — and the residual
//! entries bitwise equal to the plain entry's output added to the residual on the host.

use super::linear::{Dt, bitwise_equal, rounded, shifted_f32, weight_bytes};
use super::{Check, Ctx, Rng};
use crate::cuda::kernels::{DevPtr, LinearShape, OneRow, RowKernel, RowMode};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

const EPS: f32 = 1e-6;

/// (k, n, glu): real and odd widths (the norm kernel's block of 1 to 16 warps); with `glu`,
/// n (gate, up) pairs.
const SHAPES: &[(usize, usize, bool)] = &[
    (896, 1152, false),
    (1536, 2048, false),
    (1536, 448, true),
    (4096, 64, false),
    (1001, 77, false),
    (64, 1536, false),
];

fn kernel(dt: Dt) -> &'static str {
    match dt {
        Dt::F32 => "gemv_f32",
        Dt::F16 => "gemv_f16",
        Dt::Bf16 => "gemv_bf16",
    }
}

/// The activation precision of a model with weights of `dt` (0 f32, 1 f16, 2 bf16).
fn act_code(dt: Dt) -> i32 {
    match dt {
        Dt::F32 => 0,
        Dt::F16 => 1,
        Dt::Bf16 => 2,
    }
}

/// `v` rounded to the activation precision `act`, as `round_act`.
fn round_act(v: f32, act: i32) -> f32 {
    match act {
        1 => half::f16::from_f32(v).to_f32(),
        2 => half::bf16::from_f32(v).to_f32(),
        _ => v,
    }
}

/// Runs `run(plan, x)` for every entry at splits 1, 2, 4 and compares each with `want(split)`:
/// whether all are bitwise equal to it.
fn every_entry(
    c: &Ctx,
    kind: &'static str,
    s: &LinearShape,
    (x, x_shifted): (DevPtr, DevPtr),
    run: &dyn Fn(OneRow, DevPtr) -> Result<Vec<f32>, Error>,
    want: &dyn Fn(usize) -> Result<Vec<f32>, Error>,
) -> Result<bool, Error> {
    let mut equal = true;
    for split in [1, 2, 4] {
        let want = want(split)?;
        let shared = OneRow {
            via: RowKernel::Shared,
            split,
        };
        let mut runs = vec![
            (OneRow::walk(split), x),
            (OneRow::walk(split), x_shifted),
            (OneRow::pipe(split), x),
        ];
        if c.kernels.one_row_fits(kind, s, shared) {
            runs.extend([(shared, x), (shared, x_shifted)]);
        }
        for (plan, at) in runs {
            equal &= bitwise_equal(&run(plan, at)?, &want);
        }
    }
    Ok(equal)
}

fn verdict(name: String, equal: bool) -> Check {
    Check {
        name: format!(
            "{name}: every entry at splits 1, 2, 4 bitwise {}",
            if equal { "equal" } else { "DIFFERENT" }
        ),
        rel_diff: if equal { 0.0 } else { f32::INFINITY },
        limit: 0.0,
    }
}

/// The norm entries on one shape against `skip_norm_f32` then the plain entry.
fn norm(c: &Ctx, rng: &mut Rng, dt: Dt, (k, n, glu): (usize, usize, bool)) -> Result<Check, Error> {
    let act = act_code(dt);
    // The MLP's first linear rounds nothing (it runs in f32), qkv rounds to the model's act.
    let linear_act = if glu { 0 } else { act };
    let cols = if glu { 2 * n } else { n };
    let x: Vec<f32> = rng.vec(k).iter().map(|v| 3.0 * v).collect();
    let g: Vec<f32> = rng.vec(k).iter().map(|v| 1.0 + 0.5 * v).collect();
    let w = rounded(dt, &rng.vec(cols * k));
    let bias = if glu { Vec::new() } else { rng.vec(n) };
    let kind = kernel(dt);
    let dw = c.up(&weight_bytes(dt, &w, 0))?;
    let (dx, dx_shifted, dg) = (c.up(&x)?, shifted_f32(c, &x)?, c.up(&g)?);
    let db = (!glu).then(|| c.up(&bias)).transpose()?;
    let bias_ptr = db.as_ref().map_or(0, |b| b.ptr);
    let s = LinearShape::one_row(cols, k, if glu { 0 } else { -1 });
    let linear = |plan: OneRow, xp: DevPtr, mode: RowMode| -> Result<Vec<f32>, Error> {
        let y = DevBuf::<f32>::zeros(&c.stream, n)?;
        c.ops()
            .gemv_one_row(kind, dw.ptr, xp, bias_ptr, y.ptr, s, linear_act, plan, mode)?;
        c.down(&y, n)
    };
    let normed = DevBuf::<f32>::zeros(&c.stream, k)?;
    c.ops().skip_norm(
        dx.ptr,
        0,
        dg.ptr,
        0,
        normed.ptr,
        (1, k, 1, k),
        EPS,
        true,
        false,
        act,
    )?;
    let mode = RowMode::Norm {
        eps: EPS,
        g: dg.ptr,
        act,
    };
    let run = |plan: OneRow, xp: DevPtr| linear(plan, xp, mode);
    let want = |split| linear(OneRow::walk(split), normed.ptr, RowMode::Plain);
    let equal = every_entry(c, kind, &s, (dx.ptr, dx_shifted.ptr + 4), &run, &want)?;
    let name = format!(
        "{kind} norm entries k{k} n{n}{} against skip_norm then the plain entry",
        if glu { " SiLU GLU" } else { "" }
    );
    Ok(verdict(name, equal))
}

/// The residual entries on one shape: y = round(y) + round(linear), against the plain entry's
/// output added on the host; `linear_act` rounds the linear's own output.
fn residual(
    c: &Ctx,
    rng: &mut Rng,
    dt: Dt,
    (k, n): (usize, usize),
    linear_act: i32,
) -> Result<Check, Error> {
    let act = act_code(dt);
    let x = rng.vec(k);
    let w = rounded(dt, &rng.vec(n * k));
    let bias = rng.vec(n);
    // Unrounded, as a residual entry before leaves it.
    let start: Vec<f32> = rng.vec(n).iter().map(|&v| 4.0 * v).collect();
    let kind = kernel(dt);
    let dw = c.up(&weight_bytes(dt, &w, 0))?;
    let (dx, dx_shifted, db) = (c.up(&x)?, shifted_f32(c, &x)?, c.up(&bias)?);
    let s = LinearShape::one_row(n, k, -1);
    let launch = |plan: OneRow, xp: DevPtr, mode: RowMode, y: &[f32]| -> Result<Vec<f32>, Error> {
        let dy = c.up(y)?;
        c.ops()
            .gemv_one_row(kind, dw.ptr, xp, db.ptr, dy.ptr, s, linear_act, plan, mode)?;
        c.down(&dy, n)
    };
    let mode = RowMode::Residual { act };
    let run = |plan: OneRow, xp: DevPtr| launch(plan, xp, mode, &start);
    let want = |split| -> Result<Vec<f32>, Error> {
        let plain = launch(OneRow::walk(split), dx.ptr, RowMode::Plain, &vec![0.0; n])?;
        Ok(start
            .iter()
            .zip(&plain)
            .map(|(&y, &d)| round_act(y, act) + round_act(d, act))
            .collect())
    };
    let equal = every_entry(c, kind, &s, (dx.ptr, dx_shifted.ptr + 4), &run, &want)?;
    let name = format!(
        "{kind} residual entries k{k} n{n} (linear act {linear_act}, residual act {act}) \
         against the plain entry added on the host"
    );
    Ok(verdict(name, equal))
}

/// Every fold check.
pub(super) fn checks(c: &Ctx, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    let mut out = Vec::new();
    for dt in [Dt::F32, Dt::F16, Dt::Bf16] {
        for &shape in SHAPES {
            out.push(norm(c, rng, dt, shape)?);
            if shape.2 {
                continue;
            }
            // The output projection rounds its sum (the model's act), the down one not.
            let acts: &[i32] = if dt == Dt::F32 {
                &[0]
            } else {
                &[0, act_code(dt)]
            };
            for &linear_act in acts {
                out.push(residual(c, rng, dt, (shape.0, shape.1), linear_act)?);
            }
        }
    }
    Ok(out)
}
