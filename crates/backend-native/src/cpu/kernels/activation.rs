//! Element-wise activations and small helpers: SiLU, SwiGLU, GELU (erf and tanh forms),
//! soft-capping, residual add, argmax.
//!
//! SiLU is `x / (1 + exp(-x))` with the shared vectorised `exp` (about 1 ulp); GELU is ONNX's
//! `0.5 x (1 + erf(x / sqrt 2))` with an erf accurate to 1.5e-7; the tanh form (FastGelu) is
//! computed through the identity `0.5 (1 + tanh u) = 1 / (1 + exp(-2u))`.

use crate::cpu::kernels::isa::{Body, Isa, dispatch};
use crate::cpu::kernels::math::{erf, exp};
use crate::error::{Error, check_len, invalid};

/// Which element-wise function to apply.
#[derive(Clone, Copy)]
enum Op {
    Silu,
    Gelu,
    GeluTanh,
    Softcap(f32),
}

#[inline(always)]
fn apply(op: Op, x: f32) -> f32 {
    match op {
        Op::Silu => x / (1.0 + exp(-x)),
        Op::Gelu => 0.5 * x * (1.0 + erf(x * std::f32::consts::FRAC_1_SQRT_2)),
        Op::GeluTanh => {
            // sqrt(2 / pi) * (x + 0.044715 x^3)
            let u = 0.797_884_6 * (x + 0.044_715 * x * x * x);
            x / (1.0 + exp(-2.0 * u))
        }
        Op::Softcap(c) => c * (x / c).tanh(),
    }
}

struct Map<'a> {
    op: Op,
    x: &'a mut [f32],
}

impl Body for Map<'_> {
    type Out = ();

    #[inline(always)]
    fn run(self) {
        // One match per call, so each arm's loop is vectorised on its own.
        match self.op {
            Op::Silu => self.x.iter_mut().for_each(|v| *v = apply(Op::Silu, *v)),
            Op::Gelu => self.x.iter_mut().for_each(|v| *v = apply(Op::Gelu, *v)),
            Op::GeluTanh => self.x.iter_mut().for_each(|v| *v = apply(Op::GeluTanh, *v)),
            op @ Op::Softcap(_) => self.x.iter_mut().for_each(|v| *v = apply(op, *v)),
        }
    }
}

struct SiluMul<'a> {
    gate: &'a [f32],
    up: &'a [f32],
    out: &'a mut [f32],
}

impl Body for SiluMul<'_> {
    type Out = ();

    #[inline(always)]
    fn run(self) {
        for ((o, &g), &u) in self.out.iter_mut().zip(self.gate).zip(self.up) {
            *o = apply(Op::Silu, g) * u;
        }
    }
}

/// `x = x * sigmoid(x)` in place.
pub fn silu(x: &mut [f32]) {
    dispatch(Isa::best(), Map { op: Op::Silu, x });
}

/// SwiGLU: `out = silu(gate) * up`.
pub fn silu_mul(gate: &[f32], up: &[f32], out: &mut [f32]) -> Result<(), Error> {
    check_len("up", gate.len(), up.len())?;
    check_len("out", gate.len(), out.len())?;
    dispatch(Isa::best(), SiluMul { gate, up, out });
    Ok(())
}

/// ONNX Gelu (erf form) in place.
pub fn gelu(x: &mut [f32]) {
    dispatch(Isa::best(), Map { op: Op::Gelu, x });
}

/// FastGelu / Gelu with `approximate = "tanh"` in place.
pub fn gelu_tanh(x: &mut [f32]) {
    dispatch(
        Isa::best(),
        Map {
            op: Op::GeluTanh,
            x,
        },
    );
}

/// `x = cap * tanh(x / cap)` in place (Gemma-2 style logit soft-capping); `cap` must be positive.
pub fn softcap(x: &mut [f32], cap: f32) -> Result<(), Error> {
    if !(cap > 0.0 && cap.is_finite()) {
        return Err(invalid("cap", format!("{cap} must be positive and finite")));
    }
    dispatch(
        Isa::best(),
        Map {
            op: Op::Softcap(cap),
            x,
        },
    );
    Ok(())
}

/// `x += y` element-wise.
pub fn add_in_place(x: &mut [f32], y: &[f32]) -> Result<(), Error> {
    check_len("y", x.len(), y.len())?;
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
    Ok(())
}

