//! Causal attention with grouped KV heads over a per-layer KV cache (batch 1), split over heads.
//!
//! The cache holds `[kv_heads, capacity, head_size]` for K and for V; the new tokens' keys and
//! values must already be written at positions `past_len..past_len + new_tokens`. Token `t`
//! (absolute position `p = past_len + t`) attends to positions `lo..=p`, `lo = p + 1 - window`
//! (clamped at 0) with a window, else 0. Head `h` reads KV head `h / (num_heads / num_kv_heads)`.
//!
//! Scores are `scale * (q . k)` (16-lane dot, canonical sum), optionally soft-capped to
//! `c * tanh(s / c)`, then a max-subtracted softmax in f32 (`exp(s - max)`, normalised by
//! multiplying with `1 / sum`), then `out = sum_j p_j v_j` accumulated in increasing `j`. Each
//! (token, head) is computed independently by the same instruction sequence, so prefill equals
//! token-by-token decode and any head split gives identical bits.
//!
//! ONNX Runtime's GroupQueryAttention `local_window_size = w` lets a token see `w + 1` positions
//! (itself and `w` before it): pass `window = Some(w + 1)` for the same mask.

use std::ops::Range;

use crate::cpu::kernels::isa::{self, Body, Isa, dispatch};
use crate::cpu::kernels::math::{LANES, dot16, exp, hsum16};
use crate::cpu::threads::{ThreadPool, split_bounds, split_columns};
use crate::error::{Error, check_len, invalid, mul};

/// Shape and options of one attention call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionParams {
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (divides `num_heads`).
    pub num_kv_heads: usize,
    /// Values per head.
    pub head_size: usize,
    /// Positions the cache has room for (its second dimension).
    pub capacity: usize,
    /// Positions already in the cache before this call's tokens.
    pub past_len: usize,
    /// Tokens in this call (1 for decode).
    pub new_tokens: usize,
    /// Score scale, usually `1 / sqrt(head_size)`.
    pub scale: f32,
    /// Local attention: attend to the last `window` positions (including the token itself).
    pub window: Option<usize>,
    /// Soft cap of the scores, `c * tanh(s / c)`.
    pub softcap: Option<f32>,
}

/// `out[t, h, :] = softmax(scale * q[t, h, :] . K[kv(h), lo..=p, :]) V[kv(h), lo..=p, :]`.
pub fn attention(
    p: &AttentionParams,
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    out: &mut [f32],
    pool: &ThreadPool,
) -> Result<(), Error> {
    attention_with(Isa::best(), p, q, k_cache, v_cache, out, pool)
}

pub(crate) fn attention_with(
    isa: Isa,
    p: &AttentionParams,
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    out: &mut [f32],
    pool: &ThreadPool,
) -> Result<(), Error> {
    validate(p, q, k_cache, v_cache, out)?;
    let isa = isa::checked(isa);
    if p.new_tokens == 0 {
        return Ok(());
    }
    let hs = p.head_size;
    let bounds = split_bounds(p.num_heads, pool.threads(), 1);
    let cols: Vec<usize> = bounds.iter().map(|b| b * hs).collect();
    let parts = split_columns(out, p.new_tokens, p.num_heads * hs, &cols);
    pool.run_each(parts, |i, out| {
        let heads = bounds[i]..bounds[i + 1];
        dispatch(
            isa,
            Heads {
                isa,
                p,
                q,
                k: k_cache,
                v: v_cache,
                heads,
                out,
            },
        );
    });
    Ok(())
}

fn validate(
    p: &AttentionParams,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    out: &[f32],
) -> Result<(), Error> {
    if p.num_heads == 0 || p.num_kv_heads == 0 || !p.num_heads.is_multiple_of(p.num_kv_heads) {
        return Err(invalid(
            "num_kv_heads",
            format!(
                "{} must be positive and divide num_heads {}",
                p.num_kv_heads, p.num_heads
            ),
        ));
    }
    if p.head_size == 0 {
        return Err(invalid("head_size", "must be positive"));
    }
    let total = p.past_len.checked_add(p.new_tokens);
    if total.is_none_or(|t| t > p.capacity) {
        return Err(invalid(
            "past_len",
            format!(
                "{} + {} new tokens exceed capacity {}",
                p.past_len, p.new_tokens, p.capacity
            ),
        ));
    }
    if p.window == Some(0) {
        return Err(invalid("window", "must be at least 1"));
    }
    if p.softcap.is_some_and(|c| !(c > 0.0 && c.is_finite())) || !p.scale.is_finite() {
        return Err(invalid(
            "softcap/scale",
            "softcap must be positive and finite, scale finite",
        ));
    }
    let qn = mul("q", mul("q", p.new_tokens, p.num_heads)?, p.head_size)?;
    let kvn = mul(
        "k_cache",
        mul("k_cache", p.num_kv_heads, p.capacity)?,
        p.head_size,
    )?;
    check_len("q", qn, q.len())?;
    check_len("out", qn, out.len())?;
    check_len("k_cache", kvn, k.len())?;
    check_len("v_cache", kvn, v.len())
}

/// One thread's heads; `out` holds, per token, the slice of those heads' outputs.
struct Heads<'a> {
    isa: Isa,
    p: &'a AttentionParams,
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    heads: Range<usize>,
    out: Vec<&'a mut [f32]>,
}

