//! Row-wise normalisations over `[rows, hidden]`: RMS norm, layer norm, and their "skip" forms
//! (com.microsoft SkipSimplifiedLayerNormalization / SkipLayerNormalization).
//!
//! The formulas follow ONNX Runtime's CPU kernels: `denom = sqrt(mean(x^2) + eps)` (RMS) or
//! `sqrt(mean(x^2) - mean(x)^2 + eps)` (layer norm, one pass), then `y = x / denom * w` or
//! `(x - mean) / denom * w + b`. Sums use 16 lane accumulators and the canonical lane sum, so
//! they differ from ONNX Runtime's sequential sums only by rounding.

use crate::cpu::kernels::isa::{Body, Isa, dispatch};
use crate::cpu::kernels::math::{LANES, hsum16};
use crate::error::{Error, check_len, invalid};

/// `out = x / sqrt(mean(x^2) + eps) * weight`, per row; `hidden = weight.len()`.
pub fn rms_norm(x: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) -> Result<(), Error> {
    check_rows(x, weight)?;
    check_len("out", x.len(), out.len())?;
    dispatch(
        Isa::best(),
        Norm {
            x,
            skip: None,
            bias: None,
            weight,
            beta: None,
            eps,
            rms: true,
            out,
            sum: None,
        },
    );
    Ok(())
}

/// SkipSimplifiedLayerNormalization: `sum = x + skip (+ bias)` into `out_sum`, then
/// [`rms_norm`] of `sum` into `out_normed`.
pub fn skip_rms_norm(
    x: &[f32],
    skip: &[f32],
    bias: Option<&[f32]>,
    weight: &[f32],
    eps: f32,
    out_normed: &mut [f32],
    out_sum: &mut [f32],
) -> Result<(), Error> {
    check_skip(x, skip, bias, weight, None, out_normed, out_sum)?;
    let body = Norm {
        x,
        skip: Some(skip),
        bias,
        weight,
        beta: None,
        eps,
        rms: true,
        out: out_normed,
        sum: Some(out_sum),
    };
    dispatch(Isa::best(), body);
    Ok(())
}

/// `out = (x - mean) / sqrt(var + eps) * weight (+ bias)`, per row; `hidden = weight.len()`.
pub fn layer_norm(
    x: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    eps: f32,
    out: &mut [f32],
) -> Result<(), Error> {
    check_rows(x, weight)?;
    check_len("out", x.len(), out.len())?;
    if let Some(b) = bias {
        check_len("bias", weight.len(), b.len())?;
    }
    dispatch(
        Isa::best(),
        Norm {
            x,
            skip: None,
            bias: None,
            weight,
            beta: bias,
            eps,
            rms: false,
            out,
            sum: None,
        },
    );
    Ok(())
}

/// SkipLayerNormalization: `sum = x + skip (+ bias)` into `out_sum`, then [`layer_norm`] of
/// `sum` with `weight` (gamma) and `beta` into `out_normed`.
#[allow(clippy::too_many_arguments)]
pub fn skip_layer_norm(
    x: &[f32],
    skip: &[f32],
    bias: Option<&[f32]>,
    weight: &[f32],
    beta: Option<&[f32]>,
    eps: f32,
    out_normed: &mut [f32],
    out_sum: &mut [f32],
) -> Result<(), Error> {
    check_skip(x, skip, bias, weight, beta, out_normed, out_sum)?;
    let body = Norm {
        x,
        skip: Some(skip),
        bias,
        weight,
        beta,
        eps,
        rms: false,
        out: out_normed,
        sum: Some(out_sum),
    };
    dispatch(Isa::best(), body);
    Ok(())
}

fn check_rows(x: &[f32], weight: &[f32]) -> Result<(), Error> {
    if weight.is_empty() {
        return Err(invalid("weight", "hidden size must be positive"));
    }
    if !x.len().is_multiple_of(weight.len()) {
        return Err(invalid(
            "x",
            format!(
                "length {} is not a multiple of hidden {}",
                x.len(),
                weight.len()
            ),
        ));
    }
    Ok(())
}

fn check_skip(
    x: &[f32],
    skip: &[f32],
    bias: Option<&[f32]>,
    weight: &[f32],
    beta: Option<&[f32]>,
    out_normed: &[f32],
    out_sum: &[f32],
) -> Result<(), Error> {
    check_rows(x, weight)?;
    check_len("skip", x.len(), skip.len())?;
    check_len("out_normed", x.len(), out_normed.len())?;
    check_len("out_sum", x.len(), out_sum.len())?;
    if let Some(b) = bias {
        check_len("bias", weight.len(), b.len())?;
    }
    if let Some(b) = beta {
        check_len("beta", weight.len(), b.len())?;
    }
    Ok(())
}

/// All four norms; lengths checked by the callers.
struct Norm<'a> {
    x: &'a [f32],
    skip: Option<&'a [f32]>,
    bias: Option<&'a [f32]>,
    weight: &'a [f32],
    beta: Option<&'a [f32]>,
    eps: f32,
    rms: bool,
    out: &'a mut [f32],
    sum: Option<&'a mut [f32]>,
}

