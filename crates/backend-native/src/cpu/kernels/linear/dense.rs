//! Dense (f32) weights: `y = x · W` with `W` stored transposed, one zero-padded row per output.
//!
//! ONNX MatMul keeps `W` as `[k, n]`; at load it becomes `[n, kp]` (kp = k rounded up to 16), so
//! each output is a contiguous dot product of `x` with one weight row. Every output element is
//! computed in 16 lanes (element `i` of a row goes to lane `i % 16`, one fused multiply-add per
//! element, in increasing `i`) then summed in the canonical order ([`hsum16`]); this holds on
//! every instruction set and for every tile shape, so results do not depend on the ISA, on the
//! thread split, or on how many rows are computed together.

use std::ops::Range;

use super::{Rows, round_up};
use crate::cpu::kernels::aligned::Aligned;
use crate::cpu::kernels::isa::Isa;
use crate::cpu::kernels::math::{LANES, hsum16};
use crate::error::{Error, check_len, mul};

/// A dense weight prepared for [`super::linear`]: `[n, kp]` f32, rows zero padded.
#[derive(Clone)]
pub struct DenseWeight {
    k: usize,
    n: usize,
    kp: usize,
    data: Aligned<f32>,
}

impl std::fmt::Debug for DenseWeight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseWeight")
            .field("k", &self.k)
            .field("n", &self.n)
            .finish()
    }
}

impl DenseWeight {
    /// From ONNX MatMul's `[k, n]` row-major f32 data.
    pub fn from_f32(k: usize, n: usize, data_kn: &[f32]) -> Result<Self, Error> {
        Self::build(k, n, data_kn, |v| v)
    }

    /// From `[k, n]` IEEE half-precision bits (converted exactly to f32).
    pub fn from_f16_bits(k: usize, n: usize, data_kn: &[u16]) -> Result<Self, Error> {
        Self::build(k, n, data_kn, |b| half::f16::from_bits(b).to_f32())
    }

    /// From `[k, n]` bfloat16 bits (converted exactly to f32).
    pub fn from_bf16_bits(k: usize, n: usize, data_kn: &[u16]) -> Result<Self, Error> {
        Self::build(k, n, data_kn, |b| half::bf16::from_bits(b).to_f32())
    }

    /// Input features.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Output features.
    pub fn n(&self) -> usize {
        self.n
    }

    /// Row `c` of the transposed weight (length `kp`).
    pub(crate) fn row(&self, c: usize) -> &[f32] {
        &self.data.as_slice()[c * self.kp..(c + 1) * self.kp]
    }

    pub(crate) fn kp(&self) -> usize {
        self.kp
    }

    fn build<T: Copy>(
        k: usize,
        n: usize,
        src: &[T],
        cvt: impl Fn(T) -> f32,
    ) -> Result<Self, Error> {
        check_len("weight", mul("weight", k, n)?, src.len())?;
        let kp = round_up(k, LANES);
        let mut data = Aligned::zeroed(mul("weight", n, kp)?);
        let dst = data.as_mut_slice();
        // Transpose in 32 x 32 tiles so both sides stay in cache.
        const T: usize = 32;
        for k0 in (0..k).step_by(T) {
            for n0 in (0..n).step_by(T) {
                for i in k0..(k0 + T).min(k) {
                    let src_row = &src[i * n..];
                    for c in n0..(n0 + T).min(n) {
                        dst[c * kp + i] = cvt(src_row[c]);
                    }
                }
            }
        }
        Ok(Self { k, n, kp, data })
    }
}

/// Rows of `x` computed together in one tile on AVX-512 (weights are loaded once per tile).
const TILE_ROWS: usize = 4;
/// Output columns computed together.
const TILE_COLS: usize = 4;
/// Rows per block in prefill: weights stream from memory once per block of rows.
const ROW_BLOCK: usize = 16;

