//! Linear layers against plain reference loops, on every instruction set and thread count.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::driver::linear_with;
use super::rows::pad_rows;
use super::*;
use crate::cpu::kernels::isa::Isa;
use crate::cpu::kernels::math::LANES;
use crate::cpu::kernels::testutil::{assert_bits, assert_close, rng, vec};
use crate::cpu::threads::{ThreadPool, split_bounds};
use crate::error::Error;

/// `x[m, k] · w[k, n] + bias` in f64.
fn reference(
    x: &[f32],
    m: usize,
    w_kn: &[f32],
    k: usize,
    n: usize,
    bias: Option<&[f32]>,
) -> Vec<f64> {
    let mut y = vec![0f64; m * n];
    for r in 0..m {
        for c in 0..n {
            let mut s = bias.map_or(0.0, |b| f64::from(b[c]));
            for i in 0..k {
                s += f64::from(x[r * k + i]) * f64::from(w_kn[i * n + c]);
            }
            y[r * n + c] = s;
        }
    }
    y
}

/// `sum |x| |w|` per output: the scale of f32 rounding error.
fn magnitude(x: &[f32], m: usize, w_kn: &[f32], k: usize, n: usize) -> Vec<f64> {
    let mut y = vec![0f64; m * n];
    for r in 0..m {
        for c in 0..n {
            y[r * n + c] = (0..k)
                .map(|i| f64::from((x[r * k + i] * w_kn[i * n + c]).abs()))
                .sum();
        }
    }
    y
}

/// Runs `w` on every instruction set with 1 and 3 threads, checks all results are bitwise equal,
/// that a batch equals row-by-row calls, and returns the result.
fn run_all(x: &[f32], m: usize, w: &Weight, bias: Option<&[f32]>) -> Vec<f32> {
    let pools = [ThreadPool::single(), ThreadPool::new(3).unwrap()];
    let mut first: Option<Vec<f32>> = None;
    for isa in Isa::available() {
        for pool in &pools {
            let mut y = vec![f32::NAN; m * w.n()];
            linear_with(isa, x, m, w, bias, &mut y, pool, 0).unwrap();
            match &first {
                None => first = Some(y),
                Some(f) => assert_bits(&y, f, &format!("{isa:?} with {} threads", pool.threads())),
            }
        }
    }
    let all = first.unwrap();
    if m > 1 {
        let isa = Isa::best();
        for r in 0..m {
            let mut y = vec![0f32; w.n()];
            linear_with(
                isa,
                &x[r * w.k()..(r + 1) * w.k()],
                1,
                w,
                bias,
                &mut y,
                &pools[0],
                0,
            )
            .unwrap();
            assert_bits(
                &y,
                &all[r * w.n()..(r + 1) * w.n()],
                &format!("row {r} alone vs batch"),
            );
        }
    }
    all
}

#[test]
fn dense_matches_reference_on_every_path() {
    let mut g = rng(1);
    for &(m, k, n) in &[
        (1, 1, 1),
        (1, 17, 5),
        (1, 64, 33),
        (3, 100, 9),
        (4, 100, 9),
        (6, 37, 20),
        (18, 48, 7),
        // Several k blocks of the prefill GEMM, a partial last panel.
        (5, 1000, 13),
        // Several row blocks and k blocks, row tiles of every height.
        (59, 4864, 12),
    ] {
        for with_bias in [false, true] {
            let x = vec(&mut g, m * k, 1.0);
            let w_kn = vec(&mut g, k * n, 1.0);
            let bias = with_bias.then(|| vec(&mut g, n, 1.0));
            let w = Weight::Dense(DenseWeight::from_f32(k, n, &w_kn).unwrap());
            let y = run_all(&x, m, &w, bias.as_deref());
            let want = reference(&x, m, &w_kn, k, n, bias.as_deref());
            let mag = magnitude(&x, m, &w_kn, k, n);
            assert_close(
                &y,
                &want,
                |i| 1e-6 * mag[i] + 1e-6,
                &format!("dense m{m} k{k} n{n}"),
            );
        }
    }
}

