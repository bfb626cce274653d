//! AVX-512 attention scores: 16 keys at a time, reduced together in the canonical lane order.
//!
//! Each key's dot product keeps its 16 lane accumulators in one `zmm` (one fused multiply-add
//! per 16 dimensions, the tail zero padded by a masked load), exactly like `math::dot16`. The 16
//! accumulators are then summed as a transposed tree whose every add is one of `hsum16`'s
//! (`l[i] + l[i+8]`, then `+4`, `+2`, `+1`), so each score has the same bits as the portable
//! path, for about 3 instructions per key instead of 8.

use std::arch::x86_64::*;

use crate::cpu::kernels::x86::hsum_zmm;

/// Canonical sums of 16 vectors, returned as one vector (lane `r` = sum of `v[r]`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
#[inline]
fn reduce16(v: [__m512; 16]) -> __m512 {
    // s8: 256-bit halves added; vector t holds rows 2t (low half) and 2t + 1 (high half).
    let t: [__m512; 8] = std::array::from_fn(|i| {
        let (a, b) = (v[2 * i], v[2 * i + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(a, b),
            _mm512_shuffle_f32x4::<0xEE>(a, b),
        )
    });
    // s4: 128-bit quarters added; vector u holds rows 4u..4u+4, one per quarter.
    let u: [__m512; 4] = std::array::from_fn(|i| {
        let (a, b) = (t[2 * i], t[2 * i + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(a, b),
            _mm512_shuffle_f32x4::<0xDD>(a, b),
        )
    });
    // s2: pairs within quarters; quarter q of w[i] holds rows 8i + q and 8i + 4 + q.
    let w: [__m512; 2] = std::array::from_fn(|i| {
        let (a, b) = (u[2 * i], u[2 * i + 1]);
        _mm512_add_ps(
            _mm512_shuffle_ps::<0x44>(a, b),
            _mm512_shuffle_ps::<0xEE>(a, b),
        )
    });
    // s: lane 4q + j of z is row 4j + q.
    let z = _mm512_add_ps(
        _mm512_shuffle_ps::<0x88>(w[0], w[1]),
        _mm512_shuffle_ps::<0xDD>(w[0], w[1]),
    );
    let idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_permutexvar_ps(idx, z)
}

/// `out[j] = scale * (q . k_j)` for `out.len()` consecutive rows `k_j` of `q.len()` values.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn scores_avx512(q: &[f32], k: &[f32], scale: f32, out: &mut [f32]) {
    let hs = q.len();
    let rows = out.len();
    assert!(k.len() == rows * hs);
    let (groups, rem) = (hs / 16, hs % 16);
    let mask: __mmask16 = ((1u32 << rem) - 1) as __mmask16;
    let (qp, kp) = (q.as_ptr(), k.as_ptr());
    // SAFETY (all loads below): group g < groups reads [16g, 16g + 16) of a row of hs values;
    // the masked tail reads only lanes < rem of [16 groups, hs); rows are < `rows`, and `k`
    // holds rows * hs values (asserted).
    let load = |row: *const f32, g: usize| unsafe { _mm512_loadu_ps(row.add(16 * g)) };
    let load_tail = |row: *const f32| unsafe { _mm512_maskz_loadu_ps(mask, row.add(16 * groups)) };
    let scale_v = _mm512_set1_ps(scale);
    let mut r = 0;
    while r + 16 <= rows {
        let mut acc = [_mm512_setzero_ps(); 16];
        for g in 0..groups {
            let qv = load(qp, g);
            for (i, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(qv, load(kp.wrapping_add((r + i) * hs), g), *a);
            }
        }
        if rem > 0 {
            let qv = load_tail(qp);
            for (i, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(qv, load_tail(kp.wrapping_add((r + i) * hs)), *a);
            }
        }
        let s = _mm512_mul_ps(reduce16(acc), scale_v);
        let dst = &mut out[r..r + 16];
        // SAFETY: `dst` holds 16 f32.
        unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), s) };
        r += 16;
    }
    while r < rows {
        let row = kp.wrapping_add(r * hs);
        let mut acc = _mm512_setzero_ps();
        for g in 0..groups {
            acc = _mm512_fmadd_ps(load(qp, g), load(row, g), acc);
        }
        if rem > 0 {
            acc = _mm512_fmadd_ps(load_tail(qp), load_tail(row), acc);
        }
        out[r] = hsum_zmm(acc) * scale;
        r += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kernels::isa::Isa;
    use crate::cpu::kernels::math::dot16;
    use crate::cpu::kernels::testutil::{assert_bits, rng, vec};

    #[test]
    fn scores_equal_the_portable_dot() {
        if !Isa::Avx512.is_supported() {
            eprintln!("AVX-512 not available: scores_avx512 not tested");
            return;
        }
        let mut g = rng(32);
        for hs in [1, 7, 16, 33, 64, 80, 128] {
            for rows in [1, 15, 16, 17, 40] {
                let q = vec(&mut g, hs, 3.0);
                let k = vec(&mut g, rows * hs, 3.0);
                let want: Vec<f32> = k.chunks(hs).map(|kr| dot16(&q, kr) * 0.3).collect();
                let mut got = vec![0f32; rows];
                // SAFETY: AVX-512 F/BW/VL, AVX2, FMA and F16C were detected above.
                unsafe { scores_avx512(&q, &k, 0.3, &mut got) };
                assert_bits(&got, &want, &format!("hs {hs} rows {rows}"));
            }
        }
    }
}