/// Index of the largest value (the first one on ties; NaNs are skipped); `None` when empty or
/// all NaN.
pub fn argmax(x: &[f32]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in x.iter().enumerate() {
        if !v.is_nan() && best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kernels::testutil::{assert_bits, assert_close, rng, vec};

    fn erf64(x: f64) -> f64 {
        // Maclaurin series for |x| <= 3, continued fraction for erfc beyond.
        if x.abs() <= 3.0 {
            let (mut term, mut sum) = (x, x);
            for n in 1..200 {
                term *= -x * x / n as f64;
                sum += term / (2 * n + 1) as f64;
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            let z = x.abs();
            let mut f = 0.0;
            for n in (1..60).rev() {
                f = (n as f64 / 2.0) / (z + f);
            }
            let erfc = (-z * z).exp() / std::f64::consts::PI.sqrt() / (z + f);
            x.signum() * (1.0 - erfc)
        }
    }

    #[test]
    fn activations_match_reference() {
        let mut g = rng(40);
        let mut x = vec(&mut g, 1000, 8.0);
        x.extend([0.0, -0.0, 1e-8, -1e-8, 20.0, -20.0, 90.0, -90.0]);
        let x64: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
        let rel = |w: &[f64]| -> Vec<f64> { w.iter().map(|v| 3e-7 * v.abs() + 2e-7).collect() };

        let want: Vec<f64> = x64.iter().map(|&v| v / (1.0 + (-v).exp())).collect();
        let mut y = x.clone();
        silu(&mut y);
        let tol = rel(&want);
        assert_close(&y, &want, |i| tol[i], "silu");

        let want: Vec<f64> = x64
            .iter()
            .map(|&v| 0.5 * v * (1.0 + erf64(v / 2f64.sqrt())))
            .collect();
        let mut y = x.clone();
        gelu(&mut y);
        let tol: Vec<f64> = x64
            .iter()
            .zip(&want)
            .map(|(v, w)| 3e-7 * w.abs() + 1.5e-7 * v.abs())
            .collect();
        assert_close(&y, &want, |i| tol[i], "gelu");

        let c = (2.0 / std::f64::consts::PI).sqrt();
        let want: Vec<f64> = x64
            .iter()
            .map(|&v| 0.5 * v * (1.0 + (c * (v + 0.044715 * v * v * v)).tanh()))
            .collect();
        let mut y = x.clone();
        gelu_tanh(&mut y);
        let tol = rel(&want);
        assert_close(&y, &want, |i| tol[i], "gelu_tanh");

        let want: Vec<f64> = x64.iter().map(|&v| 30.0 * (v / 30.0).tanh()).collect();
        let mut y = x.clone();
        softcap(&mut y, 30.0).unwrap();
        let tol = rel(&want);
        assert_close(&y, &want, |i| tol[i], "softcap");
        assert!(softcap(&mut y, 0.0).is_err());

        let up = vec(&mut g, x.len(), 2.0);
        let want: Vec<f64> = x64
            .iter()
            .zip(&up)
            .map(|(&v, &u)| v / (1.0 + (-v).exp()) * f64::from(u))
            .collect();
        let mut y = vec![0f32; x.len()];
        silu_mul(&x, &up, &mut y).unwrap();
        let tol = rel(&want);
        assert_close(&y, &want, |i| tol[i], "silu_mul");
        assert!(silu_mul(&x, &up[1..], &mut y).is_err());
    }

    #[test]
    fn activations_agree_across_isas() {
        let mut g = rng(41);
        let x = vec(&mut g, 333, 10.0);
        for op in [Op::Silu, Op::Gelu, Op::GeluTanh, Op::Softcap(7.0)] {
            let mut base = x.clone();
            dispatch(Isa::Scalar, Map { op, x: &mut base });
            for isa in Isa::available() {
                let mut y = x.clone();
                dispatch(isa, Map { op, x: &mut y });
                assert_bits(&y, &base, &format!("{isa:?}"));
            }
        }
    }

    #[test]
    fn helpers() {
        let mut a = [1.0f32, 2.0];
        add_in_place(&mut a, &[0.5, -1.0]).unwrap();
        assert_eq!(a, [1.5, 1.0]);
        assert!(add_in_place(&mut a, &[1.0]).is_err());
        assert_eq!(argmax(&[1.0, 3.0, f32::NAN, 3.0, -1.0]), Some(1));
        assert_eq!(argmax(&[]), None);
        assert_eq!(argmax(&[f32::NAN]), None);
    }
}
