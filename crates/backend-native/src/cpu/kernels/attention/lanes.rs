//! The per-head arithmetic of attention: scores of keys against queries, the softmax, and the
//! weighted sums of values, for up to eight heads that share a KV head (AVX-512 or portable).

use std::ops::Range;

#[cfg(target_arch = "x86_64")]
use super::x86;
use crate::cpu::kernels::isa::Isa;
use crate::cpu::kernels::math::{LANES, dot16, exp, hsum16};

/// Soft-caps the scores `s` and replaces them by the softmax weights
/// `p_j = exp(s_j - max) * (1 / sum_j exp(s_j - max))`.
#[inline(always)]
pub(super) fn softmax(softcap: Option<f32>, s: &mut [f32]) {
    if let Some(c) = softcap {
        for s in s.iter_mut() {
            *s = c * (*s / c).tanh();
        }
    }
    let max = s.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    for s in s.iter_mut() {
        *s = exp(*s - max);
    }
    let mut lanes = [0f32; LANES];
    let mut groups = s.chunks_exact(LANES);
    for g in &mut groups {
        for j in 0..LANES {
            lanes[j] += g[j];
        }
    }
    for (j, &e) in groups.remainder().iter().enumerate() {
        lanes[j] += e;
    }
    let inv = 1.0 / hsum16(&lanes);
    for s in s.iter_mut() {
        *s *= inv;
    }
}

/// `out_i += sum_j p_ij v_j` for the `n` heads whose weights are in `bufs` (slots of `span`,
/// positions `js` of them used, `v` holding those positions' rows), in increasing `j` with one
/// fused multiply-add per element.
#[inline(always)]
pub(super) fn weighted_sums(
    isa: Isa,
    bufs: &[f32],
    span: usize,
    js: Range<usize>,
    n: usize,
    v: &[f32],
    out: &mut [f32],
) {
    let hs = out.len() / n;
    #[cfg(target_arch = "x86_64")]
    if matches!(isa, Isa::Avx512 | Isa::Avx512Vnni) {
        let mut ps = bufs.chunks(span).map(|b| &b[js.clone()]);
        let mut outs = out.chunks_exact_mut(hs);
        macro_rules! go {
            ($n:literal) => {{
                let p: [&[f32]; $n] = std::array::from_fn(|_| ps.next().unwrap_or_default());
                let o: [&mut [f32]; $n] = std::array::from_fn(|_| outs.next().unwrap_or_default());
                // SAFETY: `isa` passed `isa::checked`: AVX-512 F/BW/VL, AVX2, FMA, F16C exist.
                unsafe { x86::weighted_sum_avx512(p, v, o) }
            }};
        }
        return match n {
            1 => go!(1),
            2 => go!(2),
            3 => go!(3),
            4 => go!(4),
            5 => go!(5),
            6 => go!(6),
            7 => go!(7),
            _ => go!(8),
        };
    }
    let _ = isa;
    for (pb, o) in bufs.chunks(span).zip(out.chunks_exact_mut(hs)).take(n) {
        weighted_sum(&pb[js.clone()], v, o);
    }
}

/// For each of `N` heads: `out[j] = scale * (q . k_j)` for the rows `k_j` of `k`.
#[inline(always)]
pub(super) fn scores<const N: usize>(
    isa: Isa,
    q: [&[f32]; N],
    k: &[f32],
    scale: f32,
    out: [&mut [f32]; N],
) {
    #[cfg(target_arch = "x86_64")]
    if matches!(isa, Isa::Avx512 | Isa::Avx512Vnni) {
        // SAFETY: `isa` passed `isa::checked`, so AVX-512 F/BW/VL, AVX2, FMA and F16C exist.
        return unsafe { x86::scores_avx512(q, k, scale, out) };
    }
    let _ = isa;
    for (q, out) in q.iter().zip(out) {
        for (s, kr) in out.iter_mut().zip(k.chunks_exact(q.len())) {
            *s = dot16(q, kr) * scale;
        }
    }
}

/// One head's `out += sum_j p_j v_j` (portable): 64 outputs at a time stay in registers.
#[inline(always)]
fn weighted_sum(p: &[f32], v: &[f32], out: &mut [f32]) {
    const BLOCK: usize = 64;
    let hs = out.len();
    let mut d0 = 0;
    while d0 + BLOCK <= hs {
        let mut acc: [f32; BLOCK] = std::array::from_fn(|d| out[d0 + d]);
        for (&w, vr) in p.iter().zip(v.chunks_exact(hs)) {
            let vb = &vr[d0..d0 + BLOCK];
            for d in 0..BLOCK {
                acc[d] = w.mul_add(vb[d], acc[d]);
            }
        }
        out[d0..d0 + BLOCK].copy_from_slice(&acc);
        d0 += BLOCK;
    }
    if d0 < hs {
        let tail = &mut out[d0..];
        for (&w, vr) in p.iter().zip(v.chunks_exact(hs)) {
            for (o, &x) in tail.iter_mut().zip(&vr[d0..]) {
                *o = w.mul_add(x, *o);
            }
        }
    }
}
