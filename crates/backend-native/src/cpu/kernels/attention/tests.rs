//! Attention against a naive softmax(QK^T)V with the GQA head mapping.

use super::*;
use crate::cpu::kernels::testutil::{assert_bits, assert_close, rng, vec};

/// Naive f64 attention: every (token, head) from scratch with explicit masks.
fn reference(p: &AttentionParams, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f64> {
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

fn params(
    heads: usize,
    kv: usize,
    hs: usize,
    cap: usize,
    past: usize,
    new: usize,
) -> AttentionParams {
    AttentionParams {
        num_heads: heads,
        num_kv_heads: kv,
        head_size: hs,
        capacity: cap,
        past_len: past,
        new_tokens: new,
        scale: 1.0 / (hs as f32).sqrt(),
        window: None,
        softcap: None,
    }
}

/// Runs on every ISA and with 1 and 3 threads; all must agree bitwise.
fn run_all(p: &AttentionParams, q: &[f32], k: &[f32], v: &[f32]) -> Vec<f32> {
    let pools = [ThreadPool::single(), ThreadPool::new(3).unwrap()];
    let mut first: Option<Vec<f32>> = None;
    for isa in Isa::available() {
        for pool in &pools {
            let mut out = vec![f32::NAN; q.len()];
            attention_with(isa, p, q, k, v, &mut out, pool, 0).unwrap();
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
        p.window = window;
        p.softcap = softcap;
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
        p.window = window;
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
            num_kv_heads: 3,
            ..p
        },
        AttentionParams {
            window: Some(0),
            ..p
        },
        AttentionParams {
            softcap: Some(-1.0),
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
