//! The linear layer's entry points: [`Weight`] (dense or int4), the size checks, the split of
//! the output columns over the pool's threads, and the dispatch to `dense.rs` or the int4 driver
//! (`int4_matmul.rs`).

use super::dense::{self, DenseWeight};
use super::int4::Int4Weight;
use super::rows::{Rows, pad_rows};
use crate::cpu::kernels::isa::{self, Isa};
use crate::cpu::kernels::math::LANES;
use crate::cpu::threads::{ThreadPool, split_bounds, split_columns};
use crate::error::{Error, check_len, mul};

/// A prepared weight of a linear layer.
#[derive(Debug, Clone)]
pub enum Weight {
    /// f32 (or f16/bf16 converted at load).
    Dense(DenseWeight),
    /// com.microsoft MatMulNBits, 4 bits.
    Int4(Int4Weight),
}

impl Weight {
    /// Input features.
    pub fn k(&self) -> usize {
        match self {
            Weight::Dense(w) => w.k(),
            Weight::Int4(w) => w.k(),
        }
    }

    /// Output features.
    pub fn n(&self) -> usize {
        match self {
            Weight::Dense(w) => w.n(),
            Weight::Int4(w) => w.n(),
        }
    }
}

impl From<DenseWeight> for Weight {
    fn from(w: DenseWeight) -> Self {
        Weight::Dense(w)
    }
}

impl From<Int4Weight> for Weight {
    fn from(w: Int4Weight) -> Self {
        Weight::Int4(w)
    }
}

/// `y[m, n] = x[m, k] · W (+ bias[n])`, row-major, on `pool`'s threads.
pub fn linear(
    x: &[f32],
    m: usize,
    w: &Weight,
    bias: Option<&[f32]>,
    y: &mut [f32],
    pool: &ThreadPool,
) -> Result<(), Error> {
    linear_with(Isa::best(), x, m, w, bias, y, pool, MIN_MACS_PER_THREAD)
}

/// Multiply-adds below which a linear layer is not split further across threads.
const MIN_MACS_PER_THREAD: usize = 1 << 18;

/// [`linear`] on a chosen instruction set and minimum work per thread (tests compare every
/// level and force splits with `min_macs = 0`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn linear_with(
    isa: Isa,
    x: &[f32],
    m: usize,
    w: &Weight,
    bias: Option<&[f32]>,
    y: &mut [f32],
    pool: &ThreadPool,
    min_macs: usize,
) -> Result<(), Error> {
    let isa = isa::checked(isa);
    let (k, n) = (w.k(), w.n());
    check_len("x", mul("x", m, k)?, x.len())?;
    check_len("y", mul("y", m, n)?, y.len())?;
    if let Some(b) = bias {
        check_len("bias", n, b.len())?;
    }
    if m == 0 || n == 0 {
        return Ok(());
    }
    let parts = pool.parts_for(m.saturating_mul(n).saturating_mul(k), min_macs);
    let bounds = split_bounds(n, parts, LANES);
    if let (Weight::Dense(dw), 1) = (w, m) {
        if dw.kp() == k {
            dense::gemv_parallel(isa, dw, x, bias, y, pool, &bounds);
        } else {
            let padded = pad_rows(x, 1, k, dw.kp());
            dense::gemv_parallel(isa, dw, padded.as_slice(), bias, y, pool, &bounds);
        }
        return Ok(());
    }
    let parts = split_columns(y, m, n, &bounds);
    match w {
        Weight::Dense(dw) => {
            let padded;
            let rows = if dw.kp() == k {
                Rows::new(x, k, m)
            } else {
                padded = pad_rows(x, m, k, dw.kp());
                Rows::new(padded.as_slice(), dw.kp(), m)
            };
            pool.run_each(parts, |p, mut out| {
                dense::matmul_cols(isa, dw, &rows, bias, bounds[p]..bounds[p + 1], &mut out);
            });
        }
        Weight::Int4(qw) => {
            let prepared = qw.prepare_input(isa, x, m);
            pool.run_each(parts, |p, mut out| {
                qw.matmul_cols(isa, &prepared, bias, bounds[p]..bounds[p + 1], &mut out);
            });
        }
    }
    Ok(())
}
