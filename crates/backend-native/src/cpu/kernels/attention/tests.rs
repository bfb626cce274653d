//! Attention against a naive softmax(QK^T)V with the GQA head mapping.

use super::*;
use crate::cpu::kernels::testutil::{assert_bits, assert_close, rng, vec};

/// Naive f64 attention: every (token, head) from scratch with explicit masks.
fn reference(a: &AttentionParams, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f64> {
    let p = Flat::of(a);
    let hs = p.head_size;
    let mut out = vec![0f64; p.new_tokens * p.num_heads * hs];
    for t in 0..p.new_tokens {
        for h in 0..p.num_heads {
            let kvh = h / (p.num_heads / p.num_kv_heads);
            let pos = p.past_len + t;
            let allowed = |j: usize| j <= pos && p.window.is_none_or(|w| pos - j < w);
            let qv = &q[(t * p.num_heads + h) * hs..][..hs];
            let mut scores = Vec::new();
            for j in (0..p.capacity).filter(|&j| allowed(j)) {
                let kr = &k[(kvh * p.capacity + j) * hs..][..hs];
                let mut s: f64 = qv
                    .iter()
                    .zip(kr)
                    .map(|(a, b)| f64::from(*a) * f64::from(*b))
                    .sum();
                s *= f64::from(p.scale);
                if let Some(c) = p.softcap {
                    s = f64::from(c) * (s / f64::from(c)).tanh();
                }
                scores.push((j, s));
            }
            let max = scores.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
            let total: f64 = scores.iter().map(|s| (s.1 - max).exp()).sum();
            for (j, s) in scores {
                let w = (s - max).exp() / total;
                for d in 0..hs {
                    out[(t * p.num_heads + h) * hs + d] +=
                        w * f64::from(v[(kvh * p.capacity + j) * hs + d]);
                }
            }
        }
    }
    out
}

/// Every field of a call in one place, for the reference.
struct Flat {
    num_heads: usize,
    num_kv_heads: usize,
    head_size: usize,
    capacity: usize,
    past_len: usize,
    new_tokens: usize,
    scale: f32,
    window: Option<usize>,
    softcap: Option<f32>,
}

impl Flat {
    fn of(p: &AttentionParams) -> Flat {
        let h = p.heads;
        Flat {
            num_heads: h.num_heads,
            num_kv_heads: h.num_kv_heads,
            head_size: h.head_size,
            capacity: p.capacity,
            past_len: p.past_len,
            new_tokens: p.new_tokens,
            scale: h.scale,
            window: h.window,
            softcap: h.softcap,
        }
    }
}

fn params(
    heads: usize,
    kv: usize,
    hs: usize,
    cap: usize,
    past: usize,
    new: usize,
) -> AttentionParams {
    AttentionParams {
        heads: AttentionHeads {
            num_heads: heads,
            num_kv_heads: kv,
            head_size: hs,
            scale: 1.0 / (hs as f32).sqrt(),
            window: None,
            softcap: None,
        },
        capacity: cap,
        past_len: past,
        new_tokens: new,
    }
}

/// Runs on every ISA and with 1 and 3 threads; all must agree bitwise.
fn run_all(p: &AttentionParams, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f32> {
    let pools = [ThreadPool::single(), ThreadPool::new(3).unwrap()];
    let mut first: Option<Vec<f32>> = None;
    for isa in Isa::available() {
        for pool in &pools {
            let mut out = vec![f32::NAN; q.len()];
            let kv = KvBlocks {
                k,
                v,
                block_size: p.capacity,
            };
            let seq = SeqSpan {
                blocks: &[0],
                past_len: p.past_len,
                new_tokens: p.new_tokens,
            };
            attention_with(isa, &p.heads, &[seq], q, &kv, &mut out, pool, 0).unwrap();
            match &first {
                None => first = Some(out),
                Some(f) => assert_bits(&out, f, &format!("{isa:?}, {} threads", pool.threads())),
            }
        }
    }
    first.unwrap()
}

#[test]
fn attention_matches_naive_reference() {
    let mut g = rng(30);
    let cases = [
        // heads, kv, head, capacity, past, new, window, softcap
        (1, 1, 8, 4, 0, 1, None, None),
        (4, 2, 16, 40, 0, 7, None, None),
        (14, 2, 64, 200, 130, 1, None, None),
        (6, 3, 24, 64, 20, 5, Some(8), None),
        (4, 1, 33, 50, 9, 3, Some(1), Some(5.0)),
        (8, 8, 64, 300, 270, 2, Some(100), Some(30.0)),
    ];
    for (heads, kv, hs, cap, past, new, window, softcap) in cases {
        let mut p = params(heads, kv, hs, cap, past, new);
        p.heads.window = window;
        p.heads.softcap = softcap;
        let q = vec(&mut g, new * heads * hs, 2.0);
        let k = vec(&mut g, kv * cap * hs, 2.0);
        let v = vec(&mut g, kv * cap * hs, 1.0);
        let got = run_all(&p, &q, &k, &v);
        let want = reference(&p, &q, &k, &v);
        assert_close(&got, &want, |_| 2e-5, &format!("{p:?}"));
    }
}

#[test]
fn prefill_equals_token_by_token_decode() {
    let mut g = rng(31);
    for window in [None, Some(5)] {
        let (heads, kv, hs, cap, n) = (6, 2, 32, 24, 11);
        let q = vec(&mut g, n * heads * hs, 2.0);
        let k = vec(&mut g, kv * cap * hs, 2.0);
        let v = vec(&mut g, kv * cap * hs, 1.0);
        let pool = ThreadPool::single();
        let mut p = params(heads, kv, hs, cap, 0, n);
        p.heads.window = window;
        let mut prefill = vec![0f32; q.len()];
        attention(&p, &q, &k, &v, &mut prefill, &pool).unwrap();
        let row = heads * hs;
        for t in 0..n {
            let step = AttentionParams {
                past_len: t,
                new_tokens: 1,
                ..p
            };
            let mut out = vec![0f32; row];
            attention(&step, &q[t * row..(t + 1) * row], &k, &v, &mut out, &pool).unwrap();
            assert_bits(
                &out,
                &prefill[t * row..(t + 1) * row],
                &format!("token {t} window {window:?}"),
            );
        }
    }
}

#[test]
fn attention_errors() {
    let pool = ThreadPool::single();
    let p = params(4, 2, 8, 10, 9, 1);
    let (q, kv) = (vec![0f32; 32], vec![0f32; 160]);
    let mut out = vec![0f32; 32];
    assert!(attention(&p, &q, &kv, &kv, &mut out, &pool).is_ok());
    let bad = [
        AttentionParams { past_len: 10, ..p },
        AttentionParams {
            heads: AttentionHeads {
                num_kv_heads: 3,
                ..p.heads
            },
            ..p
        },
        AttentionParams {
            heads: AttentionHeads {
                window: Some(0),
                ..p.heads
            },
            ..p
        },
        AttentionParams {
            heads: AttentionHeads {
                softcap: Some(-1.0),
                ..p.heads
            },
            ..p
        },
        AttentionParams { capacity: 11, ..p },
    ];
    for b in bad {
        assert!(
            attention(&b, &q, &kv, &kv, &mut out, &pool).is_err(),
            "{b:?}"
        );
    }
    assert!(attention(&p, &q[..31], &kv, &kv, &mut out, &pool).is_err());
}

/// Copies sequence `s`'s contiguous cache `[kv, cap, hs]` into blocks of `bs` at the block ids
/// `table` of a cache of `total` blocks (others filled with NaN, so a wrong read shows).
fn to_blocks(
    c: &[f32],
    kv: usize,
    cap: usize,
    hs: usize,
    bs: usize,
    table: &[usize],
    dst: &mut [f32],
) {
    for h in 0..kv {
        for pos in 0..cap.min(table.len() * bs) {
            let src = (h * cap + pos) * hs;
            let at = ((table[pos / bs] * kv + h) * bs + pos % bs) * hs;
            dst[at..at + hs].copy_from_slice(&c[src..src + hs]);
        }
    }
}

#[test]
fn sequences_in_blocks_give_the_bits_of_each_alone() {
    let mut g = rng(32);
    let (heads, kv, hs) = (6, 2, 40);
    for (bs, window) in [(1, None), (5, None), (16, Some(7)), (64, None)] {
        // (past, new) of three sequences: a prompt chunk, two decode rows.
        let shapes = [(0usize, 9usize), (37, 1), (12, 1)];
        let cap: usize = 48;
        let blocks_each = cap.div_ceil(bs);
        let total = blocks_each * shapes.len() + 3;
        // Block ids handed out in a scrambled order.
        let mut ids: Vec<usize> = (0..total).collect();
        ids.reverse();
        ids.swap(0, total / 2);
        let mut kc = vec![f32::NAN; total * kv * bs * hs];
        let mut vc = vec![f32::NAN; total * kv * bs * hs];
        let pool = ThreadPool::new(3).unwrap();
        let (mut q_all, mut want, mut tables) = (Vec::new(), Vec::new(), Vec::new());
        for (i, &(past, new)) in shapes.iter().enumerate() {
            let mut p = params(heads, kv, hs, cap, past, new);
            p.heads.window = window;
            let q = vec(&mut g, new * heads * hs, 2.0);
            let k = vec(&mut g, kv * cap * hs, 2.0);
            let v = vec(&mut g, kv * cap * hs, 1.0);
            let mut alone = vec![0f32; q.len()];
            attention(&p, &q, &k, &v, &mut alone, &pool).unwrap();
            let table: Vec<usize> = ids[i * blocks_each..(i + 1) * blocks_each].to_vec();
            let used = past + new;
            // Only the positions the sequence holds are copied: the rest of its blocks is NaN.
            let mut kh = k.clone();
            let mut vh = v.clone();
            for h in 0..kv {
                kh[(h * cap + used) * hs..(h + 1) * cap * hs].fill(f32::NAN);
                vh[(h * cap + used) * hs..(h + 1) * cap * hs].fill(f32::NAN);
            }
            to_blocks(&kh, kv, cap, hs, bs, &table, &mut kc);
            to_blocks(&vh, kv, cap, hs, bs, &table, &mut vc);
            q_all.extend(q);
            want.extend(alone);
            tables.push(table);
        }
        let seqs: Vec<SeqSpan<'_>> = shapes
            .iter()
            .zip(&tables)
            .map(|(&(past_len, new_tokens), t)| SeqSpan {
                blocks: &t[..(past_len + new_tokens).div_ceil(bs)],
                past_len,
                new_tokens,
            })
            .collect();
        let heads_p = AttentionHeads {
            window,
            ..params(heads, kv, hs, cap, 0, 1).heads
        };
        let cache = KvBlocks {
            k: &kc,
            v: &vc,
            block_size: bs,
        };
        for isa in Isa::available() {
            for pool in [ThreadPool::single(), ThreadPool::new(3).unwrap()] {
                let mut got = vec![f32::NAN; q_all.len()];
                attention_with(isa, &heads_p, &seqs, &q_all, &cache, &mut got, &pool, 0).unwrap();
                assert_bits(
                    &got,
                    &want,
                    &format!("block size {bs}, {isa:?}, {} threads", pool.threads()),
                );
            }
        }
        // A block id past the cache, or too few blocks for the positions, is an error.
        let short = [SeqSpan {
            blocks: &tables[1][..1],
            past_len: 37,
            new_tokens: 1,
        }];
        let mut out = vec![0f32; heads * hs];
        if bs < 38 {
            assert!(
                attention_blocks(
                    &heads_p,
                    &short,
                    &q_all[..heads * hs],
                    &cache,
                    &mut out,
                    &pool
                )
                .is_err()
            );
        }
        let outside = [SeqSpan {
            blocks: &[total],
            past_len: 0,
            new_tokens: 1,
        }];
        assert!(
            attention_blocks(
                &heads_p,
                &outside,
                &q_all[..heads * hs],
                &cache,
                &mut out,
                &pool
            )
            .is_err()
        );
    }
}
