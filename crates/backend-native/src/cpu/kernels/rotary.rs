//! Rotary position embedding from cos/sin caches `[max_pos, rotary_dim / 2]`, as
//! GroupQueryAttention's `do_rotary` applies them.
//!
//! For each token and head, pair `(a, b)` — `(i, i + rotary_dim/2)` (non-interleaved, the
//! "rotate half" form) or `(2i, 2i + 1)` (interleaved) — becomes `(a cos - b sin, b cos + a sin)`
//! with `cos = cos_cache[pos, i]`. Dimensions from `rotary_dim` on are left untouched (partial
//! rotary). Plain multiplies and adds, like ONNX Runtime's kernel.

use crate::cpu::kernels::isa::{Body, Isa, dispatch};
use crate::error::{Error, invalid};

/// Rotates `x` (`[tokens, heads, head_size]`, `tokens = positions.len()`) in place.
pub fn rotary(
    x: &mut [f32],
    positions: &[usize],
    head_size: usize,
    cos: &[f32],
    sin: &[f32],
    rotary_dim: usize,
    interleaved: bool,
) -> Result<(), Error> {
    if head_size == 0 {
        return Err(invalid("head_size", "must be positive"));
    }
    if rotary_dim == 0 || !rotary_dim.is_multiple_of(2) || rotary_dim > head_size {
        return Err(invalid(
            "rotary_dim",
            format!("{rotary_dim} must be even, positive and <= head_size {head_size}"),
        ));
    }
    let half = rotary_dim / 2;
    if cos.len() != sin.len() || !cos.len().is_multiple_of(half) {
        return Err(invalid(
            "cos/sin",
            format!(
                "caches of {} and {} values are not [max_pos, {half}]",
                cos.len(),
                sin.len()
            ),
        ));
    }
    let max_pos = cos.len() / half;
    if let Some(&p) = positions.iter().find(|&&p| p >= max_pos) {
        return Err(invalid(
            "positions",
            format!("position {p} is past the cache's {max_pos} rows"),
        ));
    }
    let row = positions.len() * head_size;
    if (row == 0 && !x.is_empty()) || (row != 0 && !x.len().is_multiple_of(row)) {
        return Err(invalid(
            "x",
            format!(
                "length {} is not tokens {} x heads x {head_size}",
                x.len(),
                positions.len()
            ),
        ));
    }
    if row == 0 {
        return Ok(());
    }
    let heads = x.len() / row;
    dispatch(
        Isa::best(),
        Rotate {
            x,
            positions,
            heads,
            head_size,
            cos,
            sin,
            half,
            interleaved,
        },
    );
    Ok(())
}

struct Rotate<'a> {
    x: &'a mut [f32],
    positions: &'a [usize],
    heads: usize,
    head_size: usize,
    cos: &'a [f32],
    sin: &'a [f32],
    half: usize,
    interleaved: bool,
}

