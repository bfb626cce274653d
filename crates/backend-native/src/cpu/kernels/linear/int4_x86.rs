//! x86-64 int4 tiles: int8 (AVX-512 VNNI / AVX-512 BW / AVX2) and f32 (AVX-512 / AVX2).
//!
//! Each reproduces the lane arithmetic of `int4_scalar` exactly; see there for the definition.
//!
//! Memory safety: every kernel first gathers its slices through the weight's and activation's
//! accessors, which return exactly `kp / 2` weight bytes, `nbp` scales, `nbp + 8` zero-point
//! bytes, `kp` activation bytes or f32s, and `kp / 8` lane scales and sums per column or row, and
//! asserts those lengths. Every raw load below then reads at offsets derived from the loop
//! bounds `chunk < kp / 128` and `block < nbp = kp / block_size`, inside those slices.

use std::arch::x86_64::*;

use super::int4::{CHUNK, Int4Weight};
use super::int4_quant::QuantAct;
use crate::cpu::kernels::x86::{hsum_ymm2, hsum_zmm};

/// How many columns ahead the int8 kernels prefetch weights and scales (two decode tiles).
const PREFETCH_COLS: usize = 8;

/// Slices one int8 tile reads, with their lengths checked (see the module comment).
struct I8Slices<const R: usize, const C: usize> {
    wd: [*const u8; C],
    sb: [*const f32; C],
    zp: [Option<*const u8>; C],
    qa: [*const i8; R],
    sal: [*const f32; R],
    qs: [*const i32; R],
}

impl<const R: usize, const C: usize> I8Slices<R, C> {
    #[inline(always)]
    fn new(w: &Int4Weight, cols: [usize; C], a: &QuantAct, rows: [usize; R]) -> Self {
        let (kp, nbp) = (w.kp, w.nbp);
        // Plain loops rather than array maps: this runs once per tile and must stay cheap.
        let mut s = Self {
            wd: [std::ptr::null(); C],
            sb: [std::ptr::null(); C],
            zp: [None; C],
            qa: [std::ptr::null(); R],
            sal: [std::ptr::null(); R],
            qs: [std::ptr::null(); R],
        };
        for (i, &c) in cols.iter().enumerate() {
            let (wd, sb, zp) = (w.col_data(c), w.col_scales(c), w.col_zp_u8(c));
            assert!(wd.len() == kp / 2 && sb.len() == nbp && zp.is_none_or(|z| z.len() == nbp + 8));
            (s.wd[i], s.sb[i], s.zp[i]) = (wd.as_ptr(), sb.as_ptr(), zp.map(<[u8]>::as_ptr));
        }
        for (i, &r) in rows.iter().enumerate() {
            let (qa, sal, qs) = (a.q(r), a.sa_lane(r), a.qsum(r));
            assert!(qa.len() == kp && sal.len() == kp / 8 && qs.len() == kp / 8);
            (s.qa[i], s.sal[i], s.qs[i]) = (qa.as_ptr(), sal.as_ptr(), qs.as_ptr());
        }
        s
    }
}

/// Block scales of a chunk (first block `first`) as 8 + 8 lanes in the low 256 bits' order.
///
/// # Safety
/// AVX2 must be available; `sb[first..first + 128 / bs]` must be readable.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn scales_raw(sb: *const f32, first: usize, bs: usize) -> __m256 {
    // SAFETY: the caller guarantees 128 / bs scales from `first` (8, 4, 2 or 1 f32).
    unsafe {
        let p = sb.add(first);
        match bs {
            16 => _mm256_loadu_ps(p),
            32 => _mm256_castps128_ps256(_mm_loadu_ps(p)),
            64 => _mm256_castps128_ps256(_mm_castpd_ps(_mm_load_sd(p.cast()))),
            _ => _mm256_set1_ps(*p),
        }
    }
}