impl Body for Heads<'_> {
    type Out = ();

    #[inline(always)]
    fn run(mut self) {
        let p = self.p;
        let hs = p.head_size;
        let group = p.num_heads / p.num_kv_heads;
        let span = p.past_len + p.new_tokens;
        let mut bufs = vec![0f32; HEADS_TOGETHER * span];
        for t in 0..p.new_tokens {
            let pos = p.past_len + t;
            let lo = p.window.map_or(0, |w| (pos + 1).saturating_sub(w));
            let len = pos + 1 - lo;
            let mut h = self.heads.start;
            while h < self.heads.end {
                // Up to HEADS_TOGETHER consecutive heads reading the same KV head.
                let kv_head = h / group;
                let n = HEADS_TOGETHER
                    .min(self.heads.end - h)
                    .min((kv_head + 1) * group - h);
                let kv = kv_head * p.capacity * hs;
                let (k, v) = (
                    &self.k[kv + lo * hs..kv + (pos + 1) * hs],
                    &self.v[kv + lo * hs..kv + (pos + 1) * hs],
                );
                // Scores for a power-of-two number of heads (padding slots repeat the last head
                // and are ignored), then softmax and the weighted sum of V for the n real heads.
                let qv = |i: usize| &self.q[(t * p.num_heads + h + i.min(n - 1)) * hs..][..hs];
                let mut bs = bufs.chunks_mut(span).map(|b| &mut b[..len]);
                let mut next = || bs.next().unwrap_or_default();
                match n.next_power_of_two() {
                    1 => scores::<1>(self.isa, [qv(0)], k, p.scale, [next()]),
                    2 => scores::<2>(
                        self.isa,
                        std::array::from_fn(qv),
                        k,
                        p.scale,
                        std::array::from_fn(|_| next()),
                    ),
                    4 => scores::<4>(
                        self.isa,
                        std::array::from_fn(qv),
                        k,
                        p.scale,
                        std::array::from_fn(|_| next()),
                    ),
                    _ => scores::<8>(
                        self.isa,
                        std::array::from_fn(qv),
                        k,
                        p.scale,
                        std::array::from_fn(|_| next()),
                    ),
                }
                let mut invs = [0f32; HEADS_TOGETHER];
                for (buf, inv) in bufs.chunks_mut(span).zip(invs.iter_mut()).take(n) {
                    *inv = softmax(p, &mut buf[..len]);
                }
                let out = &mut self.out[t][(h - self.heads.start) * hs..][..n * hs];
                let mut es = bufs.chunks(span).map(|b| &b[..len]);
                let mut outs = out.chunks_exact_mut(hs);
                macro_rules! ws {
                    ($n:literal) => {
                        weighted_sum::<$n>(
                            std::array::from_fn(|_| es.next().unwrap_or_default()),
                            std::array::from_fn(|i| invs[i]),
                            v,
                            std::array::from_fn(|_| outs.next().unwrap_or_default()),
                        )
                    };
                }
                match n {
                    1 => ws!(1),
                    2 => ws!(2),
                    3 => ws!(3),
                    4 => ws!(4),
                    5 => ws!(5),
                    6 => ws!(6),
                    7 => ws!(7),
                    _ => ws!(8),
                }
                h += n;
            }
        }
    }
}

/// Heads sharing a KV head that are computed together, so each key and value row is loaded
/// once for all of them (8 x 32 f32 accumulators fit in AVX-512 registers).
const HEADS_TOGETHER: usize = 8;

/// Soft-caps the scores `s`, replaces them by `exp(s - max)`, and returns `1 / sum`.
#[inline(always)]
fn softmax(p: &AttentionParams, s: &mut [f32]) -> f32 {
    if let Some(c) = p.softcap {
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
    1.0 / hsum16(&lanes)
}

/// For each of `N` heads: `out[j] = scale * (q . k_j)` for the rows `k_j` of `k`.
#[inline(always)]
fn scores<const N: usize>(isa: Isa, q: [&[f32]; N], k: &[f32], scale: f32, out: [&mut [f32]; N]) {
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

/// For each of `N` heads: `out = sum_j (e_j * inv) v_j` in increasing `j`, one fused
/// multiply-add per element; 32 outputs per head stay in registers across `j`.
#[inline(always)]
fn weighted_sum<const N: usize>(
    e: [&[f32]; N],
    inv: [f32; N],
    v: &[f32],
    mut out: [&mut [f32]; N],
) {
    const BLOCK: usize = 32;
    let hs = out[0].len();
    let mut d0 = 0;
    while d0 < hs {
        let width = BLOCK.min(hs - d0);
        let mut acc = [[0f32; BLOCK]; N];
        for (j, vr) in v.chunks_exact(hs).enumerate() {
            let vb = &vr[d0..d0 + width];
            for i in 0..N {
                let w = e[i][j] * inv[i];
                if width == BLOCK {
                    for d in 0..BLOCK {
                        acc[i][d] = w.mul_add(vb[d], acc[i][d]);
                    }
                } else {
                    for (a, &x) in acc[i].iter_mut().zip(vb) {
                        *a = w.mul_add(x, *a);
                    }
                }
            }
        }
        for (o, a) in out.iter_mut().zip(&acc) {
            o[d0..d0 + width].copy_from_slice(&a[..width]);
        }
        d0 += width;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;