#[test]
fn dense_decode_gives_the_same_bits_however_the_columns_are_claimed() {
    // On one thread, part 0 runs first and then claims all of the other parts from the back:
    // every output must come out as when each part runs its own columns.
    let mut g = rng(7);
    let (k, n) = (70, 300);
    let x = vec(&mut g, k, 1.0);
    let w_kn = vec(&mut g, k * n, 1.0);
    let bias = vec(&mut g, n, 1.0);
    let dw = DenseWeight::from_f32(k, n, &w_kn).unwrap();
    let xp = pad_rows(&x, 1, k, dw.kp());
    let single = ThreadPool::single();
    let pool = ThreadPool::new(3).unwrap();
    for isa in Isa::available() {
        let mut want = vec![f32::NAN; n];
        dense::gemv_parallel(
            isa,
            &dw,
            xp.as_slice(),
            Some(&bias),
            &mut want,
            &single,
            &[0, n],
        );
        for parts in [2, 3, 7] {
            let bounds = split_bounds(n, parts, LANES);
            for p in [&single, &pool] {
                let mut y = vec![f32::NAN; n];
                dense::gemv_parallel(isa, &dw, xp.as_slice(), Some(&bias), &mut y, p, &bounds);
                assert_bits(&y, &want, &format!("{isa:?} {parts} parts"));
            }
        }
    }
}

#[test]
fn dense_half_formats_convert_exactly() {
    let mut g = rng(2);
    let (k, n) = (21, 6);
    let bits: Vec<u16> = (0..k * n)
        .map(|_| g.random_range(0x3000u16..0x4400))
        .collect();
    let f16: Vec<f32> = bits
        .iter()
        .map(|&b| half::f16::from_bits(b).to_f32())
        .collect();
    let bf16: Vec<f32> = bits
        .iter()
        .map(|&b| half::bf16::from_bits(b).to_f32())
        .collect();
    let x = vec(&mut g, k, 1.0);
    let pool = ThreadPool::single();
    for (w, as_f32) in [
        (DenseWeight::from_f16_bits(k, n, &bits).unwrap(), &f16),
        (DenseWeight::from_bf16_bits(k, n, &bits).unwrap(), &bf16),
    ] {
        let (mut a, mut b) = (vec![0f32; n], vec![0f32; n]);
        linear(&x, 1, &w.into(), None, &mut a, &pool).unwrap();
        let w2 = DenseWeight::from_f32(k, n, as_f32).unwrap();
        linear(&x, 1, &w2.into(), None, &mut b, &pool).unwrap();
        assert_bits(&a, &b, "half vs converted f32");
    }
}

#[test]
fn shape_errors_are_reported() {
    let pool = ThreadPool::single();
    let w: Weight = DenseWeight::from_f32(4, 3, &[0.0; 12]).unwrap().into();
    let mut y = vec![0f32; 3];
    assert!(matches!(
        linear(&[0.0; 5], 1, &w, None, &mut y, &pool),
        Err(Error::Length { what: "x", .. })
    ));
    assert!(matches!(
        linear(&[0.0; 4], 1, &w, None, &mut y[..2], &pool),
        Err(Error::Length { what: "y", .. })
    ));
    assert!(linear(&[0.0; 4], 1, &w, Some(&[0.0; 2]), &mut y, &pool).is_err());
    assert!(DenseWeight::from_f32(4, 3, &[0.0; 11]).is_err());
    assert!(Int4Weight::new(32, 2, 24, 0, &[0; 24], Scales::F32(&[1.0; 2]), None).is_err());
    assert!(Int4Weight::new(32, 2, 32, 5, &[0; 32], Scales::F32(&[1.0; 2]), None).is_err());
    assert!(Int4Weight::new(32, 2, 32, 0, &[0; 31], Scales::F32(&[1.0; 2]), None).is_err());
    assert!(Int4Weight::new(32, 2, 32, 0, &[0; 32], Scales::F32(&[1.0; 3]), None).is_err());
    let zp = Some(ZeroPoints::Packed4(&[0; 1]));
    assert!(Int4Weight::new(32, 2, 32, 0, &[0; 32], Scales::F32(&[1.0; 2]), zp).is_err());
}

/// A random MatMulNBits weight in ONNX layout, and its dequantized `[k, n]` f32 matrix.
struct Q4 {
    k: usize,
    n: usize,
    bs: usize,
    packed: Vec<u8>,
    scales: Vec<f32>,
    scales_f16: Vec<u16>,
    zp_packed: Vec<u8>,
    zp_vals: Vec<u8>,
    zp_float: Vec<f32>,
}

#[derive(Clone, Copy, Debug)]
enum ZpKind {
    None,
    Packed,
    Float,
}