/// Zero points of a chunk (first block `first`) widened to i32, in block order.
///
/// # Safety
/// AVX2 must be available; `z[first..first + 8]` must be readable.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn zps_raw(z: *const u8, first: usize) -> __m128i {
    // SAFETY: the caller guarantees 8 readable bytes from `first`.
    unsafe { _mm_loadl_epi64(z.add(first).cast()) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512vnni")]
#[inline]
fn dot_vnni(d: __m512i, w: __m512i, a: __m512i) -> __m512i {
    _mm512_dpbusd_epi32(d, w, a)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn dot_bw(d: __m512i, w: __m512i, a: __m512i) -> __m512i {
    // u8 (0..=15) x i8 pairs sum to at most 2 * 15 * 127: no i16 saturation.
    _mm512_add_epi32(
        d,
        _mm512_madd_epi16(_mm512_maddubs_epi16(w, a), _mm512_set1_epi16(1)),
    )
}

macro_rules! i8_avx512 {
    ($name:ident, $features:literal, $dot:ident) => {
        /// int8 tile of `R x C` outputs (AVX-512; `$dot` does the u8 x i8 lane products).
        #[target_feature(enable = $features)]
        #[allow(clippy::needless_range_loop)] // (row, column) index parallel arrays
        pub(crate) fn $name<const R: usize, const C: usize>(
            w: &Int4Weight,
            cols: [usize; C],
            a: &QuantAct,
            rows: [usize; R],
        ) -> [[f32; C]; R] {
            let s = I8Slices::new(w, cols, a, rows);
            let (bs, sh) = (w.block_size, w.block_shift);
            let cpb = (bs / CHUNK).max(1);
            let chunks = w.kp / CHUNK;
            // SAFETY: `lane_block` is 16 i32.
            let idx = unsafe { _mm512_loadu_si512(w.lane_block.as_ptr().cast()) };
            let mask = _mm512_set1_epi8(0x0F);
            let mut acc = [[_mm512_setzero_ps(); C]; R];
            let mut g = 0;
            while g < chunks {
                let mut d = [[_mm512_setzero_si512(); C]; R];
                for cc in g..g + cpb {
                    // Bounds of every load in this loop: cc < kp / 128, so the activation reads
                    // [cc * 128, cc * 128 + 128) of kp bytes and [cc * 16, cc * 16 + 16) of kp / 8
                    // sums; the weights [cc * 64, cc * 64 + 64) of kp / 2 bytes; the zero points
                    // 8 bytes from block cc * 128 >> sh < nbp, of nbp + 8.
                    // SAFETY: activation bytes and sums of chunk cc (see above).
                    let av: [(__m512i, __m512i, __m512i); R] = std::array::from_fn(|r| unsafe {
                        let q = s.qa[r].add(cc * CHUNK);
                        (
                            _mm512_loadu_si512(q.cast()),
                            _mm512_loadu_si512(q.add(64).cast()),
                            _mm512_loadu_si512(s.qs[r].add(cc * 16).cast()),
                        )
                    });
                    for c in 0..C {
                        // Columns are contiguous: fetch the same chunk PREFETCH_COLS columns
                        // ahead (a hint; the address may lie past the weights and is never read).
                        let ahead = s.wd[c].wrapping_add(PREFETCH_COLS * w.kp / 2 + cc * 64);
                        _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                        // SAFETY: weight bytes of chunk cc (see above).
                        let v = unsafe { _mm512_loadu_si512(s.wd[c].add(cc * 64).cast()) };
                        let lo = _mm512_and_si512(v, mask);
                        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v), mask);
                        let zl = s.zp[c].map(|z| {
                            let first = (cc * CHUNK) >> sh;
                            if bs >= CHUNK {
                                // SAFETY: first < nbp (see above).
                                _mm512_set1_epi32(i32::from(unsafe { *z.add(first) }))
                            } else {
                                // SAFETY: 8 bytes from first < nbp, of nbp + 8 (see above).
                                let v = _mm512_cvtepu8_epi32(unsafe { zps_raw(z, first) });
                                _mm512_permutexvar_epi32(idx, v)
                            }
                        });
                        for r in 0..R {
                            let (alo, ahi, q) = av[r];
                            let t = $dot($dot(d[r][c], lo, alo), hi, ahi);
                            let corr = match zl {
                                Some(z) => _mm512_mullo_epi32(z, q),
                                None => _mm512_slli_epi32::<3>(q),
                            };
                            d[r][c] = _mm512_sub_epi32(t, corr);
                        }
                    }
                }
                let first = (g * CHUNK) >> sh;
                for c in 0..C {
                    let ahead = s.sb[c].wrapping_add(PREFETCH_COLS * w.nbp + first);
                    _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                    // SAFETY: blocks first .. first + 128 / bs lie in chunk g, below nbp.
                    let raw = unsafe { scales_raw(s.sb[c], first, bs) };
                    let sv = _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(raw));
                    for r in 0..R {
                        // SAFETY: lanes [g * 16, g * 16 + 16) of kp / 8.
                        let sa = unsafe { _mm512_loadu_ps(s.sal[r].add(g * 16)) };
                        let cs = _mm512_mul_ps(sv, sa);
                        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d[r][c]), cs, acc[r][c]);
                    }
                }
                g += cpb;
            }
            let mut out = [[0f32; C]; R];
            for r in 0..R {
                for c in 0..C {
                    out[r][c] = hsum_zmm(acc[r][c]);
                }
            }
            out
        }
    };
}

