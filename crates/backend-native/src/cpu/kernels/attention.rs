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
    attention_with(
        Isa::best(),
        p,
        q,
        k_cache,
        v_cache,
        out,
        pool,
        MIN_WORK_PER_THREAD,
    )
}

/// Query-key dimension products below which attention is not split further across threads.
const MIN_WORK_PER_THREAD: usize = 1 << 17;

#[allow(clippy::too_many_arguments)]
pub(crate) fn attention_with(
    isa: Isa,
    p: &AttentionParams,
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    out: &mut [f32],
    pool: &ThreadPool,
    min_work: usize,
) -> Result<(), Error> {
    validate(p, q, k_cache, v_cache, out)?;
    let isa = isa::checked(isa);
    if p.new_tokens == 0 {
        return Ok(());
    }
    let hs = p.head_size;
    let span = p.window.map_or(p.past_len + p.new_tokens, |w| {
        w.min(p.past_len + p.new_tokens)
    });
    let work = p.num_heads * p.new_tokens * span * hs;
    let bounds = split_bounds(p.num_heads, pool.parts_for(work, min_work), 1);
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
                for buf in bufs.chunks_mut(span).take(n) {
                    softmax(p, &mut buf[..len]);
                }
                let out = &mut self.out[t][(h - self.heads.start) * hs..][..n * hs];
                weighted_sums(self.isa, &bufs, span, len, n, v, out);
                h += n;
            }
        }
    }
}

/// Heads sharing a KV head that are computed together, so each key and value row is loaded
/// once for all of them (8 x 32 f32 accumulators fit in AVX-512 registers).
const HEADS_TOGETHER: usize = 8;

/// Soft-caps the scores `s` and replaces them by the softmax weights
/// `p_j = exp(s_j - max) * (1 / sum_j exp(s_j - max))`.
#[inline(always)]
fn softmax(p: &AttentionParams, s: &mut [f32]) {
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
    let inv = 1.0 / hsum16(&lanes);
    for s in s.iter_mut() {
        *s *= inv;
    }
}

/// `out_i = sum_j p_ij v_j` for the `n` heads whose weights are in `bufs` (slots of `span`,
/// first `len` used), in increasing `j` with one fused multiply-add per element.
#[inline(always)]
fn weighted_sums(
    isa: Isa,
    bufs: &[f32],
    span: usize,
    len: usize,
    n: usize,
    v: &[f32],
    out: &mut [f32],
) {
    let hs = out.len() / n;
    #[cfg(target_arch = "x86_64")]
    if matches!(isa, Isa::Avx512 | Isa::Avx512Vnni) {
        let mut ps = bufs.chunks(span).map(|b| &b[..len]);
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
        weighted_sum(&pb[..len], v, o);
    }
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

/// One head's `out = sum_j p_j v_j` (portable): 64 outputs at a time stay in registers.
#[inline(always)]
fn weighted_sum(p: &[f32], v: &[f32], out: &mut [f32]) {
    const BLOCK: usize = 64;
    let hs = out.len();
    let mut d0 = 0;
    while d0 + BLOCK <= hs {
        let mut acc = [0f32; BLOCK];
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
        tail.fill(0.0);
        for (&w, vr) in p.iter().zip(v.chunks_exact(hs)) {
            for (o, &x) in tail.iter_mut().zip(&vr[d0..]) {
                *o = w.mul_add(x, *o);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;