/// `out[r][c - cols.start] = x_r · W_c (+ bias[c])` for the columns in `cols`; `x` rows are
/// `kp` long (zero padded).
pub(crate) fn matmul_cols(
    isa: Isa,
    w: &DenseWeight,
    x: &Rows<'_, f32>,
    bias: Option<&[f32]>,
    cols: Range<usize>,
    out: &mut [&mut [f32]],
) {
    let m = x.len();
    let tile_rows = if matches!(isa, Isa::Avx512 | Isa::Avx512Vnni) {
        TILE_ROWS
    } else {
        1
    };
    for rb in (0..m).step_by(ROW_BLOCK) {
        let rb_end = (rb + ROW_BLOCK).min(m);
        let mut c0 = cols.start;
        while c0 < cols.end {
            let cn = if cols.end - c0 >= TILE_COLS {
                TILE_COLS
            } else {
                1
            };
            let mut r = rb;
            while r < rb_end {
                // Full tiles only: any tail (rows or columns) runs one output at a time.
                let rn = if cn == TILE_COLS && rb_end - r >= tile_rows {
                    tile_rows
                } else {
                    1
                };
                match (rn, cn) {
                    (TILE_ROWS, TILE_COLS) => {
                        let t = tile::<TILE_ROWS, TILE_COLS>(isa, w, x, r, c0);
                        store(&t, r, c0, cols.start, bias, out);
                    }
                    (1, TILE_COLS) => {
                        let t = tile::<1, TILE_COLS>(isa, w, x, r, c0);
                        store(&t, r, c0, cols.start, bias, out);
                    }
                    _ => {
                        let t = tile::<1, 1>(isa, w, x, r, c0);
                        store(&t, r, c0, cols.start, bias, out);
                    }
                }
                r += rn;
            }
            c0 += cn;
        }
    }
}

fn store<const R: usize, const C: usize>(
    t: &[[f32; C]; R],
    r0: usize,
    c0: usize,
    col_base: usize,
    bias: Option<&[f32]>,
    out: &mut [&mut [f32]],
) {
    for (r, row) in t.iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            let b = bias.map_or(0.0, |b| b[c0 + c]);
            out[r0 + r][c0 + c - col_base] = v + b;
        }
    }
}

fn tile<const R: usize, const C: usize>(
    isa: Isa,
    w: &DenseWeight,
    x: &Rows<'_, f32>,
    r0: usize,
    c0: usize,
) -> [[f32; C]; R] {
    let xs: [&[f32]; R] = std::array::from_fn(|r| x.row(r0 + r));
    let ws: [&[f32]; C] = std::array::from_fn(|c| w.row(c0 + c));
    #[cfg(target_arch = "x86_64")]
    match isa {
        Isa::Avx512 | Isa::Avx512Vnni => {
            // SAFETY: `isa` passed `isa::checked`, so AVX-512 F/BW/VL, AVX2, FMA and F16C exist.
            return unsafe { super::dense_x86::tile_avx512(xs, ws, w.kp) };
        }
        // SAFETY: `isa` passed `isa::checked`, so AVX2, FMA and F16C exist.
        Isa::Avx2 => return unsafe { super::dense_x86::tile_avx2(xs, ws, w.kp) },
        Isa::Scalar => {}
    }
    let _ = isa;
    tile_scalar(xs, ws, w.kp)
}

/// The portable tile: 16 lane accumulators per output, fused multiply-adds, canonical sum.
pub(crate) fn tile_scalar<const R: usize, const C: usize>(
    xs: [&[f32]; R],
    ws: [&[f32]; C],
    kp: usize,
) -> [[f32; C]; R] {
    let mut acc = [[[0f32; LANES]; C]; R];
    for i in (0..kp).step_by(LANES) {
        for (r, x) in xs.iter().enumerate() {
            let xg = &x[i..i + LANES];
            for (c, w) in ws.iter().enumerate() {
                let wg = &w[i..i + LANES];
                for j in 0..LANES {
                    acc[r][c][j] = wg[j].mul_add(xg[j], acc[r][c][j]);
                }
            }
        }
    }
    acc.map(|row| row.map(|lanes| hsum16(&lanes)))
}
