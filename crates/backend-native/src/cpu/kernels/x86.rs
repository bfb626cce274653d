//! x86-64 helpers shared by the hand-written kernels: canonical horizontal sums of 16 lanes.
//!
//! Both reproduce [`super::math::hsum16`] exactly: AVX-512 keeps the 16 lanes in one `zmm`,
//! AVX2 in two `ymm` (lanes 0-7 and 8-15).

use std::arch::x86_64::*;

/// Canonical sum of the 16 lanes of `v` (`l[i] + l[i+8]`, then `+4`, `+2`, `+1`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
pub(crate) fn hsum_zmm(v: __m512) -> f32 {
    let lo = _mm512_castps512_ps256(v);
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    hsum_8(_mm256_add_ps(lo, hi))
}

/// Canonical sum of 16 lanes held as `lo` (lanes 0-7) and `hi` (lanes 8-15).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn hsum_ymm2(lo: __m256, hi: __m256) -> f32 {
    hsum_8(_mm256_add_ps(lo, hi))
}

/// The last three steps of the canonical sum, on `s8[i] = l[i] + l[i+8]`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn hsum_8(s8: __m256) -> f32 {
    let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    let s1 = _mm_add_ss(s2, _mm_shuffle_ps::<0b01>(s2, s2));
    _mm_cvtss_f32(s1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kernels::isa::Isa;
    use crate::cpu::kernels::math::hsum16;

    #[test]
    fn sums_match_the_canonical_order() {
        // Values of very different magnitude make any other order visible.
        let l: [f32; 16] =
            std::array::from_fn(|i| (i as f32 * 1.37).sin() * 10f32.powi(i as i32 % 7));
        let want = hsum16(&l);
        if Isa::Avx512.is_supported() {
            // SAFETY: AVX-512 F/BW/VL, AVX2, FMA and F16C were detected; `l` has 16 floats.
            let got = unsafe { hsum_zmm(_mm512_loadu_ps(l.as_ptr())) };
            assert_eq!(got.to_bits(), want.to_bits());
        }
        if Isa::Avx2.is_supported() {
            // SAFETY: AVX2, FMA and F16C were detected; `l` has 16 floats.
            let got = unsafe {
                hsum_ymm2(
                    _mm256_loadu_ps(l.as_ptr()),
                    _mm256_loadu_ps(l.as_ptr().add(8)),
                )
            };
            assert_eq!(got.to_bits(), want.to_bits());
        }
    }
}
