//! Causal attention with grouped KV heads over a KV cache in blocks, for one or many sequences,
//! split over sequences and heads.
//!
//! The cache ([`KvBlocks`]) holds `[blocks][kv_heads][block_size][head_size]` for K and for V; a
//! sequence ([`SeqSpan`]) lists the blocks of its positions in order. The new tokens' keys and
//! values must already be written at positions `past_len..past_len + new_tokens`. Token `t`
//! (absolute position `p = past_len + t`) attends to positions `lo..=p`, `lo = p + 1 - window`
//! (clamped at 0) with a window, else 0. Head `h` reads KV head `h / (num_heads / num_kv_heads)`.
//! A contiguous cache `[kv_heads, capacity, head_size]` is one block of `capacity` positions
//! ([`attention`]).
//!
//! Scores are `scale * (q . k)` (16-lane dot, canonical sum), optionally soft-capped to
//! `c * tanh(s / c)`, then a max-subtracted softmax in f32 (`exp(s - max)`, normalised by
//! multiplying with `1 / sum`), then `out = sum_j p_j v_j` accumulated in increasing `j` (a
//! block boundary hands the running sums on unchanged). Each (token, head) is computed
//! independently by the same instruction sequence, so prefill equals token-by-token decode, a
//! sequence in a batch equals it alone, and any block size or split gives identical bits.
//!
//! ONNX Runtime's GroupQueryAttention `local_window_size = w` lets a token see `w + 1` positions
//! (itself and `w` before it): pass `window = Some(w + 1)` for the same mask.

use std::ops::Range;

use crate::cpu::kernels::isa::{self, Body, Isa, dispatch};
use crate::cpu::threads::{ThreadPool, split_bounds, split_columns};
use crate::error::{Error, check_len, invalid, mul};
use lanes::{scores, softmax, weighted_sums};

/// The heads and the score options of an attention layer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionHeads {
    /// Query heads.
    pub num_heads: usize,
    /// Key/value heads (divides `num_heads`).
    pub num_kv_heads: usize,
    /// Values per head.
    pub head_size: usize,
    /// Score scale, usually `1 / sqrt(head_size)`.
    pub scale: f32,
    /// Local attention: attend to the last `window` positions (including the token itself).
    pub window: Option<usize>,
    /// Soft cap of the scores, `c * tanh(s / c)`.
    pub softcap: Option<f32>,
}

/// One sequence over a contiguous cache `[kv_heads, capacity, head_size]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionParams {
    pub heads: AttentionHeads,
    /// Positions the cache has room for (its second dimension).
    pub capacity: usize,
    /// Positions already in the cache before this call's tokens.
    pub past_len: usize,
    /// Tokens in this call (1 for decode).
    pub new_tokens: usize,
}

/// A layer's keys and values in blocks: `[blocks][kv_heads][block_size][head_size]` each.
#[derive(Debug, Clone, Copy)]
pub struct KvBlocks<'a> {
    pub k: &'a [f32],
    pub v: &'a [f32],
    pub block_size: usize,
}

/// One sequence of a call: its blocks in position order, its cached and new positions. Its
/// queries (and outputs) are the next `new_tokens` rows after the previous sequence's.
#[derive(Debug, Clone, Copy)]
pub struct SeqSpan<'a> {
    pub blocks: &'a [usize],
    pub past_len: usize,
    pub new_tokens: usize,
}

/// `out[t, h, :] = softmax(scale * q[t, h, :] . K[kv(h), lo..=p, :]) V[kv(h), lo..=p, :]` over
/// a contiguous cache.
pub fn attention(
    p: &AttentionParams,
    q: &[f32],
    k_cache: &[f32],
    v_cache: &[f32],
    out: &mut [f32],
    pool: &ThreadPool,
) -> Result<(), Error> {
    let kv = KvBlocks {
        k: k_cache,
        v: v_cache,
        block_size: p.capacity,
    };
    let seq = SeqSpan {
        blocks: &[0],
        past_len: p.past_len,
        new_tokens: p.new_tokens,
    };
    if p.capacity == 0 || p.past_len.saturating_add(p.new_tokens) > p.capacity {
        return Err(invalid(
            "past_len",
            format!(
                "{} + {} new tokens exceed capacity {}",
                p.past_len, p.new_tokens, p.capacity
            ),
        ));
    }
    attention_blocks(&p.heads, &[seq], q, &kv, out, pool)
}