impl Body for Norm<'_> {
    type Out = ();

    #[inline(always)]
    fn run(self) {
        let h = self.weight.len();
        let mut sum = self.sum;
        for (r, (x, out)) in self.x.chunks(h).zip(self.out.chunks_mut(h)).enumerate() {
            // The row to normalise: x itself, or x + skip (+ bias) written to `sum`.
            let v: &[f32] = match (self.skip, sum.as_deref_mut()) {
                (Some(skip), Some(sum)) => {
                    let s = &mut sum[r * h..(r + 1) * h];
                    for ((s, &a), &b) in s.iter_mut().zip(x).zip(&skip[r * h..(r + 1) * h]) {
                        *s = a + b;
                    }
                    if let Some(bias) = self.bias {
                        for (s, &b) in s.iter_mut().zip(bias) {
                            *s += b;
                        }
                    }
                    s
                }
                _ => x,
            };
            let (mut s1, mut s2) = ([0f32; LANES], [0f32; LANES]);
            let mut groups = v.chunks_exact(LANES);
            for g in &mut groups {
                for j in 0..LANES {
                    s1[j] += g[j];
                    s2[j] += g[j] * g[j];
                }
            }
            for (j, &a) in groups.remainder().iter().enumerate() {
                s1[j] += a;
                s2[j] += a * a;
            }
            let n = h as f32;
            let mean = hsum16(&s1) / n;
            let mean_sq = hsum16(&s2) / n;
            if self.rms {
                let denom = (mean_sq + self.eps).sqrt();
                for ((o, &a), &w) in out.iter_mut().zip(v).zip(self.weight) {
                    *o = a / denom * w;
                }
            } else {
                let denom = (mean_sq - mean * mean + self.eps).sqrt();
                for ((o, &a), &w) in out.iter_mut().zip(v).zip(self.weight) {
                    *o = (a - mean) / denom * w;
                }
                if let Some(beta) = self.beta {
                    for (o, &b) in out.iter_mut().zip(beta) {
                        *o += b;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kernels::testutil::{assert_bits, assert_close, rng, vec};

    fn reference(x: &[f32], w: &[f32], b: Option<&[f32]>, eps: f32, rms: bool) -> Vec<f64> {
        let h = w.len();
        let mut out = Vec::new();
        for row in x.chunks(h) {
            let n = h as f64;
            let mean = row.iter().map(|&v| f64::from(v)).sum::<f64>() / n;
            let var = if rms {
                row.iter().map(|&v| f64::from(v).powi(2)).sum::<f64>() / n
            } else {
                row.iter()
                    .map(|&v| (f64::from(v) - mean).powi(2))
                    .sum::<f64>()
                    / n
            };
            let shift = if rms { 0.0 } else { mean };
            for (i, &v) in row.iter().enumerate() {
                let y = (f64::from(v) - shift) / (var + f64::from(eps)).sqrt() * f64::from(w[i]);
                out.push(y + b.map_or(0.0, |b| f64::from(b[i])));
            }
        }
        out
    }

    #[test]
    fn norms_match_reference_and_agree_across_isas() {
        let mut g = rng(10);
        for &(rows, h) in &[(1, 1), (3, 7), (2, 33), (4, 896)] {
            let x = vec(&mut g, rows * h, 3.0);
            let skip = vec(&mut g, rows * h, 1.0);
            let bias = vec(&mut g, h, 0.5);
            let w = vec(&mut g, h, 2.0);
            let beta = vec(&mut g, h, 1.0);
            let sum: Vec<f32> = (0..rows * h)
                .map(|i| x[i] + skip[i] + bias[i % h])
                .collect();
            let tol = |_| 2e-5;
            let mut got = vec![0f32; rows * h];
            rms_norm(&x, &w, 1e-6, &mut got).unwrap();
            assert_close(&got, &reference(&x, &w, None, 1e-6, true), tol, "rms");
            layer_norm(&x, &w, Some(&beta), 1e-5, &mut got).unwrap();
            assert_close(
                &got,
                &reference(&x, &w, Some(&beta), 1e-5, false),
                |_| 1e-4,
                "layer",
            );
            let mut s = vec![0f32; rows * h];
            skip_rms_norm(&x, &skip, Some(&bias), &w, 1e-6, &mut got, &mut s).unwrap();
            assert_bits(&s, &sum, "skip sum");
            assert_close(
                &got,
                &reference(&sum, &w, None, 1e-6, true),
                tol,
                "skip rms",
            );
            skip_layer_norm(
                &x,
                &skip,
                Some(&bias),
                &w,
                Some(&beta),
                1e-5,
                &mut got,
                &mut s,
            )
            .unwrap();
            assert_close(
                &got,
                &reference(&sum, &w, Some(&beta), 1e-5, false),
                |_| 1e-4,
                "skip layer",
            );
            let mut per_isa = Vec::new();
            for isa in Isa::available() {
                let mut o = vec![0f32; rows * h];
                let mut s = vec![0f32; rows * h];
                let body = Norm {
                    x: &x,
                    skip: Some(&skip),
                    bias: None,
                    weight: &w,
                    beta: Some(&beta),
                    eps: 1e-5,
                    rms: false,
                    out: &mut o,
                    sum: Some(&mut s),
                };
                dispatch(isa, body);
                per_isa.push(o);
            }
            for o in &per_isa[1..] {
                assert_bits(o, &per_isa[0], "isa");
            }
        }
    }

    #[test]
    fn norm_shape_errors() {
        let mut out = [0f32; 6];
        assert!(rms_norm(&[0.0; 6], &[1.0; 4], 1e-6, &mut out).is_err());
        assert!(rms_norm(&[0.0; 6], &[], 1e-6, &mut out).is_err());
        assert!(rms_norm(&[0.0; 6], &[1.0; 3], 1e-6, &mut out[..5]).is_err());
        let mut s = [0f32; 6];
        assert!(
            skip_rms_norm(
                &[0.0; 6], &[0.0; 5], None, &[1.0; 3], 1e-6, &mut out, &mut s
            )
            .is_err()
        );
        assert!(
            skip_layer_norm(
                &[0.0; 6],
                &[0.0; 6],
                None,
                &[1.0; 3],
                Some(&[0.0; 2]),
                1e-6,
                &mut out,
                &mut s
            )
            .is_err()
        );
    }
}
