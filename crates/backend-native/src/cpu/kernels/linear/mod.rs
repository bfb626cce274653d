//! Linear layers `y[m, n] = x[m, k] · W + bias` over prepared weights (dense f32 or MatMulNBits
//! int4), split over output columns across threads.
//!
//! Decode (`m == 1`) is a memory-bound GEMV: each thread streams its own column range of the
//! weights once (dense weights: as several parallel streams, and a thread that finishes early
//! takes over the tail of the others' ranges). Prefill (`m > 1`) walks blocks of rows and, within
//! a block, tiles of columns, so the weights stream from memory once per block of rows and are
//! reused from cache within it (dense weights: a register-blocked micro-kernel over k blocks).

mod dense;
#[cfg(target_arch = "x86_64")]
mod dense_x86;
mod int4;
mod int4_quant;
mod int4_scalar;
#[cfg(target_arch = "x86_64")]
mod int4_x86;

pub use dense::DenseWeight;
pub use int4::{Int4Compute, Int4Weight, Scales, ZeroPoints};

use crate::cpu::kernels::aligned::Aligned;
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

/// `m` rows of `stride` elements each in one slice.
pub(crate) struct Rows<'a, T> {
    data: &'a [T],
    stride: usize,
    len: usize,
}

impl<'a, T> Rows<'a, T> {
    pub(crate) fn new(data: &'a [T], stride: usize, len: usize) -> Self {
        assert!(data.len() >= stride * len);
        Self { data, stride, len }
    }

    pub(crate) fn row(&self, r: usize) -> &'a [T] {
        &self.data[r * self.stride..(r + 1) * self.stride]
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Copies `[m, k]` rows into `[m, kp]` with zeros after column `k`.
pub(crate) fn pad_rows(x: &[f32], m: usize, k: usize, kp: usize) -> Aligned<f32> {
    let mut out = Aligned::zeroed(m * kp);
    for (dst, src) in out.as_mut_slice().chunks_mut(kp).zip(x.chunks(k.max(1))) {
        dst[..k].copy_from_slice(&src[..k]);
    }
    out
}

/// `v` rounded up to a multiple of `to`.
pub(crate) fn round_up(v: usize, to: usize) -> usize {
    v.div_ceil(to) * to
}

#[cfg(test)]
mod tests;
