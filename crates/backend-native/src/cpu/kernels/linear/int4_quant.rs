//! Per-block int8 quantization of activations for accuracy level 4, as ONNX Runtime's MLAS does.
//!
//! MLAS (`QuantizeARow_CompInt8` for AVX2/AVX-512, read in onnxruntime/core/mlas/lib) quantizes
//! each row of A in blocks of `block_size` values along K: `amax = max |a|` over the block's
//! real values, `scale = amax / 127` (an f32 division), `inv = amax != 0 ? 127 / amax : 0` (one
//! division, not `1 / scale`), `q = round_half_even(a * inv)` as int8, and zeros past K. We do
//! the same, bit for bit, so the integer products match MLAS exactly; see `int4_scalar` for how
//! they are accumulated.
//!
//! The quantized row is stored in the weights' lane layout: per 128-value chunk, 64 bytes of
//! "low" values then 64 of "high" ones, byte `4i + j` of each half holding value `8i + j`
//! (low) or `8i + 4 + j` (high). Per 32-bit lane we also keep `sa_lane` (the scale of the lane's
//! block) and `qsum` (the sum of the lane's 8 quantized values, for the zero-point correction).

use super::int4::CHUNK;
use crate::cpu::kernels::aligned::Aligned;
use crate::cpu::kernels::isa::{Body, Isa, dispatch};

/// Lanes per chunk: 8 values each.
const LANES_PER_CHUNK: usize = CHUNK / 8;

/// `m` rows of quantized activations.
pub(crate) struct QuantAct {
    pub(crate) m: usize,
    kp: usize,
    q: Aligned<i8>,
    sa_lane: Vec<f32>,
    qsum: Vec<i32>,
}

impl QuantAct {
    /// Quantizes `x` (`[m, k]`) into blocks of `block_size`, padded to `kp` values per row.
    pub(crate) fn new(
        isa: Isa,
        x: &[f32],
        m: usize,
        k: usize,
        kp: usize,
        block_size: usize,
    ) -> Self {
        let lanes = kp / 8;
        let mut act = Self {
            m,
            kp,
            q: Aligned::zeroed(m * kp),
            sa_lane: vec![0.0; m * lanes],
            qsum: vec![0; m * lanes],
        };
        let mut natural = vec![0i8; kp];
        let mut block_scales = vec![0f32; kp / block_size];
        for r in 0..m {
            dispatch(
                isa,
                QuantizeRow {
                    x: &x[r * k..(r + 1) * k],
                    block_size,
                    q: &mut natural,
                    scales: &mut block_scales,
                },
            );
            let q = &mut act.q.as_mut_slice()[r * kp..(r + 1) * kp];
            let sa = &mut act.sa_lane[r * lanes..(r + 1) * lanes];
            let qs = &mut act.qsum[r * lanes..(r + 1) * lanes];
            for (lane, ((sa, qs), vals)) in sa.iter_mut().zip(qs).zip(natural.chunks(8)).enumerate()
            {
                let (chunk, i) = (lane / LANES_PER_CHUNK, lane % LANES_PER_CHUNK);
                let base = chunk * CHUNK;
                q[base + 4 * i..base + 4 * i + 4].copy_from_slice(&vals[..4]);
                q[base + 64 + 4 * i..base + 64 + 4 * i + 4].copy_from_slice(&vals[4..]);
                *qs = vals.iter().map(|&v| i32::from(v)).sum();
                *sa = block_scales[lane * 8 / block_size];
            }
        }
        act
    }

    /// Row `r`'s quantized values in lane layout (`kp` bytes).
    pub(crate) fn q(&self, r: usize) -> &[i8] {
        &self.q.as_slice()[r * self.kp..(r + 1) * self.kp]
    }

    /// Row `r`'s per-lane block scales (`kp / 8`).
    pub(crate) fn sa_lane(&self, r: usize) -> &[f32] {
        let l = self.kp / 8;
        &self.sa_lane[r * l..(r + 1) * l]
    }

    /// Row `r`'s per-lane sums of quantized values (`kp / 8`).
    pub(crate) fn qsum(&self, r: usize) -> &[i32] {
        let l = self.kp / 8;
        &self.qsum[r * l..(r + 1) * l]
    }
}

/// Quantizes one row in natural order: `q` (len `kp`, zero past `x.len()`) and one scale per
/// block (zero for blocks past K).
struct QuantizeRow<'a> {
    x: &'a [f32],
    block_size: usize,
    q: &'a mut [i8],
    scales: &'a mut [f32],
}

impl Body for QuantizeRow<'_> {
    type Out = ();

    #[inline(always)]
    fn run(self) {
        self.q.fill(0);
        self.scales.fill(0.0);
        for ((xb, qb), s) in self
            .x
            .chunks(self.block_size)
            .zip(self.q.chunks_mut(self.block_size))
            .zip(self.scales.iter_mut())
        {
            *s = quantize_block(xb, &mut qb[..xb.len()]);
        }
    }
}

/// MLAS's block quantization: returns the block scale, writes `q`.
#[inline(always)]
pub(crate) fn quantize_block(x: &[f32], q: &mut [i8]) -> f32 {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let scale = amax / 127.0;
    let inv = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    for (q, &v) in q.iter_mut().zip(x) {
        *q = (v * inv).round_ties_even() as i32 as i8;
    }
    scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_mlas_recipe() {
        // amax = 127 makes inv exactly 1, so the ties are exact: half-even rounding shows.
        let x = [2.5f32, -127.0, 3.5, 0.0, -2.5, 0.5, 1.5, 100.25];
        let mut q = [0i8; 8];
        let s = quantize_block(&x, &mut q);
        assert_eq!(s, 1.0);
        assert_eq!(q, [2, -127, 4, 0, -2, 0, 2, 100]);
        let mut z = [5i8; 3];
        assert_eq!(quantize_block(&[0.0; 3], &mut z), 0.0);
        assert_eq!(z, [0; 3]);
    }

    #[test]
    fn lane_layout_and_sums() {
        let k = 200;
        let x: Vec<f32> = (0..k).map(|i| (i as f32 - 90.0) / 7.0).collect();
        let a = QuantAct::new(Isa::Scalar, &x, 1, k, 256, 32);
        let (q, sa, qs) = (a.q(0), a.sa_lane(0), a.qsum(0));
        let mut natural = vec![0i8; 256];
        let mut scales = [0f32; 8];
        for (b, s) in scales.iter_mut().enumerate().take(7) {
            let end = ((b + 1) * 32).min(k);
            *s = quantize_block(&x[b * 32..end], &mut natural[b * 32..end]);
        }
        for (e, &want) in natural.iter().enumerate() {
            let (chunk, w) = (e / 128, e % 128);
            let (lane, j) = (w / 8, w % 8);
            let at = chunk * 128
                + if j < 4 {
                    4 * lane + j
                } else {
                    64 + 4 * lane + j - 4
                };
            assert_eq!(q[at], want, "value {e}");
        }
        for l in 0..32 {
            assert_eq!(sa[l], scales[l * 8 / 32]);
            let want: i32 = natural[l * 8..l * 8 + 8]
                .iter()
                .map(|&v| i32::from(v))
                .sum();
            assert_eq!(qs[l], want);
        }
    }
}
