//! AVX-512 and AVX2 kernels of the dense linear layer (same lane order as `dense::Portable`).
//!
//! Every output keeps 16 lane sums (one `zmm`, or two `ymm` for lanes 0-7 and 8-15) fed by one
//! fused multiply-add per input element; the canonical sum of the lanes ([`hsum16`]) is done
//! for several outputs at once by [`reduce4`]/[`reduce8`], which perform exactly its additions
//! in its order, only on transposed data.
//!
//! [`hsum16`]: crate::cpu::kernels::math::hsum16

use std::arch::x86_64::*;

use super::dense_panel::{Kernels, PANEL, PCHUNK, Strip};
use crate::cpu::kernels::isa::Isa;
use crate::cpu::kernels::math::LANES;
use crate::cpu::kernels::x86::hsum_ymm2;

/// How far ahead of its reads (in bytes) the decode stream prefetches.
const GEMV_PREFETCH_BYTES: usize = 1024;

/// Chunks ahead that the GEMM tile prefetches its rows of `x` (they stream from L2).
const X_AHEAD: usize = 4;

/// Prefetch hint for the cache line at `p + at` floats; the address may lie past the weight: it
/// is computed with wrapping arithmetic and never dereferenced.
#[inline(always)]
fn prefetch(p: *const f32, at: usize) {
    // SAFETY: SSE is baseline on x86-64; a prefetch never faults and reads nothing observable.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(at).cast()) };
}

/// The AVX-512 kernels (F/BW/VL with AVX2, FMA, F16C); only built when the CPU has them.
pub(crate) struct Avx512(());

impl Avx512 {
    pub(crate) fn new(isa: Isa) -> Self {
        assert!(isa >= Isa::Avx512 && isa.is_supported());
        Self(())
    }
}

impl Kernels for Avx512 {
    fn gemv<const S: usize>(
        &self,
        x: &[f32],
        w: &[f32],
        kp: usize,
        starts: [usize; S],
    ) -> [[f32; PANEL]; S] {
        check_gemv(x, w, kp, &starts);
        // SAFETY: `Avx512::new` checked the features; the slices cover what is read (above).
        unsafe { gemv_avx512(x.as_ptr(), w.as_ptr(), kp, starts) }
    }

    fn strip<const C: usize>(&self, s: Strip<'_, '_>) {
        s.check::<C>();
        // SAFETY: `Avx512::new` checked the features; `check` that the slices cover the strip.
        unsafe { strip_avx512::<C>(s) }
    }

    const ROWS: usize = 3;
}

/// The AVX2 kernels (with FMA and F16C); only built when the CPU has them.
pub(crate) struct Avx2(());

impl Avx2 {
    pub(crate) fn new(isa: Isa) -> Self {
        assert!(isa >= Isa::Avx2 && isa.is_supported());
        Self(())
    }
}

impl Kernels for Avx2 {
    fn gemv<const S: usize>(
        &self,
        x: &[f32],
        w: &[f32],
        kp: usize,
        starts: [usize; S],
    ) -> [[f32; PANEL]; S] {
        check_gemv(x, w, kp, &starts);
        // SAFETY: `Avx2::new` checked the features; the slices cover what is read (above).
        unsafe { gemv_avx2(x.as_ptr(), w.as_ptr(), kp, starts) }
    }

    fn strip<const C: usize>(&self, s: Strip<'_, '_>) {
        s.check::<C>();
        // SAFETY: `Avx2::new` checked the features; `check` that the slices cover the strip.
        unsafe { strip_avx2::<C>(s) }
    }

    const ROWS: usize = 3;
}

/// Checks what the GEMV kernels read is in bounds: `kp` floats of `x`, and a whole panel of `w`
/// at each start.
fn check_gemv(x: &[f32], w: &[f32], kp: usize, starts: &[usize]) {
    assert!(kp.is_multiple_of(LANES) && x.len() >= kp);
    assert!(
        starts
            .iter()
            .all(|&s| s <= w.len() && w.len() - s >= PANEL * kp)
    );
}