impl Body for Rotate<'_> {
    type Out = ();

    #[inline(always)]
    fn run(self) {
        let (half, hs) = (self.half, self.head_size);
        for (t, &pos) in self.positions.iter().enumerate() {
            let cos = &self.cos[pos * half..(pos + 1) * half];
            let sin = &self.sin[pos * half..(pos + 1) * half];
            let token = &mut self.x[t * self.heads * hs..(t + 1) * self.heads * hs];
            for head in token.chunks_exact_mut(hs) {
                if self.interleaved {
                    for ((pair, &c), &s) in head[..2 * half].chunks_exact_mut(2).zip(cos).zip(sin) {
                        let (a, b) = (pair[0], pair[1]);
                        pair[0] = a * c - b * s;
                        pair[1] = b * c + a * s;
                    }
                } else {
                    let (lo, hi) = head[..2 * half].split_at_mut(half);
                    for (((a, b), &c), &s) in lo.iter_mut().zip(hi.iter_mut()).zip(cos).zip(sin) {
                        let (va, vb) = (*a, *b);
                        *a = va * c - vb * s;
                        *b = vb * c + va * s;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::kernels::testutil::{assert_bits, rng, vec};

    /// Rotation by angle `pos * theta_i` written out with explicit index maps.
    fn reference(
        x: &[f32],
        pos: &[usize],
        hs: usize,
        cos: &[f32],
        sin: &[f32],
        rd: usize,
        inter: bool,
    ) -> Vec<f32> {
        let half = rd / 2;
        let heads = x.len() / (pos.len() * hs);
        let mut out = x.to_vec();
        for (t, &p) in pos.iter().enumerate() {
            for h in 0..heads {
                let base = (t * heads + h) * hs;
                for i in 0..half {
                    let (ia, ib) = if inter {
                        (2 * i, 2 * i + 1)
                    } else {
                        (i, i + half)
                    };
                    let (c, s) = (cos[p * half + i], sin[p * half + i]);
                    out[base + ia] = x[base + ia] * c - x[base + ib] * s;
                    out[base + ib] = x[base + ib] * c + x[base + ia] * s;
                }
            }
        }
        out
    }

    #[test]
    fn rotary_matches_reference() {
        let mut g = rng(20);
        for &(hs, rd) in &[(8, 8), (64, 64), (64, 32), (80, 24), (6, 2)] {
            for inter in [false, true] {
                let (tokens, heads, max_pos) = (3, 5, 50);
                let half = rd / 2;
                let angles: Vec<f32> = (0..max_pos * half)
                    .map(|j| (j / half) as f32 * 10000f32.powf(-((j % half) as f32) / half as f32))
                    .collect();
                let cos: Vec<f32> = angles.iter().map(|a| a.cos()).collect();
                let sin: Vec<f32> = angles.iter().map(|a| a.sin()).collect();
                let pos = [0usize, 17, 49];
                let x = vec(&mut g, tokens * heads * hs, 1.0);
                let mut got = x.clone();
                rotary(&mut got, &pos, hs, &cos, &sin, rd, inter).unwrap();
                let want = reference(&x, &pos, hs, &cos, &sin, rd, inter);
                assert_bits(&got, &want, &format!("hs {hs} rd {rd} interleaved {inter}"));
                for isa in Isa::available() {
                    let mut y = x.clone();
                    let heads = x.len() / (pos.len() * hs);
                    let body = Rotate {
                        x: &mut y,
                        positions: &pos,
                        heads,
                        head_size: hs,
                        cos: &cos,
                        sin: &sin,
                        half,
                        interleaved: inter,
                    };
                    dispatch(isa, body);
                    assert_bits(
                        &y,
                        &want,
                        &format!("{isa:?} hs {hs} rd {rd} interleaved {inter}"),
                    );
                }
                // Untouched tail and position 0 identity.
                assert_bits(&got[rd..hs], &x[rd..hs], "tail");
                assert_bits(&got[..hs], &x[..hs], "position 0");
            }
        }
    }

    #[test]
    fn rotary_errors() {
        let mut x = [0f32; 16];
        let cs = [1f32; 8]; // max_pos 2 for rotary_dim 8
        assert!(rotary(&mut x, &[0, 1], 8, &cs, &cs, 8, false).is_ok());
        assert!(
            rotary(&mut x, &[0, 2], 8, &cs, &cs, 8, false).is_err(),
            "position past cache"
        );
        assert!(
            rotary(&mut x, &[0, 1], 8, &cs, &cs, 3, false).is_err(),
            "odd rotary_dim"
        );
        assert!(
            rotary(&mut x, &[0, 1], 8, &cs, &cs, 10, false).is_err(),
            "rotary_dim > head_size"
        );
        assert!(
            rotary(&mut x[..15], &[0, 1], 8, &cs, &cs, 8, false).is_err(),
            "ragged x"
        );
        assert!(
            rotary(&mut x, &[0, 1], 8, &cs, &cs[..4], 8, false).is_err(),
            "cos/sin mismatch"
        );
    }
}
