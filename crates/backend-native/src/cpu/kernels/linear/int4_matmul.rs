//! The int4 driver: activations prepared for the compute type ([`Prepared`]: padded f32 rows or
//! int8 blocks) and the per-column loop over row blocks and tiles that hands each tile to
//! `int4_scalar`'s dispatcher.

use std::ops::Range;

use super::int4::{Int4Compute, Int4Weight};
use super::int4_quant::QuantAct;
use super::rows::{Rows, pad_rows};
use crate::cpu::kernels::aligned::Aligned;
use crate::cpu::kernels::isa::Isa;

impl Int4Weight {
    /// Activations in the form the compute type reads: padded f32 rows or int8 blocks.
    pub(crate) fn prepare_input(&self, isa: Isa, x: &[f32], m: usize) -> Prepared {
        match self.compute {
            Int4Compute::Fp32 => Prepared::F32(pad_rows(x, m, self.k, self.kp)),
            Int4Compute::Int8 => {
                Prepared::I8(QuantAct::new(isa, x, m, self.k, self.kp, self.block_size))
            }
        }
    }

    /// `out[r][c - cols.start] = x_r · W_c (+ bias[c])` for `c` in `cols`.
    pub(crate) fn matmul_cols(
        &self,
        isa: Isa,
        input: &Prepared,
        bias: Option<&[f32]>,
        cols: Range<usize>,
        out: &mut [&mut [f32]],
    ) {
        let m = match input {
            Prepared::F32(x) => x.len() / self.kp,
            Prepared::I8(a) => a.m,
        };
        let rows_f32 = match input {
            Prepared::F32(x) => Some(Rows::new(x.as_slice(), self.kp, m)),
            Prepared::I8(_) => None,
        };
        let (tile_rows, tile_cols) = super::int4_scalar::tile_shape(isa, self.compute);
        for rb in (0..m).step_by(ROW_BLOCK) {
            let rb_end = (rb + ROW_BLOCK).min(m);
            let mut c0 = cols.start;
            while c0 < cols.end {
                let cn = if cols.end - c0 >= tile_cols {
                    tile_cols
                } else {
                    1
                };
                let mut r = rb;
                while r < rb_end {
                    // Full tiles only: any tail (rows or columns) runs one output at a time.
                    let rn = if cn == tile_cols && rb_end - r >= tile_rows {
                        tile_rows
                    } else {
                        1
                    };
                    let mut store = |r: usize, c: usize, v: f32| {
                        let b = bias.map_or(0.0, |b| b[c]);
                        out[r][c - cols.start] = v + b;
                    };
                    match (input, &rows_f32) {
                        (Prepared::I8(a), _) => {
                            super::int4_scalar::tile_i8(isa, self, a, r, rn, c0, cn, &mut store)
                        }
                        (Prepared::F32(_), Some(x)) => {
                            super::int4_scalar::tile_f32(isa, self, x, r, rn, c0, cn, &mut store)
                        }
                        (Prepared::F32(_), None) => {}
                    }
                    r += rn;
                }
                c0 += cn;
            }
        }
    }
}

/// Rows per block in prefill: weights stream from memory once per block of rows.
const ROW_BLOCK: usize = 32;

/// Activations prepared for one call.
pub(crate) enum Prepared {
    /// `[m, kp]` zero-padded f32 rows.
    F32(Aligned<f32>),
    /// int8 blocks.
    I8(QuantAct),
}
