//! Int4 tiles: the dispatcher over instruction sets, and the portable reference-order kernels.
//!
//! Both compute types keep 16 f32 lane accumulators per output and finish with the canonical
//! [`hsum16`], exactly like the x86 kernels, so all paths agree bit for bit.
//!
//! * f32 (CompFp32): value `e` goes to lane `e % 16`: `w = (q - zp) * scale` (exact small-integer
//!   difference, one rounding), then `acc = fma(w, x, acc)`, in increasing `e`. This is also
//!   bit-identical to a dense layer over the dequantized matrix.
//! * int8 (CompInt8): lane `i` of each 128-value chunk covers values `8i..8i+8` of one block.
//!   Per block (or per chunk, for blocks under 128 values) the lane's exact integer
//!   `d = sum q_a * q_w - zp * sum q_a = sum q_a * (q_w - zp)` is turned into f32 once:
//!   `acc = fma(d, scale_w * scale_a, acc)`.
//!
//! How close int8 is to ONNX Runtime: the int8 activations are bit-identical to MLAS's (see
//! `int4_quant`) and every block's integer dot product is exact in both. MLAS accumulates the
//! same per-block products `(scale_a * scale_w) * dot` in f32 in its own order and applies the
//! zero point as a separate f32 term `(scale_a * sum q_a) * (-scale_w * zp)`, where we subtract
//! it in integers first. The two results therefore differ only by f32 rounding of the final
//! sums: a few ulp of `sum_blocks |scale_a * scale_w * dot|` (relative ~1e-6), far below the
//! int8 quantization error itself (about 1e-2 relative to the f32 product), which both share.

use super::int4::{CHUNK, Int4Compute, Int4Weight, lane_position};
use super::int4_quant::QuantAct;
use super::rows::Rows;
use crate::cpu::kernels::isa::Isa;
use crate::cpu::kernels::math::{LANES, hsum16};

/// `(rows, cols)` of the full tile for this instruction set and compute type. Fewer rows than
/// a full tile run as `1 x cols` tiles, a column tail as `1 x 1`.
pub(crate) fn tile_shape(isa: Isa, compute: Int4Compute) -> (usize, usize) {
    match (isa, compute) {
        (Isa::Avx512 | Isa::Avx512Vnni, _) => (4, 4),
        (Isa::Avx2, Int4Compute::Int8) => (1, 2),
        (Isa::Avx2, Int4Compute::Fp32) => (1, 4),
        (Isa::Scalar, _) => (1, 1),
    }
}

/// One int8 tile of `rn x cn` outputs starting at row `r0`, column `c0`; calls `store(r, c, v)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile_i8(
    isa: Isa,
    w: &Int4Weight,
    a: &QuantAct,
    r0: usize,
    rn: usize,
    c0: usize,
    cn: usize,
    store: &mut impl FnMut(usize, usize, f32),
) {
    macro_rules! go {
        ($f:path, $r:literal, $c:literal) => {{
            let t: [[f32; $c]; $r] = $f(
                w,
                std::array::from_fn(|c| c0 + c),
                a,
                std::array::from_fn(|r| r0 + r),
            );
            emit(&t, r0, c0, store);
        }};
    }
    #[cfg(target_arch = "x86_64")]
    {
        use super::int4_x86 as x;
        // SAFETY: in every arm `isa` passed `isa::checked`, so the features the kernel enables
        // were detected at run time (VNNI only for `Avx512Vnni`).
        unsafe {
            match (isa, rn, cn) {
                (Isa::Avx512Vnni, 4, 4) => return go!(x::i8_avx512vnni, 4, 4),
                (Isa::Avx512Vnni, 1, 4) => return go!(x::i8_avx512vnni, 1, 4),
                (Isa::Avx512Vnni, _, _) => return go!(x::i8_avx512vnni, 1, 1),
                (Isa::Avx512, 4, 4) => return go!(x::i8_avx512bw, 4, 4),
                (Isa::Avx512, 1, 4) => return go!(x::i8_avx512bw, 1, 4),
                (Isa::Avx512, _, _) => return go!(x::i8_avx512bw, 1, 1),
                (Isa::Avx2, 1, 2) => return go!(x::i8_avx2, 1, 2),
                (Isa::Avx2, _, _) => return go!(x::i8_avx2, 1, 1),
                (Isa::Scalar, _, _) => {}
            }
        }
    }
    let _ = (isa, rn, cn);
    go!(i8_scalar, 1, 1)
}