/// `[s8(a) | s8(b)]`: lanes `i` and `i + 8` of `a`, then of `b`, added (`s8[i] = l[i] + l[i+8]`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn s8_pair(a: __m512, b: __m512) -> __m512 {
    _mm512_add_ps(
        _mm512_shuffle_f32x4::<0x44>(a, b),
        _mm512_shuffle_f32x4::<0xEE>(a, b),
    )
}

/// From `p = [s8(a) | s8(b)]`, `q = [s8(c) | s8(d)]`: `[s4(a) | s4(b) | s4(c) | s4(d)]`
/// (`s4[i] = s8[i] + s8[i+4]`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn s4_quad(p: __m512, q: __m512) -> __m512 {
    _mm512_add_ps(
        _mm512_shuffle_f32x4::<0x88>(p, q),
        _mm512_shuffle_f32x4::<0xDD>(p, q),
    )
}

/// The canonical 16-lane sums of 4 accumulators.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn reduce4(a: &[__m512; 4]) -> __m128 {
    let t = s4_quad(s8_pair(a[0], a[1]), s8_pair(a[2], a[3]));
    // In each 128-bit quarter (one accumulator): s2 = [s4[0] + s4[2], s4[1] + s4[3]], then
    // s2[0] + s2[1].
    let u = _mm512_add_ps(t, _mm512_permute_ps::<0x4E>(t));
    let v = _mm512_add_ps(u, _mm512_permute_ps::<0xB1>(u));
    let idx = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_castps512_ps128(_mm512_permutexvar_ps(idx, v))
}

/// The canonical 16-lane sums of 8 accumulators.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn reduce8(a: &[__m512; 8]) -> __m256 {
    // Quarter q of `lo` holds s4 of accumulator q, of `hi` that of accumulator q + 4.
    let lo = s4_quad(s8_pair(a[0], a[1]), s8_pair(a[2], a[3]));
    let hi = s4_quad(s8_pair(a[4], a[5]), s8_pair(a[6], a[7]));
    // Per quarter: [s2[0], s2[1]] of accumulator q, then of q + 4.
    let s = _mm512_add_ps(
        _mm512_shuffle_ps::<0x44>(lo, hi),
        _mm512_shuffle_ps::<0xEE>(lo, hi),
    );
    // Per quarter: s2[0] + s2[1] of accumulator q (lane 0) and of q + 4 (lane 1).
    let v = _mm512_add_ps(
        _mm512_shuffle_ps::<0x88>(s, s),
        _mm512_shuffle_ps::<0xDD>(s, s),
    );
    let idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0);
    _mm512_castps512_ps256(_mm512_permutexvar_ps(idx, v))
}

/// Decode: the 4 outputs of each of `S` panels (at `w + starts[s]`, `kp` chunks each), read
/// side by side.
///
/// # Safety
/// AVX-512 F/BW/VL, AVX2, FMA and F16C must be available; `x` must hold `kp` floats (a multiple
/// of 16) and `w` a whole panel (`4 * kp` floats) at each start.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn gemv_avx512<const S: usize>(
    x: *const f32,
    w: *const f32,
    kp: usize,
    starts: [usize; S],
) -> [[f32; PANEL]; S] {
    let ahead = GEMV_PREFETCH_BYTES / 4;
    // SAFETY: each start is in bounds (caller).
    let base: [*const f32; S] = starts.map(|s| unsafe { w.add(s) });
    let mut acc = [[_mm512_setzero_ps(); PANEL]; S];
    for ch in 0..kp / LANES {
        // SAFETY (whole block): chunk `ch` of `x` and of every panel is in bounds (caller).
        unsafe {
            let xv = _mm512_loadu_ps(x.add(ch * LANES));
            for (b, a) in base.iter().zip(&mut acc) {
                let p = b.add(ch * PCHUNK);
                for (c, a) in a.iter_mut().enumerate() {
                    prefetch(p, ahead + c * LANES);
                    *a = _mm512_fmadd_ps(_mm512_loadu_ps(p.add(c * LANES)), xv, *a);
                }
            }
        }
    }
    acc.map(|a| {
        let mut o = [0f32; PANEL];
        // SAFETY: `o` holds 4 floats.
        unsafe { _mm_storeu_ps(o.as_mut_ptr(), reduce4(&a)) };
        o
    })
}