i8_avx512!(
    i8_avx512vnni,
    "avx512f,avx512bw,avx512vl,avx2,fma,f16c,avx512vnni",
    dot_vnni
);
i8_avx512!(
    i8_avx512bw,
    "avx512f,avx512bw,avx512vl,avx2,fma,f16c",
    dot_bw
);

/// int8 tile of `R x C` outputs with AVX2: each 16-lane vector is two `ymm` halves.
#[allow(clippy::needless_range_loop)] // (row, column) index parallel arrays
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn i8_avx2<const R: usize, const C: usize>(
    w: &Int4Weight,
    cols: [usize; C],
    a: &QuantAct,
    rows: [usize; R],
) -> [[f32; C]; R] {
    let s = I8Slices::new(w, cols, a, rows);
    let (bs, sh) = (w.block_size, w.block_shift);
    let cpb = (bs / CHUNK).max(1);
    let chunks = w.kp / CHUNK;
    // SAFETY: `lane_block` is 16 i32; each load reads 8 of them.
    let (i0, i1) = unsafe {
        let p = w.lane_block.as_ptr().cast::<__m256i>();
        (_mm256_loadu_si256(p), _mm256_loadu_si256(p.add(1)))
    };
    let mask = _mm256_set1_epi8(0x0F);
    let ones = _mm256_set1_epi16(1);
    let dot = |w: __m256i, a: __m256i| _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), ones);
    let zero = _mm256_setzero_ps();
    let mut acc = [[(zero, zero); C]; R];
    let mut g = 0;
    while g < chunks {
        let zi = _mm256_setzero_si256();
        let mut d = [[(zi, zi); C]; R];
        for cc in g..g + cpb {
            for c in 0..C {
                // Bounds: as in the AVX-512 kernel, chunk cc < kp / 128 bounds every offset of
                // this loop inside the slices checked by `I8Slices::new`.
                let ahead = s.wd[c].wrapping_add(PREFETCH_COLS * w.kp / 2 + cc * 64);
                _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                // SAFETY: weight bytes [cc * 64, cc * 64 + 64) of kp / 2.
                let (v0, v1) = unsafe {
                    let p = s.wd[c].add(cc * 64);
                    (
                        _mm256_loadu_si256(p.cast()),
                        _mm256_loadu_si256(p.add(32).cast()),
                    )
                };
                let (lo0, lo1) = (_mm256_and_si256(v0, mask), _mm256_and_si256(v1, mask));
                let hi0 = _mm256_and_si256(_mm256_srli_epi16::<4>(v0), mask);
                let hi1 = _mm256_and_si256(_mm256_srli_epi16::<4>(v1), mask);
                let zl = s.zp[c].map(|z| {
                    let first = (cc * CHUNK) >> sh;
                    if bs >= CHUNK {
                        // SAFETY: first < nbp.
                        let v = _mm256_set1_epi32(i32::from(unsafe { *z.add(first) }));
                        (v, v)
                    } else {
                        // SAFETY: 8 bytes from first < nbp, of nbp + 8.
                        let v = _mm256_cvtepu8_epi32(unsafe { zps_raw(z, first) });
                        (
                            _mm256_permutevar8x32_epi32(v, i0),
                            _mm256_permutevar8x32_epi32(v, i1),
                        )
                    }
                });
                for r in 0..R {
                    // SAFETY: activation bytes [cc * 128, +128) of kp, sums [cc * 16, +16) of kp / 8.
                    let (a0, a1, a2, a3, q0, q1) = unsafe {
                        let q = s.qa[r].add(cc * CHUNK).cast::<__m256i>();
                        let qs = s.qs[r].add(cc * 16).cast::<__m256i>();
                        (
                            _mm256_loadu_si256(q),
                            _mm256_loadu_si256(q.add(1)),
                            _mm256_loadu_si256(q.add(2)),
                            _mm256_loadu_si256(q.add(3)),
                            _mm256_loadu_si256(qs),
                            _mm256_loadu_si256(qs.add(1)),
                        )
                    };
                    let t0 = _mm256_add_epi32(dot(lo0, a0), dot(hi0, a2));
                    let t1 = _mm256_add_epi32(dot(lo1, a1), dot(hi1, a3));
                    let (c0, c1) = match zl {
                        Some((z0, z1)) => (_mm256_mullo_epi32(z0, q0), _mm256_mullo_epi32(z1, q1)),
                        None => (_mm256_slli_epi32::<3>(q0), _mm256_slli_epi32::<3>(q1)),
                    };
                    let (d0, d1) = d[r][c];
                    d[r][c] = (
                        _mm256_sub_epi32(_mm256_add_epi32(d0, t0), c0),
                        _mm256_sub_epi32(_mm256_add_epi32(d1, t1), c1),
                    );
                }
            }
        }
        let first = (g * CHUNK) >> sh;
        for c in 0..C {
            _mm_prefetch::<_MM_HINT_T0>(s.sb[c].wrapping_add(PREFETCH_COLS * w.nbp + first).cast());
            // SAFETY: blocks first .. first + 128 / bs lie in chunk g, below nbp.
            let raw = unsafe { scales_raw(s.sb[c], first, bs) };
            let (s0, s1) = (
                _mm256_permutevar8x32_ps(raw, i0),
                _mm256_permutevar8x32_ps(raw, i1),
            );
            for r in 0..R {
                // SAFETY: lanes [g * 16, g * 16 + 16) of kp / 8.
                let (a0, a1) = unsafe {
                    let p = s.sal[r].add(g * 16);
                    (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
                };
                let (d0, d1) = d[r][c];
                let (x0, x1) = acc[r][c];
                acc[r][c] = (
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_mul_ps(s0, a0), x0),
                    _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_mul_ps(s1, a1), x1),
                );
            }
        }
        g += cpb;
    }
    let mut out = [[0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            out[r][c] = hsum_ymm2(acc[r][c].0, acc[r][c].1);
        }
    }
    out
}

