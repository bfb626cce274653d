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

/// For each of `N` (1, 2, 4 or 8) heads: `out[j] = scale * (q . k_j)` for `out.len()` rows `k_j`
/// of `q.len()` values. Blocks of `16 / N` keys are scored for all heads at once (each key row
/// is loaded once for the `N` heads), accumulator `i * (16 / N) + row`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn scores_avx512<const N: usize>(
    q: [&[f32]; N],
    k: &[f32],
    scale: f32,
    mut out: [&mut [f32]; N],
) {
    let hs = q[0].len();
    let rows = out[0].len();
    assert!(matches!(N, 1 | 2 | 4 | 8));
    assert!(q.iter().all(|q| q.len() == hs) && out.iter().all(|o| o.len() == rows));
    assert!(k.len() == rows * hs);
    let block = 16 / N;
    let (groups, rem) = (hs / 16, hs % 16);
    let mask: __mmask16 = ((1u32 << rem) - 1) as __mmask16;
    let kp = k.as_ptr();
    // Bounds of the loads below: group g < groups reads [16g, 16g + 16) of a row of hs values;
    // the masked tail reads only lanes < rem of [16 groups, hs); key rows are < `rows`, and `k`
    // holds rows * hs values, each `q` hs values (asserted).
    // SAFETY: a full group of a row (see above).
    let load = |row: *const f32, g: usize| unsafe { _mm512_loadu_ps(row.add(16 * g)) };
    // SAFETY: the masked tail of a row (see above); masked-off lanes are not read.
    let load_tail = |row: *const f32| unsafe { _mm512_maskz_loadu_ps(mask, row.add(16 * groups)) };
    let key = |r: usize| kp.wrapping_add(r * hs);
    let scale_v = _mm512_set1_ps(scale);
    let mut r = 0;
    while r + block <= rows {
        let mut acc = [_mm512_setzero_ps(); 16];
        for g in 0..=groups {
            if g == groups && rem == 0 {
                break;
            }
            let qv: [__m512; N] = std::array::from_fn(|i| {
                if g < groups {
                    load(q[i].as_ptr(), g)
                } else {
                    load_tail(q[i].as_ptr())
                }
            });
            for row in 0..block {
                let kv = if g < groups {
                    load(key(r + row), g)
                } else {
                    load_tail(key(r + row))
                };
                for i in 0..N {
                    acc[i * block + row] = _mm512_fmadd_ps(qv[i], kv, acc[i * block + row]);
                }
            }
        }
        let mut s = [0f32; 16];
        // SAFETY: `s` holds 16 f32.
        unsafe { _mm512_storeu_ps(s.as_mut_ptr(), _mm512_mul_ps(reduce16(acc), scale_v)) };
        for (i, o) in out.iter_mut().enumerate() {
            o[r..r + block].copy_from_slice(&s[i * block..(i + 1) * block]);
        }
        r += block;
    }
    for r in r..rows {
        for (q, o) in q.iter().zip(out.iter_mut()) {
            let mut acc = _mm512_setzero_ps();
            for g in 0..groups {
                acc = _mm512_fmadd_ps(load(q.as_ptr(), g), load(key(r), g), acc);
            }
            if rem > 0 {
                acc = _mm512_fmadd_ps(load_tail(q.as_ptr()), load_tail(key(r)), acc);
            }
            o[r] = hsum_zmm(acc) * scale;
        }
    }
}

/// For each of `N` heads (up to 8): `out_i += sum_j p_ij v_j` over the rows `v_j` of `v`, in
/// increasing `j` with one fused multiply-add per element, 32 outputs per head per pass (two
/// `zmm` each), so every value row is loaded once for all heads.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
pub(super) fn weighted_sum_avx512<const N: usize>(
    p: [&[f32]; N],
    v: &[f32],
    mut out: [&mut [f32]; N],
) {
    let hs = out[0].len();
    let rows = p[0].len();
    assert!(N <= 8 && hs > 0);
    assert!(p.iter().all(|p| p.len() == rows) && out.iter().all(|o| o.len() == hs));
    assert!(v.len() == rows * hs);
    let mut d0 = 0;
    while d0 < hs {
        let width = (hs - d0).min(32);
        let m0: __mmask16 = if width >= 16 {
            0xFFFF
        } else {
            ((1u32 << width) - 1) as __mmask16
        };
        let m1: __mmask16 = if width >= 32 {
            0xFFFF
        } else if width > 16 {
            ((1u32 << (width - 16)) - 1) as __mmask16
        } else {
            0
        };
        // SAFETY: lanes d0 .. d0 + width of each `out[i]` (hs values); masked-off lanes are not
        // read.
        let mut acc: [[__m512; 2]; N] = std::array::from_fn(|i| unsafe {
            let row = out[i].as_ptr().add(d0);
            [
                _mm512_maskz_loadu_ps(m0, row),
                _mm512_maskz_loadu_ps(m1, row.wrapping_add(16)),
            ]
        });
        for j in 0..rows {
            // SAFETY: lanes d0 .. d0 + width of row j < rows lie inside `v` (rows * hs values);
            // masked-off lanes are not read.
            let (v0, v1) = unsafe {
                let row = v.as_ptr().add(j * hs + d0);
                (
                    _mm512_maskz_loadu_ps(m0, row),
                    _mm512_maskz_loadu_ps(m1, row.wrapping_add(16)),
                )
            };
            for i in 0..N {
                // SAFETY: j < rows = p[i].len().
                let w = _mm512_set1_ps(unsafe { *p[i].get_unchecked(j) });
                acc[i][0] = _mm512_fmadd_ps(w, v0, acc[i][0]);
                acc[i][1] = _mm512_fmadd_ps(w, v1, acc[i][1]);
            }
        }
        for (o, a) in out.iter_mut().zip(&acc) {
            let dst = &mut o[d0..d0 + width];
            // SAFETY: `dst` holds `width` f32; masked-off lanes are not written.
            unsafe {
                _mm512_mask_storeu_ps(dst.as_mut_ptr(), m0, a[0]);
                _mm512_mask_storeu_ps(dst.as_mut_ptr().wrapping_add(16), m1, a[1]);
            }
        }
        d0 += width;
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
                unsafe { scores_avx512([&q[..]], &k, 0.3, [&mut got[..]]) };
                assert_bits(&got, &want, &format!("hs {hs} rows {rows}"));
                let (mut a, mut b, mut c, mut d) = (
                    vec![0f32; rows],
                    vec![0f32; rows],
                    vec![0f32; rows],
                    vec![0f32; rows],
                );
                let q2: Vec<f32> = q.iter().map(|v| -v).collect();
                // SAFETY: as above.
                unsafe {
                    scores_avx512(
                        [&q[..], &q2, &q, &q2],
                        &k,
                        0.3,
                        [&mut a[..], &mut b, &mut c, &mut d],
                    )
                };
                let want2: Vec<f32> = k.chunks(hs).map(|kr| dot16(&q2, kr) * 0.3).collect();
                assert_bits(&a, &want, "4 heads, head 0");
                assert_bits(&b, &want2, "4 heads, head 1");
                assert_bits(&c, &want, "4 heads, head 2");
                assert_bits(&d, &want2, "4 heads, head 3");
                let (mut a, mut b) = (vec![0f32; rows], vec![0f32; rows]);
                // SAFETY: as above.
                unsafe { scores_avx512([&q2[..], &q], &k, 0.3, [&mut a[..], &mut b]) };
                assert_bits(&a, &want2, "2 heads, head 0");
                assert_bits(&b, &want, "2 heads, head 1");
            }
        }
    }
}