/// A strip (see [`Strip`]) in tiles of 3 rows (then 2 or 1).
///
/// # Safety
/// AVX-512 F/BW/VL, AVX2, FMA and F16C must be available and `s.check::<C>()` must hold.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn strip_avx512<const C: usize>(mut s: Strip<'_, '_>) {
    let tiles = s.rows.div_ceil(3);
    let next_lines = s.next.map(|n| n.len() / LANES);
    let per_tile = (next_lines[0] + next_lines[1]).div_ceil(tiles.max(1));
    let mut r = 0;
    let mut t = 0;
    while r < s.rows {
        // This tile's share of the next strip's weights, into L2.
        for l in t * per_tile..((t + 1) * per_tile).min(next_lines[0] + next_lines[1]) {
            let (range, l) = if l < next_lines[0] {
                (s.next[0], l)
            } else {
                (s.next[1], l - next_lines[0])
            };
            _mm_prefetch::<_MM_HINT_T1>(range.as_ptr().wrapping_add(l * LANES).cast());
        }
        // SAFETY (whole block): rows r.. of the strip exist (checked by the caller's `check`).
        unsafe {
            match s.rows - r {
                1 => tile_avx512::<1, C>(&mut s, r),
                2 => tile_avx512::<2, C>(&mut s, r),
                _ => tile_avx512::<3, C>(&mut s, r),
            }
        }
        r += 3;
        t += 1;
    }
}

/// Rows `r0..r0 + R` of a strip: `x` rows in registers, one weight vector at a time.
///
/// # Safety
/// As [`strip_avx512`], with `r0 + R <= s.rows`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
unsafe fn tile_avx512<const R: usize, const C: usize>(s: &mut Strip<'_, '_>, r0: usize) {
    // SAFETY: row r0 exists (caller), so the offset is inside `x`.
    let x = unsafe { s.x.as_ptr().add(r0 * s.x_stride) };
    let w = s.w.as_ptr();
    let mut acc = [[_mm512_setzero_ps(); C]; R];
    if !s.first {
        let mem = &s.acc[Strip::acc_at::<C>(r0, 0)..][..R * C * LANES];
        for (r, row) in acc.iter_mut().enumerate() {
            for (c, a) in row.iter_mut().enumerate() {
                // SAFETY: `mem` holds R * C * 16 floats.
                *a = unsafe { _mm512_loadu_ps(mem.as_ptr().add(Strip::acc_at::<C>(r, c))) };
            }
        }
    }
    let w_at: [usize; C] = std::array::from_fn(|c| (c / PANEL) * s.w_stride + (c % PANEL) * LANES);
    for ch in 0..s.chunks {
        // SAFETY (whole block): chunk `ch` of rows r0..r0 + R and of the strip's panels is in
        // bounds (`check`).
        unsafe {
            let xv: [__m512; R] = std::array::from_fn(|r| {
                let p = x.add(r * s.x_stride + ch * LANES);
                prefetch(p, X_AHEAD * LANES);
                _mm512_loadu_ps(p)
            });
            for c in 0..C {
                let wv = _mm512_loadu_ps(w.add(w_at[c] + ch * PCHUNK));
                for r in 0..R {
                    acc[r][c] = _mm512_fmadd_ps(wv, xv[r], acc[r][c]);
                }
            }
        }
    }
    if !s.last {
        let mem = &mut s.acc[Strip::acc_at::<C>(r0, 0)..][..R * C * LANES];
        for (r, row) in acc.iter().enumerate() {
            for (c, a) in row.iter().enumerate() {
                // SAFETY: `mem` holds R * C * 16 floats.
                unsafe { _mm512_storeu_ps(mem.as_mut_ptr().add(Strip::acc_at::<C>(r, c)), *a) };
            }
        }
        return;
    }
    for (r, row) in acc.iter().enumerate() {
        let dst = &mut s.out[r0 + r][s.col..s.col + C];
        // SAFETY (whole block): `dst` and the bias hold C floats (`check`).
        unsafe {
            if C == 2 * PANEL {
                let b = s
                    .bias
                    .map_or(_mm256_setzero_ps(), |b| _mm256_loadu_ps(b.as_ptr()));
                let v = reduce8(row[..8].try_into().expect("8 accumulators"));
                _mm256_storeu_ps(dst.as_mut_ptr(), _mm256_add_ps(v, b));
            } else {
                let b = s
                    .bias
                    .map_or(_mm_setzero_ps(), |b| _mm_loadu_ps(b.as_ptr()));
                let v = reduce4(row[..4].try_into().expect("4 accumulators"));
                _mm_storeu_ps(dst.as_mut_ptr(), _mm_add_ps(v, b));
            }
        }
    }
}

