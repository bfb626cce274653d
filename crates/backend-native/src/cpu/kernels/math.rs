//! Shared scalar math: the canonical 16-lane sum, a vectorisable `exp`, and `erf`.
//!
//! These functions are `#[inline(always)]` and use only IEEE-exact operations (`mul_add` is a
//! fused multiply-add), so every instruction-set build of a kernel that calls them gives the same
//! bits, and the hand-written x86 paths can reproduce them exactly.

/// Lanes every accumulating kernel uses: element `i` of a 16-aligned group goes to lane `i % 16`.
pub(crate) const LANES: usize = 16;

/// Sums 16 lanes in the canonical order shared by all paths:
/// `l[i] + l[i+8]`, then `+4`, then `+2`, then `+1`.
#[inline(always)]
pub(crate) fn hsum16(l: &[f32; LANES]) -> f32 {
    let mut s8 = [0f32; 8];
    for i in 0..8 {
        s8[i] = l[i] + l[i + 8];
    }
    let s4 = [s8[0] + s8[4], s8[1] + s8[5], s8[2] + s8[6], s8[3] + s8[7]];
    let s2 = [s4[0] + s4[2], s4[1] + s4[3]];
    s2[0] + s2[1]
}

/// Dot product of two equal-length slices with 16 lane accumulators and [`hsum16`]; the tail
/// (len % 16) is one more group zero padded (so every lane sees the same number of fused
/// multiply-adds as in a masked SIMD load).
#[inline(always)]
pub(crate) fn dot16(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut ac = a.chunks_exact(LANES);
    let mut bc = b.chunks_exact(LANES);
    for (x, y) in (&mut ac).zip(&mut bc) {
        for j in 0..LANES {
            acc[j] = x[j].mul_add(y[j], acc[j]);
        }
    }
    let (ar, br) = (ac.remainder(), bc.remainder());
    if !ar.is_empty() {
        for j in 0..LANES {
            let (x, y) = if j < ar.len() {
                (ar[j], br[j])
            } else {
                (0.0, 0.0)
            };
            acc[j] = x.mul_add(y, acc[j]);
        }
    }
    hsum16(&acc)
}

const LOG2E: f32 = std::f32::consts::LOG2_E;
/// ln 2 split so that `n * LN2_HI` is exact for |n| < 256 (16 significant bits).
const LN2_HI: f32 = 0.693_145_75;
const LN2_LO: f32 = 1.428_606_8e-6;
/// Inputs are clamped here so that `2^n` stays a normal float.
const EXP_MIN: f32 = -87.33;
const EXP_MAX: f32 = 88.37;

/// `e^x` to about 1 ulp for x in [-87.33, 88.37] (clamped outside): Cody-Waite reduction
/// `x = n ln2 + r`, a degree-7 Taylor polynomial in `r` (|r| <= 0.35, truncation < 6e-9
/// relative), then scaling by `2^n` through the exponent bits.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    let x = x.clamp(EXP_MIN, EXP_MAX);
    let n = (x * LOG2E).round_ties_even();
    let r = n.mul_add(-LN2_HI, x);
    let r = n.mul_add(-LN2_LO, r);
    let mut p: f32 = 1.0 / 5040.0;
    p = p.mul_add(r, 1.0 / 720.0);
    p = p.mul_add(r, 1.0 / 120.0);
    p = p.mul_add(r, 1.0 / 24.0);
    p = p.mul_add(r, 1.0 / 6.0);
    p = p.mul_add(r, 0.5);
    p = p.mul_add(r, 1.0);
    p = p.mul_add(r, 1.0);
    // 2^n from the exponent bits: n + 127 (in 1..=254) lands in the low mantissa bits of
    // 2^23 + n + 127, and the shift drops everything above them (vectorises, unlike a cast).
    let scale = f32::from_bits((n + 8_388_735.0).to_bits() << 23);
    p * scale
}

/// The error function, from Abramowitz & Stegun 7.1.26 evaluated in f64: absolute error below
/// 1.5e-7 over the whole line (ONNX Runtime's own `erf` is a different approximation of similar
/// accuracy, so neither is bit-exact to the other).
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let z = f64::from(x).abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * z);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let y = 1.0 - poly * (-z * z).exp();
    (if x < 0.0 { -y } else { y }) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_two_ulp() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x < 88.0 {
            let want = f64::from(x).exp();
            let got = f64::from(exp(x));
            let ulp = f64::from(f32::EPSILON) * want;
            worst = worst.max((got - want).abs() / ulp);
            x += 0.0137;
        }
        assert!(worst <= 2.0, "exp error {worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-1000.0), exp(EXP_MIN));
    }

    #[test]
    fn erf_matches_series() {
        // Maclaurin series in f64, fine for |x| <= 3.
        let series = |x: f64| {
            let mut term = x;
            let mut sum = x;
            for n in 1..200 {
                term *= -x * x / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        };
        let mut x = -3.0f32;
        while x <= 3.0 {
            let d = (f64::from(erf(x)) - series(f64::from(x))).abs();
            assert!(d < 2.5e-7, "erf({x}) off by {d}");
            x += 0.01;
        }
        assert!((erf(5.0) - 1.0).abs() < 1e-7);
    }

    #[test]
    fn hsum_and_dot() {
        let l: [f32; 16] = std::array::from_fn(|i| i as f32);
        assert_eq!(hsum16(&l), 120.0);
        let a: Vec<f32> = (0..37).map(|i| i as f32 * 0.5).collect();
        let want: f32 = a.iter().map(|v| v * v).sum();
        assert!((dot16(&a, &a) - want).abs() < 1e-3);
    }
}