/// One f32 tile of `rn x cn` outputs starting at row `r0`, column `c0`; calls `store(r, c, v)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile_f32(
    isa: Isa,
    w: &Int4Weight,
    x: &Rows<'_, f32>,
    r0: usize,
    rn: usize,
    c0: usize,
    cn: usize,
    store: &mut impl FnMut(usize, usize, f32),
) {
    macro_rules! go {
        ($f:path, $r:literal, $c:literal) => {{
            let xs: [&[f32]; $r] = std::array::from_fn(|r| x.row(r0 + r));
            let t: [[f32; $c]; $r] = $f(w, std::array::from_fn(|c| c0 + c), xs);
            emit(&t, r0, c0, store);
        }};
    }
    #[cfg(target_arch = "x86_64")]
    {
        use super::int4_x86 as x;
        // SAFETY: in every arm `isa` passed `isa::checked`, so the features the kernel enables
        // were detected at run time.
        unsafe {
            match (isa, rn, cn) {
                (Isa::Avx512 | Isa::Avx512Vnni, 4, 4) => return go!(x::f32_avx512, 4, 4),
                (Isa::Avx512 | Isa::Avx512Vnni, 1, 4) => return go!(x::f32_avx512, 1, 4),
                (Isa::Avx512 | Isa::Avx512Vnni, _, _) => return go!(x::f32_avx512, 1, 1),
                (Isa::Avx2, 1, 4) => return go!(x::f32_avx2, 1, 4),
                (Isa::Avx2, _, _) => return go!(x::f32_avx2, 1, 1),
                (Isa::Scalar, _, _) => {}
            }
        }
    }
    let _ = (isa, rn, cn);
    go!(f32_scalar, 1, 1)
}

#[inline(always)]
fn emit<const R: usize, const C: usize>(
    t: &[[f32; C]; R],
    r0: usize,
    c0: usize,
    store: &mut impl FnMut(usize, usize, f32),
) {
    for (r, row) in t.iter().enumerate() {
        for (c, &v) in row.iter().enumerate() {
            store(r0 + r, c0 + c, v);
        }
    }
}

/// Portable int8 kernel (any `R x C`, each output computed independently).
pub(crate) fn i8_scalar<const R: usize, const C: usize>(
    w: &Int4Weight,
    cols: [usize; C],
    a: &QuantAct,
    rows: [usize; R],
) -> [[f32; C]; R] {
    let bs = w.block_size;
    let chunks = w.kp / CHUNK;
    let cpb = (bs / CHUNK).max(1);
    let lane_block = |chunk: usize, i: usize| (chunk * CHUNK + 8 * i) / bs;
    let mut out = [[0f32; C]; R];
    for (r, &row) in rows.iter().enumerate() {
        let (qa, sal, qs) = (a.q(row), a.sa_lane(row), a.qsum(row));
        for (c, &col) in cols.iter().enumerate() {
            let (wd, sb, zp) = (w.col_data(col), w.col_scales(col), w.col_zp_u8(col));
            let mut acc = [0f32; LANES];
            for g in (0..chunks).step_by(cpb) {
                let mut d = [0i32; LANES];
                for cc in g..g + cpb {
                    let (wb, ab) = (
                        &wd[cc * 64..cc * 64 + 64],
                        &qa[cc * CHUNK..cc * CHUNK + CHUNK],
                    );
                    for (i, d) in d.iter_mut().enumerate() {
                        let mut s = 0i32;
                        for j in 0..4 {
                            let b = wb[4 * i + j];
                            s += i32::from(b & 0x0F) * i32::from(ab[4 * i + j])
                                + i32::from(b >> 4) * i32::from(ab[64 + 4 * i + j]);
                        }
                        let z = zp.map_or(8, |z| i32::from(z[lane_block(cc, i)]));
                        *d += s - z * qs[cc * LANES + i];
                    }
                }
                for (i, acc) in acc.iter_mut().enumerate() {
                    let cs = sb[lane_block(g, i)] * sal[g * LANES + i];
                    *acc = (d[i] as f32).mul_add(cs, *acc);
                }
            }
            out[r][c] = hsum16(&acc);
        }
    }
    out
}

/// Portable f32 kernel (any `R x C`, each output computed independently).
pub(crate) fn f32_scalar<const R: usize, const C: usize>(
    w: &Int4Weight,
    cols: [usize; C],
    xs: [&[f32]; R],
) -> [[f32; C]; R] {
    let bs = w.block_size;
    let mut out = [[0f32; C]; R];
    for (r, x) in xs.iter().enumerate() {
        for (c, &col) in cols.iter().enumerate() {
            let (wd, sb, zp) = (w.col_data(col), w.col_scales(col), w.col_zp_f32(col));
            let mut acc = [0f32; LANES];
            for g in (0..w.kp).step_by(LANES) {
                let blk = g / bs;
                let (s, z) = (sb[blk], zp.map_or(8.0, |z| z[blk]));
                for (j, acc) in acc.iter_mut().enumerate() {
                    let (byte, shift) = lane_position(g + j);
                    let q = f32::from((wd[byte] >> shift) & 0x0F);
                    *acc = ((q - z) * s).mul_add(x[g + j], *acc);
                }
            }
            out[r][c] = hsum16(&acc);
        }
    }
    out
}