/// Decode as [`gemv_avx512`], with two `ymm` accumulators per output.
///
/// # Safety
/// AVX2, FMA and F16C must be available; otherwise as [`gemv_avx512`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemv_avx2<const S: usize>(
    x: *const f32,
    w: *const f32,
    kp: usize,
    starts: [usize; S],
) -> [[f32; PANEL]; S] {
    let ahead = GEMV_PREFETCH_BYTES / 4;
    // SAFETY: each start is in bounds (caller).
    let base: [*const f32; S] = starts.map(|s| unsafe { w.add(s) });
    let mut lo = [[_mm256_setzero_ps(); PANEL]; S];
    let mut hi = [[_mm256_setzero_ps(); PANEL]; S];
    for ch in 0..kp / LANES {
        // SAFETY (whole block): chunk `ch` of `x` and of every panel is in bounds (caller).
        unsafe {
            let x0 = _mm256_loadu_ps(x.add(ch * LANES));
            let x1 = _mm256_loadu_ps(x.add(ch * LANES + 8));
            for s in 0..S {
                let p = base[s].add(ch * PCHUNK);
                for c in 0..PANEL {
                    prefetch(p, ahead + c * LANES);
                    let q = p.add(c * LANES);
                    lo[s][c] = _mm256_fmadd_ps(_mm256_loadu_ps(q), x0, lo[s][c]);
                    hi[s][c] = _mm256_fmadd_ps(_mm256_loadu_ps(q.add(8)), x1, hi[s][c]);
                }
            }
        }
    }
    std::array::from_fn(|s| std::array::from_fn(|c| hsum_ymm2(lo[s][c], hi[s][c])))
}

/// A strip (see [`Strip`]) in tiles of 3 rows (then 2 or 1) and 2 columns: 16 `ymm` registers
/// hold 3 x 2 x 2 accumulators.
///
/// # Safety
/// AVX2, FMA and F16C must be available and `s.check::<C>()` must hold.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn strip_avx2<const C: usize>(mut s: Strip<'_, '_>) {
    let mut r = 0;
    while r < s.rows {
        for c0 in (0..C).step_by(2) {
            // SAFETY (whole block): rows r.. of the strip exist (checked by `check`).
            unsafe {
                match s.rows - r {
                    1 => tile_avx2::<1, C>(&mut s, r, c0),
                    2 => tile_avx2::<2, C>(&mut s, r, c0),
                    _ => tile_avx2::<3, C>(&mut s, r, c0),
                }
            }
        }
        r += 3;
    }
}