/// Slices one f32 tile reads, with their lengths checked (see the module comment).
struct F32Slices<const R: usize, const C: usize> {
    wd: [*const u8; C],
    sb: [*const f32; C],
    zp: [Option<*const f32>; C],
    xs: [*const f32; R],
}

impl<const R: usize, const C: usize> F32Slices<R, C> {
    #[inline(always)]
    fn new(w: &Int4Weight, cols: [usize; C], xs: [&[f32]; R]) -> Self {
        let mut s = Self {
            wd: [std::ptr::null(); C],
            sb: [std::ptr::null(); C],
            zp: [None; C],
            xs: [std::ptr::null(); R],
        };
        for (i, &c) in cols.iter().enumerate() {
            let (wd, sb, zp) = (w.col_data(c), w.col_scales(c), w.col_zp_f32(c));
            assert!(
                wd.len() == w.kp / 2 && sb.len() == w.nbp && zp.is_none_or(|z| z.len() == w.nbp)
            );
            (s.wd[i], s.sb[i], s.zp[i]) = (wd.as_ptr(), sb.as_ptr(), zp.map(<[f32]>::as_ptr));
        }
        for (i, x) in xs.iter().enumerate() {
            assert!(x.len() == w.kp);
            s.xs[i] = x.as_ptr();
        }
        s
    }

    /// Scale and zero point of block `b < nbp` of tile column `c`.
    fn block(&self, c: usize, b: usize) -> (f32, f32) {
        // SAFETY: `b < nbp`, the length of both checked slices.
        unsafe { (*self.sb[c].add(b), self.zp[c].map_or(8.0, |z| *z.add(b))) }
    }
}

/// Unpacks 16 bytes of the lane layout at `p` (32 values) into natural order: 0-15, 16-31.
///
/// # Safety
/// AVX2 must be available; 16 bytes from `p` must be readable.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn unpack32(p: *const u8) -> (__m128i, __m128i) {
    // SAFETY: the caller guarantees 16 readable bytes.
    let b = unsafe { _mm_loadu_si128(p.cast()) };
    let mask = _mm_set1_epi8(0x0F);
    let lo = _mm_and_si128(b, mask);
    let hi = _mm_and_si128(_mm_srli_epi16::<4>(b), mask);
    (_mm_unpacklo_epi32(lo, hi), _mm_unpackhi_epi32(lo, hi))
}