/// Attention of several sequences over one cache in blocks; `q` and `out` hold the sequences'
/// new rows one after another, `[sum of new_tokens, num_heads, head_size]`.
pub fn attention_blocks(
    heads: &AttentionHeads,
    seqs: &[SeqSpan<'_>],
    q: &[f32],
    kv: &KvBlocks<'_>,
    out: &mut [f32],
    pool: &ThreadPool,
) -> Result<(), Error> {
    attention_with(
        Isa::best(),
        heads,
        seqs,
        q,
        kv,
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
    heads: &AttentionHeads,
    seqs: &[SeqSpan<'_>],
    q: &[f32],
    kv: &KvBlocks<'_>,
    out: &mut [f32],
    pool: &ThreadPool,
    min_work: usize,
) -> Result<(), Error> {
    let rows = validate(heads, seqs, q, kv, out)?;
    let isa = isa::checked(isa);
    if rows == 0 {
        return Ok(());
    }
    let (hs, row) = (heads.head_size, heads.num_heads * heads.head_size);
    // Parts: each sequence's heads cut so that a part has at least `min_work`, and no sequence
    // in more parts than threads; with many sequences, each is one part; all on the calling
    // thread when the whole call is below `min_work`.
    let work = |s: &SeqSpan<'_>| {
        let span = heads.window.map_or(s.past_len + s.new_tokens, |w| {
            w.min(s.past_len + s.new_tokens)
        });
        heads.num_heads * s.new_tokens * span * hs
    };
    let threaded = pool.parts_for(seqs.iter().map(work).sum(), min_work) > 1;
    let mut tasks = Vec::new();
    let mut rest = out;
    let mut q_row = 0;
    for seq in seqs {
        let (mine, tail) = rest.split_at_mut(seq.new_tokens * row);
        rest = tail;
        if seq.new_tokens == 0 {
            continue;
        }
        let parts = if !threaded || seqs.len() >= pool.threads() {
            1
        } else {
            pool.parts_for(work(seq), min_work)
        };
        let bounds = split_bounds(heads.num_heads, parts, 1);
        let cols: Vec<usize> = bounds.iter().map(|b| b * hs).collect();
        for (i, out) in split_columns(mine, seq.new_tokens, row, &cols)
            .into_iter()
            .enumerate()
        {
            tasks.push((seq, q_row, bounds[i]..bounds[i + 1], out));
        }
        q_row += seq.new_tokens;
    }
    let run = |(seq, q_row, range, out): Task<'_>| {
        let q = &q[q_row * row..(q_row + seq.new_tokens) * row];
        dispatch(
            isa,
            Heads {
                isa,
                p: heads,
                seq,
                q,
                kv,
                heads: range,
                out,
            },
        );
    };
    if threaded {
        pool.run_each(tasks, |_, task| run(task));
    } else {
        tasks.into_iter().for_each(run);
    }
    Ok(())
}

/// One part of a call: a sequence, its first query row, some of its heads and their outputs.
type Task<'a> = (&'a SeqSpan<'a>, usize, Range<usize>, Vec<&'a mut [f32]>);

/// Checks the shapes; returns the number of query rows.
fn validate(
    p: &AttentionHeads,
    seqs: &[SeqSpan<'_>],
    q: &[f32],
    kv: &KvBlocks<'_>,
    out: &[f32],
) -> Result<usize, Error> {
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
    if kv.block_size == 0 {
        return Err(invalid("block_size", "must be positive"));
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
    let block = mul(
        "k_cache",
        mul("k_cache", p.num_kv_heads, kv.block_size)?,
        p.head_size,
    )?;
    if !kv.k.len().is_multiple_of(block) {
        return Err(invalid(
            "k_cache",
            format!("{} values are not whole blocks of {block}", kv.k.len()),
        ));
    }
    check_len("v_cache", kv.k.len(), kv.v.len())?;
    let blocks = kv.k.len() / block;
    let mut rows = 0usize;
    for seq in seqs {
        let total = seq.past_len.checked_add(seq.new_tokens);
        if total.is_none_or(|t| t > seq.blocks.len().saturating_mul(kv.block_size)) {
            return Err(invalid(
                "past_len",
                format!(
                    "{} + {} new tokens exceed the sequence's {} blocks of {}",
                    seq.past_len,
                    seq.new_tokens,
                    seq.blocks.len(),
                    kv.block_size
                ),
            ));
        }
        if let Some(&b) = seq.blocks.iter().find(|&&b| b >= blocks) {
            return Err(invalid(
                "blocks",
                format!("block {b} is outside the cache's {blocks}"),
            ));
        }
        rows = rows.saturating_add(seq.new_tokens);
    }
    let qn = mul("q", mul("q", rows, p.num_heads)?, p.head_size)?;
    check_len("q", qn, q.len())?;
    check_len("out", qn, out.len())?;
    Ok(rows)
}

/// One part: some heads of one sequence; `out` holds, per token, the slice of those heads'
/// outputs.
struct Heads<'a> {
    isa: Isa,
    p: &'a AttentionHeads,
    seq: &'a SeqSpan<'a>,
    q: &'a [f32],
    kv: &'a KvBlocks<'a>,
    heads: Range<usize>,
    out: Vec<&'a mut [f32]>,
}

/// The pieces of positions `lo..end` of KV head `kv_head` of `seq`, one per block.
fn pieces<'a>(
    p: &AttentionHeads,
    seq: &'a SeqSpan<'a>,
    kv: &'a KvBlocks<'a>,
    kv_head: usize,
    lo: usize,
    end: usize,
) -> impl Iterator<Item = Piece<'a>> {
    let (bs, hs, kv_heads) = (kv.block_size, p.head_size, p.num_kv_heads);
    let mut at = lo;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let (b, row) = (at / bs, at % bs);
        let stop = end.min((b + 1) * bs);
        let base = ((seq.blocks[b] * kv_heads + kv_head) * bs + row) * hs;
        let len = (stop - at) * hs;
        let piece = Piece {
            from: at - lo,
            k: &kv.k[base..base + len],
            v: &kv.v[base..base + len],
        };
        at = stop;
        Some(piece)
    })
}