/// Rows `r0..r0 + R`, columns `c0`, `c0 + 1` of a strip.
///
/// # Safety
/// As [`strip_avx2`], with `r0 + R <= s.rows` and `c0 + 2 <= C`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn tile_avx2<const R: usize, const C: usize>(s: &mut Strip<'_, '_>, r0: usize, c0: usize) {
    // SAFETY: row r0 exists (caller), so the offset is inside `x`.
    let x = unsafe { s.x.as_ptr().add(r0 * s.x_stride) };
    let w = s.w.as_ptr();
    let mut lo = [[_mm256_setzero_ps(); 2]; R];
    let mut hi = [[_mm256_setzero_ps(); 2]; R];
    let at = |r: usize, c: usize| Strip::acc_at::<C>(r0 + r, c0 + c);
    if !s.first {
        for r in 0..R {
            for c in 0..2 {
                let a = &s.acc[at(r, c)..][..LANES];
                // SAFETY: `a` holds 16 floats.
                unsafe {
                    lo[r][c] = _mm256_loadu_ps(a.as_ptr());
                    hi[r][c] = _mm256_loadu_ps(a.as_ptr().add(8));
                }
            }
        }
    }
    let w_at: [usize; 2] = std::array::from_fn(|c| {
        let col = c0 + c;
        (col / PANEL) * s.w_stride + (col % PANEL) * LANES
    });
    for ch in 0..s.chunks {
        // SAFETY (whole block): chunk `ch` of rows r0..r0 + R and of the strip's panels is in
        // bounds (`check`).
        unsafe {
            let w0 = w.add(w_at[0] + ch * PCHUNK);
            let w1 = w.add(w_at[1] + ch * PCHUNK);
            let (a0, a1) = (_mm256_loadu_ps(w0), _mm256_loadu_ps(w1));
            for (r, l) in lo.iter_mut().enumerate() {
                let xv = _mm256_loadu_ps(x.add(r * s.x_stride + ch * LANES));
                l[0] = _mm256_fmadd_ps(a0, xv, l[0]);
                l[1] = _mm256_fmadd_ps(a1, xv, l[1]);
            }
            let (b0, b1) = (_mm256_loadu_ps(w0.add(8)), _mm256_loadu_ps(w1.add(8)));
            for (r, h) in hi.iter_mut().enumerate() {
                let xv = _mm256_loadu_ps(x.add(r * s.x_stride + ch * LANES + 8));
                h[0] = _mm256_fmadd_ps(b0, xv, h[0]);
                h[1] = _mm256_fmadd_ps(b1, xv, h[1]);
            }
        }
    }
    for r in 0..R {
        for c in 0..2 {
            if s.last {
                let b = s.bias.map_or(0.0, |b| b[c0 + c]);
                s.out[r0 + r][s.col + c0 + c] = hsum_ymm2(lo[r][c], hi[r][c]) + b;
            } else {
                let a = &mut s.acc[at(r, c)..][..LANES];
                // SAFETY: `a` holds 16 floats.
                unsafe {
                    _mm256_storeu_ps(a.as_mut_ptr(), lo[r][c]);
                    _mm256_storeu_ps(a.as_mut_ptr().add(8), hi[r][c]);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kernels::math::hsum16;

    #[test]
    fn reductions_match_the_canonical_sum() {
        if !Isa::Avx512.is_supported() {
            return;
        }
        // Values of very different magnitude make any other order visible.
        let lanes: [[f32; 16]; 8] = std::array::from_fn(|a| {
            std::array::from_fn(|i| {
                let v = ((a * 16 + i) as f32 * 1.37).sin();
                v * 10f32.powi(((a * 5 + i * 3) % 13) as i32 - 6)
            })
        });
        let want: [f32; 8] = std::array::from_fn(|a| hsum16(&lanes[a]));
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
        fn run(lanes: &[[f32; 16]; 8]) -> ([f32; 4], [f32; 8]) {
            // SAFETY: each row of `lanes` holds 16 floats.
            let v: [__m512; 8] = lanes.map(|l| unsafe { _mm512_loadu_ps(l.as_ptr()) });
            let (mut four, mut eight) = ([0f32; 4], [0f32; 8]);
            // SAFETY: the destinations hold 4 and 8 floats.
            unsafe {
                _mm_storeu_ps(four.as_mut_ptr(), reduce4(&[v[0], v[1], v[2], v[3]]));
                _mm256_storeu_ps(eight.as_mut_ptr(), reduce8(&v));
            }
            (four, eight)
        }
        // SAFETY: AVX-512 F/BW/VL, AVX2, FMA and F16C were detected (`is_supported`).
        let (four, eight) = unsafe { run(&lanes) };
        for (a, w) in want.iter().enumerate() {
            assert_eq!(eight[a].to_bits(), w.to_bits(), "reduce8 accumulator {a}");
            if a < 4 {
                assert_eq!(four[a].to_bits(), w.to_bits(), "reduce4 accumulator {a}");
            }
        }
    }
}