/// f32 tile of `R x C` outputs (AVX-512): dequantize 16 values at a time, fused multiply-add.
#[allow(clippy::needless_range_loop)] // (row, column) index parallel arrays
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) fn f32_avx512<const R: usize, const C: usize>(
    w: &Int4Weight,
    cols: [usize; C],
    xs: [&[f32]; R],
) -> [[f32; C]; R] {
    let s = F32Slices::new(w, cols, xs);
    let sh = w.block_shift;
    let mut acc = [[_mm512_setzero_ps(); C]; R];
    let mut e0 = 0;
    while e0 < w.kp {
        // SAFETY: e0 + 32 <= kp (kp is a multiple of 128), inside the kp-long rows.
        let xv: [(__m512, __m512); R] = std::array::from_fn(|r| unsafe {
            (
                _mm512_loadu_ps(s.xs[r].add(e0)),
                _mm512_loadu_ps(s.xs[r].add(e0 + 16)),
            )
        });
        for c in 0..C {
            if e0 % CHUNK == 0 {
                _mm_prefetch::<_MM_HINT_T0>(
                    s.wd[c]
                        .wrapping_add(PREFETCH_COLS * w.kp / 2 + e0 / 2)
                        .cast(),
                );
            }
            // SAFETY: bytes [e0 / 2, e0 / 2 + 16) of kp / 2.
            let (n0, n1) = unsafe { unpack32(s.wd[c].add(e0 / 2)) };
            let deq = |n: __m128i, e: usize| {
                let (scale, z) = s.block(c, e >> sh);
                let q = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(n));
                _mm512_mul_ps(_mm512_sub_ps(q, _mm512_set1_ps(z)), _mm512_set1_ps(scale))
            };
            let (w0, w1) = (deq(n0, e0), deq(n1, e0 + 16));
            for r in 0..R {
                acc[r][c] = _mm512_fmadd_ps(w0, xv[r].0, acc[r][c]);
                acc[r][c] = _mm512_fmadd_ps(w1, xv[r].1, acc[r][c]);
            }
        }
        e0 += 32;
    }
    let mut out = [[0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            out[r][c] = hsum_zmm(acc[r][c]);
        }
    }
    out
}

/// f32 tile of `R x C` outputs (AVX2): as [`f32_avx512`] with two `ymm` halves per 16 lanes.
#[allow(clippy::needless_range_loop)] // (row, column) index parallel arrays
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn f32_avx2<const R: usize, const C: usize>(
    w: &Int4Weight,
    cols: [usize; C],
    xs: [&[f32]; R],
) -> [[f32; C]; R] {
    let s = F32Slices::new(w, cols, xs);
    let sh = w.block_shift;
    let zero = _mm256_setzero_ps();
    let mut acc = [[(zero, zero); C]; R];
    let mut e0 = 0;
    while e0 < w.kp {
        for c in 0..C {
            if e0 % CHUNK == 0 {
                _mm_prefetch::<_MM_HINT_T0>(
                    s.wd[c]
                        .wrapping_add(PREFETCH_COLS * w.kp / 2 + e0 / 2)
                        .cast(),
                );
            }
            // SAFETY: bytes [e0 / 2, e0 / 2 + 16) of kp / 2.
            let (n0, n1) = unsafe { unpack32(s.wd[c].add(e0 / 2)) };
            for (e, n) in [(e0, n0), (e0 + 16, n1)] {
                let (scale, z) = s.block(c, e >> sh);
                let (z, scale) = (_mm256_set1_ps(z), _mm256_set1_ps(scale));
                let deq = |n: __m128i| {
                    _mm256_mul_ps(
                        _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(n)), z),
                        scale,
                    )
                };
                let (w0, w1) = (deq(n), deq(_mm_srli_si128::<8>(n)));
                for r in 0..R {
                    // SAFETY: e + 16 <= kp, inside the kp-long rows.
                    let (x0, x1) = unsafe {
                        (
                            _mm256_loadu_ps(s.xs[r].add(e)),
                            _mm256_loadu_ps(s.xs[r].add(e + 8)),
                        )
                    };
                    let (a0, a1) = acc[r][c];
                    acc[r][c] = (_mm256_fmadd_ps(w0, x0, a0), _mm256_fmadd_ps(w1, x1, a1));
                }
            }
        }
        e0 += 32;
    }
    let mut out = [[0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            out[r][c] = hsum_ymm2(acc[r][c].0, acc[r][c].1);
        }
    }
    out
}
