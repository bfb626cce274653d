//! What the GEMM checks (`gemm.rs`, `gemm_int4.rs`, `halves.rs`) share: the GEMM type of a
//! weight type, a y whose untouched columns are watched, the check of a result, the sums'
//! tolerance and the CPU's product.

use super::common::{Check, Ctx, rel};
use super::linear::Dt;
use crate::cpu::kernels::{self as cpu, DenseWeight, Weight};
use crate::cuda::kernels::GemmType;
use crate::cuda::span::DevSpan;
use crate::error::Error;

/// What y holds around the slice a call writes.
const UNTOUCHED: f32 = 1.0e30;

/// The GEMM type of weights of type `dt`.
pub(super) fn gemm_type(dt: Dt) -> GemmType {
    match dt {
        Dt::F32 => GemmType::F32,
        Dt::F16 => GemmType::F16,
        Dt::Bf16 => GemmType::Bf16,
    }
}

/// y `[m, ldy]` filled with [`UNTOUCHED`], the call writing `[m, width]` from column `col0`;
/// the slice, or `None` when anything around it changed.
pub(super) fn in_slice(
    c: &Ctx,
    (m, width, col0, ldy): (usize, usize, usize, usize),
    call: impl FnOnce(DevSpan<'_, f32>) -> Result<(), Error>,
) -> Result<Option<Vec<f32>>, Error> {
    let y = c.up(&vec![UNTOUCHED; m * ldy])?;
    call(y.span_from(col0)?)?;
    let all = c.down(&y, m * ldy)?;
    let mut slice = Vec::with_capacity(m * width);
    for (r, row) in all.chunks(ldy).enumerate() {
        let inside = col0..col0 + width;
        if row
            .iter()
            .enumerate()
            .any(|(j, v)| !inside.contains(&j) && *v != UNTOUCHED)
        {
            eprintln!("row {r} written outside columns {inside:?}");
            return Ok(None);
        }
        slice.extend_from_slice(&row[inside]);
    }
    Ok(Some(slice))
}

/// The check `name` of `got` (None: it wrote outside its slice) against `want`.
pub(super) fn check(name: String, got: Option<&[f32]>, want: &[f32], limit: f32) -> Check {
    let rel_diff = got.map_or(f32::INFINITY, |g| rel(g, want));
    Check {
        name,
        rel_diff,
        limit,
    }
}

/// Relative difference allowed between the GEMM's f32 sums and the CPU's over the same
/// inputs: 1e-5 as every f32 kernel here; half-precision weights run on tensor cores, whose f32
/// accumulation truncates (rounds toward zero) instead of rounding to nearest, an error of up
/// to one ulp (2^-23) per accumulation step rather than half of one, and of one sign: 3e-5.
pub(super) fn sum_tol(dt: Dt) -> f32 {
    if dt == Dt::F32 { 1e-5 } else { 3e-5 }
}

/// `[m, k]` x `[k, n]` on the CPU (no bias).
pub(super) fn cpu_linear(
    c: &Ctx,
    x: &[f32],
    m: usize,
    k: usize,
    kn: &[f32],
) -> Result<Vec<f32>, Error> {
    let n = kn.len() / k;
    let w = Weight::Dense(DenseWeight::from_f32(k, n, kn)?);
    let mut y = vec![0f32; m * n];
    cpu::linear(x, m, &w, None, &mut y, &c.pool)?;
    Ok(y)
}