impl Q4 {
    fn random(g: &mut ChaCha8Rng, k: usize, n: usize, bs: usize) -> Self {
        let nb = k.div_ceil(bs);
        let packed: Vec<u8> = (0..n * nb * bs / 2).map(|_| g.random()).collect();
        let scales_f16: Vec<u16> = (0..n * nb)
            .map(|_| half::f16::from_f32(g.random_range(0.001f32..0.05)).to_bits())
            .collect();
        // f16-representable f32 scales, so f16 and f32 inputs describe the same weight.
        let scales = scales_f16
            .iter()
            .map(|&b| half::f16::from_bits(b).to_f32())
            .collect();
        let zp_vals: Vec<u8> = (0..n * nb).map(|_| g.random_range(0..16)).collect();
        let per_col = nb.div_ceil(2);
        let mut zp_packed = vec![0u8; n * per_col];
        for c in 0..n {
            for b in 0..nb {
                zp_packed[c * per_col + b / 2] |= zp_vals[c * nb + b] << (4 * (b % 2));
            }
        }
        let zp_float = zp_vals.iter().map(|&z| f32::from(z) + 0.25).collect();
        Self {
            k,
            n,
            bs,
            packed,
            scales,
            scales_f16,
            zp_packed,
            zp_vals,
            zp_float,
        }
    }

    /// The 4-bit value at row `i` of column `c`, read from the ONNX layout as the spec says.
    fn q(&self, c: usize, i: usize) -> u8 {
        let nb = self.k.div_ceil(self.bs);
        let byte =
            self.packed[c * nb * self.bs / 2 + (i / self.bs) * self.bs / 2 + (i % self.bs) / 2];
        if i.is_multiple_of(2) {
            byte & 0x0F
        } else {
            byte >> 4
        }
    }

    fn zp(&self, kind: ZpKind, c: usize, b: usize) -> f32 {
        let nb = self.k.div_ceil(self.bs);
        match kind {
            ZpKind::None => 8.0,
            ZpKind::Packed => f32::from(self.zp_vals[c * nb + b]),
            ZpKind::Float => self.zp_float[c * nb + b],
        }
    }

    fn scale(&self, c: usize, b: usize) -> f32 {
        self.scales[c * self.k.div_ceil(self.bs) + b]
    }

    /// `(q - zp) * scale` as `[k, n]`.
    fn dequantized(&self, kind: ZpKind) -> Vec<f32> {
        let mut w = vec![0f32; self.k * self.n];
        for i in 0..self.k {
            for c in 0..self.n {
                let b = i / self.bs;
                w[i * self.n + c] =
                    (f32::from(self.q(c, i)) - self.zp(kind, c, b)) * self.scale(c, b);
            }
        }
        w
    }

    fn weight(&self, level: i64, kind: ZpKind, f16_scales: bool) -> Int4Weight {
        let scales = if f16_scales {
            Scales::F16Bits(&self.scales_f16)
        } else {
            Scales::F32(&self.scales)
        };
        let zp = match kind {
            ZpKind::None => None,
            ZpKind::Packed => Some(ZeroPoints::Packed4(&self.zp_packed)),
            ZpKind::Float => Some(ZeroPoints::F32(&self.zp_float)),
        };
        Int4Weight::new(self.k, self.n, self.bs, level, &self.packed, scales, zp).unwrap()
    }
}

/// The int8 reference: MLAS's activation quantization (written out independently here), then
/// `sum_blocks scale_a * scale_w * sum q_a (q_w - zp)` in f64. Also returns the per-output
/// magnitude `sum |scale_a * scale_w * q_a (q_w - zp)|`.
fn int8_reference(
    q4: &Q4,
    kind: ZpKind,
    x: &[f32],
    m: usize,
    bias: Option<&[f32]>,
) -> (Vec<f64>, Vec<f64>) {
    let (k, n, bs) = (q4.k, q4.n, q4.bs);
    let mut y = vec![0f64; m * n];
    let mut mag = vec![0f64; m * n];
    for r in 0..m {
        let row = &x[r * k..(r + 1) * k];
        for (b, xb) in row.chunks(bs).enumerate() {
            let amax = xb.iter().fold(0f32, |a, v| a.max(v.abs()));
            let sa = amax / 127.0;
            let inv = if amax == 0.0 { 0.0 } else { 127.0 / amax };
            let qa: Vec<i32> = xb
                .iter()
                .map(|v| (v * inv).round_ties_even() as i32)
                .collect();
            for c in 0..n {
                let z = q4.zp(kind, c, b) as i32;
                let dot: i64 = qa
                    .iter()
                    .enumerate()
                    .map(|(j, &a)| i64::from(a) * i64::from(i32::from(q4.q(c, b * bs + j)) - z))
                    .sum();
                let s = f64::from(sa * q4.scale(c, b));
                y[r * n + c] += s * dot as f64;
                mag[r * n + c] += (s * dot as f64).abs();
            }
        }
        if let Some(bias) = bias {
            for c in 0..n {
                y[r * n + c] += f64::from(bias[c]);
            }
        }
    }
    (y, mag)
}