/// Keys and values of consecutive positions in one block; `from` is the first one's index in
/// the token's span.
struct Piece<'a> {
    from: usize,
    k: &'a [f32],
    v: &'a [f32],
}

impl Body for Heads<'_> {
    type Out = ();

    #[inline(always)]
    fn run(self) {
        let Heads {
            isa,
            p,
            seq,
            q,
            kv,
            heads,
            mut out,
        } = self;
        let hs = p.head_size;
        let group = p.num_heads / p.num_kv_heads;
        let (past_len, new_tokens) = (seq.past_len, seq.new_tokens);
        let span = past_len + new_tokens;
        let mut bufs = vec![0f32; HEADS_TOGETHER * span];
        for t in 0..new_tokens {
            let pos = past_len + t;
            let lo = p.window.map_or(0, |w| (pos + 1).saturating_sub(w));
            let len = pos + 1 - lo;
            let mut h = heads.start;
            while h < heads.end {
                // Up to HEADS_TOGETHER consecutive heads reading the same KV head.
                let kv_head = h / group;
                let n = HEADS_TOGETHER
                    .min(heads.end - h)
                    .min((kv_head + 1) * group - h);
                // Scores for a power-of-two number of heads (padding slots repeat the last head
                // and are ignored), then softmax and the weighted sum of V for the n real heads.
                let qv = |i: usize| &q[(t * p.num_heads + h + i.min(n - 1)) * hs..][..hs];
                for piece in pieces(p, seq, kv, kv_head, lo, pos + 1) {
                    let rows = piece.k.len() / hs;
                    let mut bs = bufs
                        .chunks_mut(span)
                        .map(|b| &mut b[piece.from..piece.from + rows]);
                    let mut next = || bs.next().unwrap_or_default();
                    let k = piece.k;
                    match n.next_power_of_two() {
                        1 => scores::<1>(isa, [qv(0)], k, p.scale, [next()]),
                        2 => scores::<2>(
                            isa,
                            std::array::from_fn(qv),
                            k,
                            p.scale,
                            std::array::from_fn(|_| next()),
                        ),
                        4 => scores::<4>(
                            isa,
                            std::array::from_fn(qv),
                            k,
                            p.scale,
                            std::array::from_fn(|_| next()),
                        ),
                        _ => scores::<8>(
                            isa,
                            std::array::from_fn(qv),
                            k,
                            p.scale,
                            std::array::from_fn(|_| next()),
                        ),
                    }
                }
                for buf in bufs.chunks_mut(span).take(n) {
                    softmax(p.softcap, &mut buf[..len]);
                }
                let dst = &mut out[t][(h - heads.start) * hs..][..n * hs];
                dst.fill(0.0);
                for piece in pieces(p, seq, kv, kv_head, lo, pos + 1) {
                    let rows = piece.v.len() / hs;
                    weighted_sums(
                        isa,
                        &bufs,
                        span,
                        piece.from..piece.from + rows,
                        n,
                        piece.v,
                        dst,
                    );
                }
                h += n;
            }
        }
    }
}

/// Heads sharing a KV head that are computed together, so each key and value row is loaded
/// once for all of them (8 x 32 f32 accumulators fit in AVX-512 registers).
const HEADS_TOGETHER: usize = 8;

mod lanes;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;
