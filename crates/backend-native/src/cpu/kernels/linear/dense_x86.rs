//! AVX-512 and AVX2 tiles of the dense linear layer (same lane order as `dense::tile_scalar`).

use std::arch::x86_64::*;

use crate::cpu::kernels::x86::{hsum_ymm2, hsum_zmm};

/// Weight rows (output columns) are contiguous, `kp` apart: the kernels prefetch the same
/// offset this many rows ahead, which keeps the stream ahead of use when it comes from memory.
const PREFETCH_COLS: usize = 8;

/// Prefetch hint for `row[at..]`; `at` may lie past the row (and past the whole weight): the
/// address is computed with wrapping arithmetic and never dereferenced.
#[inline(always)]
fn prefetch(row: &[f32], at: usize) {
    // SAFETY: SSE is baseline on x86-64; a prefetch never faults and reads nothing observable.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(row.as_ptr().wrapping_add(at).cast()) };
}

/// `R x C` dot products of length `kp` (a multiple of 16): one `zmm` accumulator per output.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(crate) fn tile_avx512<const R: usize, const C: usize>(
    xs: [&[f32]; R],
    ws: [&[f32]; C],
    kp: usize,
) -> [[f32; C]; R] {
    assert!(kp.is_multiple_of(16));
    assert!(xs.iter().all(|x| x.len() >= kp) && ws.iter().all(|w| w.len() >= kp));
    let mut acc = [[_mm512_setzero_ps(); C]; R];
    let mut i = 0;
    while i < kp {
        let mut wv = [_mm512_setzero_ps(); C];
        for c in 0..C {
            prefetch(ws[c], i + PREFETCH_COLS * kp);
            // SAFETY: i + 16 <= kp <= ws[c].len() (asserted above).
            wv[c] = unsafe { _mm512_loadu_ps(ws[c].as_ptr().add(i)) };
        }
        for r in 0..R {
            // SAFETY: i + 16 <= kp <= xs[r].len() (asserted above).
            let xv = unsafe { _mm512_loadu_ps(xs[r].as_ptr().add(i)) };
            for c in 0..C {
                acc[r][c] = _mm512_fmadd_ps(wv[c], xv, acc[r][c]);
            }
        }
        i += 16;
    }
    let mut out = [[0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            out[r][c] = hsum_zmm(acc[r][c]);
        }
    }
    out
}

/// `R x C` dot products of length `kp` with two `ymm` accumulators (lanes 0-7, 8-15) per output.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn tile_avx2<const R: usize, const C: usize>(
    xs: [&[f32]; R],
    ws: [&[f32]; C],
    kp: usize,
) -> [[f32; C]; R] {
    assert!(kp.is_multiple_of(16));
    assert!(xs.iter().all(|x| x.len() >= kp) && ws.iter().all(|w| w.len() >= kp));
    let mut lo = [[_mm256_setzero_ps(); C]; R];
    let mut hi = [[_mm256_setzero_ps(); C]; R];
    let mut i = 0;
    while i < kp {
        for r in 0..R {
            // SAFETY: i + 16 <= kp <= xs[r].len() (asserted above).
            let (x0, x1) = unsafe {
                let p = xs[r].as_ptr().add(i);
                (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
            };
            for c in 0..C {
                if r == 0 {
                    prefetch(ws[c], i + PREFETCH_COLS * kp);
                }
                // SAFETY: i + 16 <= kp <= ws[c].len() (asserted above).
                let (w0, w1) = unsafe {
                    let p = ws[c].as_ptr().add(i);
                    (_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8)))
                };
                lo[r][c] = _mm256_fmadd_ps(w0, x0, lo[r][c]);
                hi[r][c] = _mm256_fmadd_ps(w1, x1, hi[r][c]);
            }
        }
        i += 16;
    }
    let mut out = [[0f32; C]; R];
    for r in 0..R {
        for c in 0..C {
            out[r][c] = hsum_ymm2(lo[r][c], hi[r][c]);
        }
    }
    out
}