#[test]
fn int4_f32_compute_equals_dense_over_dequantized_weights() {
    let mut g = rng(3);
    for bs in [16, 32, 64, 128, 256] {
        for &(m, k, n) in &[
            (1, bs, 1),
            (1, 3 * bs + 5, 7),
            (5, 2 * bs + 16, 6),
            (2, 300, 9),
        ] {
            for kind in [ZpKind::None, ZpKind::Packed, ZpKind::Float] {
                for f16_scales in [false, true] {
                    let q4 = Q4::random(&mut g, k, n, bs);
                    let x = vec(&mut g, m * k, 2.0);
                    let bias = vec(&mut g, n, 1.0);
                    let w = Weight::Int4(q4.weight(0, kind, f16_scales));
                    let y = run_all(&x, m, &w, Some(&bias));
                    let deq = q4.dequantized(kind);
                    let dense = Weight::Dense(DenseWeight::from_f32(k, n, &deq).unwrap());
                    let mut yd = vec![0f32; m * n];
                    linear(&x, m, &dense, Some(&bias), &mut yd, &ThreadPool::single()).unwrap();
                    let what = format!("bs {bs} m{m} k{k} n{n} {kind:?} f16 {f16_scales}");
                    assert_bits(&y, &yd, &what);
                    let want = reference(&x, m, &deq, k, n, Some(&bias));
                    let mag = magnitude(&x, m, &deq, k, n);
                    assert_close(&y, &want, |i| 1e-6 * mag[i] + 1e-6, &what);
                }
            }
        }
    }
}

#[test]
fn int4_int8_compute_matches_mlas_style_reference() {
    let mut g = rng(4);
    for bs in [16, 32, 64, 128, 256] {
        for &(m, k, n) in &[
            (1, bs, 1),
            (1, 3 * bs + 5, 7),
            (5, 2 * bs + 16, 6),
            (2, 300, 9),
            (1, 896, 4),
        ] {
            for kind in [ZpKind::None, ZpKind::Packed] {
                let q4 = Q4::random(&mut g, k, n, bs);
                let mut x = vec(&mut g, m * k, 2.0);
                x[0] = 0.0;
                let bias = vec(&mut g, n, 1.0);
                let w = q4.weight(4, kind, bs % 32 == 0);
                assert_eq!(w.compute(), Int4Compute::Int8);
                let y = run_all(&x, m, &Weight::Int4(w), Some(&bias));
                let what = format!("bs {bs} m{m} k{k} n{n} {kind:?}");
                // Same quantization as MLAS, exact integer dots: only f32 rounding of the sums.
                let (want, mag) = int8_reference(&q4, kind, &x, m, Some(&bias));
                assert_close(&y, &want, |i| 2e-6 * mag[i] + 1e-6, &what);
                // Against the f32 product: each activation moves by at most half its block's
                // quantization step, so |error| <= sum_k |w_k| * step(k) / 2.
                let deq = q4.dequantized(kind);
                let exact = reference(&x, m, &deq, k, n, Some(&bias));
                let bound: Vec<f64> = (0..m * n)
                    .map(|o| {
                        let (r, c) = (o / n, o % n);
                        (0..k)
                            .map(|i| {
                                let b0 = i / bs * bs;
                                let blk = &x[r * k + b0..r * k + (b0 + bs).min(k)];
                                let amax = blk.iter().fold(0f32, |a, v| a.max(v.abs()));
                                f64::from(deq[i * n + c].abs()) * f64::from(amax) / 254.0
                            })
                            .sum::<f64>()
                    })
                    .collect();
                assert_close(
                    &y,
                    &exact,
                    |i| bound[i] * 1.001 + 1e-5,
                    &format!("{what} vs f32"),
                );
            }
        }
    }
}

#[test]
fn int4_float_zero_points_compute_in_f32_even_at_level_4() {
    let mut g = rng(5);
    let q4 = Q4::random(&mut g, 70, 3, 32);
    let w = q4.weight(4, ZpKind::Float, false);
    assert_eq!(w.compute(), Int4Compute::Fp32);
    assert_eq!(
        q4.weight(3, ZpKind::None, false).compute(),
        Int4Compute::Fp32
    );
}

#[test]
fn int4_repack_keeps_every_value() {
    let mut g = rng(6);
    for bs in [16, 32, 64, 128, 256] {
        let q4 = Q4::random(&mut g, 2 * bs + 3, 3, bs);
        let w = q4.weight(0, ZpKind::None, false);
        for c in 0..3 {
            for i in 0..q4.k {
                assert_eq!(w.q(c, i), q4.q(c, i), "bs {bs} col {c} row {i}");
            }
        }
    }
}
