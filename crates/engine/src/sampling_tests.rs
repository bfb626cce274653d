//! The selection definition of `sampling.rs` against an independent plain implementation (full
//! sort, running sums), and its edge cases: ties, top_k = 1, a tiny top_p, penalties, -inf.

use super::*;
use crate::logits::{apply_min_length, apply_repetition_penalty};

/// The definition written as plainly as possible: sort everything, walk the order.
fn reference(logits: &[f32], top_k: usize, top_p: f32, temperature: f32, u: f32) -> usize {
    let mut order: Vec<usize> = (0..logits.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(order_key(logits[i])), i));
    let m = logits[order[0]];
    if !m.is_finite() {
        return order[0];
    }
    if top_k > 0 && top_k < order.len() {
        order.truncate(top_k);
    }
    let t = if temperature > 0.0 { temperature } else { 1.0 };
    let w = |i: usize| weight(logits[i], m, t);
    if top_p > 0.0 && top_p < 1.0 {
        let total: u64 = order.iter().map(|&i| w(i)).sum();
        let need = ((top_p as f64) * (total as f64)).ceil().max(1.0) as u64;
        let mut sum = 0;
        let mut keep = order.len();
        for (j, &i) in order.iter().enumerate() {
            sum += w(i);
            if sum >= need {
                keep = j + 1;
                break;
            }
        }
        order.truncate(keep);
    }
    order.sort();
    let total: u64 = order.iter().map(|&i| w(i)).sum();
    let target = (((u as f64) * (total as f64)).floor() as u64).min(total - 1);
    let mut sum = 0;
    for &i in &order {
        sum += w(i);
        if sum > target {
            return i;
        }
    }
    unreachable!("the running weight reaches the total")
}

/// xorshift values in [0, 1).
struct Stream(u64);
impl Stream {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

fn pick(logits: &[f32], k: usize, p: f32, t: f32, u: f32) -> usize {
    select(logits, k, p, t, u, &mut Vec::new())
}

#[test]
fn exp_weight_is_exp_to_a_millionth() {
    let mut x = 0.0f32;
    while x > -30.0 {
        let (got, want) = (f64::from(exp_weight(x)), f64::from(x).exp());
        assert!((got - want).abs() <= 1e-6 * want, "{x}: {got} vs {want}");
        x -= 0.0137;
    }
    assert_eq!(exp_weight(0.0), 1.0);
    assert_eq!(exp_weight(-30.5), 0.0);
    assert_eq!(exp_weight(f32::NEG_INFINITY), 0.0);
    assert_eq!(exp_weight(f32::NAN), 0.0);
    assert_eq!(weight(3.0, 3.0, 0.7), 1 << 40);
}

#[test]
fn order_key_orders_logits_with_nan_last() {
    let values = [
        f32::NAN,
        f32::NEG_INFINITY,
        -3.5,
        -0.0,
        0.0,
        1e-30,
        2.0,
        f32::INFINITY,
    ];
    let keys: Vec<u32> = values.iter().map(|&v| order_key(v)).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:x?}");
    assert_eq!(order_key(-f32::NAN), 0);
}

#[test]
fn select_matches_the_plain_reference_on_random_logits() {
    let mut s = Stream(0x2545_f491_4f6c_dd1d);
    for &(n, spread) in &[(7usize, 1.0f32), (300, 4.0), (5000, 12.0)] {
        let logits: Vec<f32> = (0..n).map(|_| (s.next() - 0.5) * spread).collect();
        for &(k, p, t) in &[
            (0, 1.0, 1.0),
            (1, 1.0, 1.0),
            (5, 1.0, 0.7),
            (50, 0.9, 0.8),
            (0, 0.5, 1.3),
            (0, 1e-6, 1.0),
            (n, 0.95, 0.0),
        ] {
            for _ in 0..40 {
                let u = s.next();
                assert_eq!(
                    pick(&logits, k, p, t, u),
                    reference(&logits, k, p, t, u),
                    "n {n} k {k} p {p} t {t} u {u}"
                );
            }
        }
    }
}

#[test]
fn ties_go_to_the_lowest_index_in_order_and_split_the_draw() {
    let logits = [1.0f32; 4];
    // top_k 2 of four equal logits keeps tokens 0 and 1; each takes half of the draw.
    assert_eq!(pick(&logits, 2, 1.0, 1.0, 0.0), 0);
    assert_eq!(pick(&logits, 2, 1.0, 1.0, 0.49), 0);
    assert_eq!(pick(&logits, 2, 1.0, 1.0, 0.5), 1);
    assert_eq!(pick(&logits, 2, 1.0, 1.0, 0.999), 1);
    // top_p 0.5 of four equal weights keeps the first two by index.
    assert_eq!(pick(&logits, 0, 0.5, 1.0, 0.99), 1);
    assert_eq!(pick(&logits, 0, 0.51, 1.0, 0.99), 2);
}

#[test]
fn top_k_one_and_a_tiny_top_p_are_the_argmax() {
    let logits = [0.1, 0.9, 0.5, 0.9, -2.0];
    let mut s = Stream(99);
    for _ in 0..100 {
        let u = s.next();
        assert_eq!(pick(&logits, 1, 1.0, 1.0, u), 1);
        assert_eq!(pick(&logits, 0, 1e-7, 1.0, u), 1);
        assert_eq!(pick(&logits, 3, 1e-7, 2.0, u), argmax(&logits));
    }
}

#[test]
fn the_draw_walks_kept_tokens_by_index() {
    // Weights at temperature 1 relative to the max (token 2): e^-1, e^-2, 1.
    let logits = [2.0f32, 1.0, 3.0];
    let w: Vec<u64> = logits.iter().map(|&l| weight(l, 3.0, 1.0)).collect();
    let total: u64 = w.iter().sum();
    let cut0 = w[0] as f64 / total as f64;
    let cut1 = (w[0] + w[1]) as f64 / total as f64;
    assert_eq!(pick(&logits, 0, 1.0, 1.0, 0.0), 0);
    assert_eq!(pick(&logits, 0, 1.0, 1.0, (cut0 - 1e-4) as f32), 0);
    assert_eq!(pick(&logits, 0, 1.0, 1.0, (cut0 + 1e-4) as f32), 1);
    assert_eq!(pick(&logits, 0, 1.0, 1.0, (cut1 + 1e-4) as f32), 2);
    // top_k 2 drops token 1: the draw splits between 0 and 2 only.
    for u in [0.0, 0.3, 0.6, 0.99] {
        assert_ne!(pick(&logits, 2, 1.0, 1.0, u), 1);
    }
}

#[test]
fn non_finite_maxima_fall_back_to_the_first_in_order() {
    let inf = f32::INFINITY;
    assert_eq!(pick(&[1.0, inf, 2.0, inf], 0, 1.0, 1.0, 0.9), 1);
    let ninf = f32::NEG_INFINITY;
    assert_eq!(pick(&[ninf, ninf], 0, 1.0, 1.0, 0.9), 0);
    assert_eq!(pick(&[f32::NAN, ninf], 0, 1.0, 1.0, 0.9), 1);
    assert_eq!(pick(&[f32::NAN, f32::NAN], 0, 1.0, 1.0, 0.9), 0);
    // NaN and -inf logits weigh nothing and are never drawn.
    for u in [0.0, 0.5, 0.999_999] {
        assert_eq!(pick(&[f32::NAN, 1.0, ninf], 0, 1.0, 1.0, u), 1);
    }
}

#[test]
fn penalties_and_suppression_change_the_choice() {
    let mut logits = vec![4.0f32, 3.9, -1.0, 3.0];
    apply_repetition_penalty(&mut logits, &[0, 2], 2.0);
    assert_eq!(logits, [2.0, 3.9, -2.0, 3.0]);
    assert_eq!(pick(&logits, 1, 1.0, 1.0, 0.3), 1);
    apply_min_length(&mut logits, 1, 5, &[1]);
    assert_eq!(argmax(&logits), 3);
    for u in [0.0, 0.4, 0.8, 0.999] {
        assert_ne!(
            pick(&logits, 0, 1.0, 1.0, u),
            1,
            "a suppressed EOS was drawn"
        );
    }
}

#[test]
fn argmax_prefers_lowest_index_on_ties_and_skips_nan() {
    assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
    assert_eq!(argmax(&[f32::NAN, -1.0, -2.0]), 1);
    assert_eq!(argmax(&[f32::NAN, f32::NEG_INFINITY]), 0);
}

#[test]
fn top_k_restricts_the_support() {
    let mut sampler = Sampler::new(1);
    let logits = [5.0, 4.9, 4.8, -1.0, 4.95];
    for _ in 0..500 {
        let id = sampler.sample(&logits, 2, 0.0, 1.0);
        assert!(id == 0 || id == 4, "drew {id} outside the top 2");
    }
}

#[test]
fn top_p_is_inclusive_of_the_crossing_token() {
    // probabilities ≈ [0.5, 0.3, 0.2]; top_p = 0.6 keeps the first two.
    let logits = [0.5f32.ln(), 0.3f32.ln(), 0.2f32.ln()];
    let mut sampler = Sampler::new(3);
    let mut seen = [0usize; 3];
    for _ in 0..2000 {
        seen[sampler.sample(&logits, 0, 0.6, 1.0)] += 1;
    }
    assert_eq!(seen[2], 0);
    assert!(seen[1] > 400 && seen[0] > 900, "{seen:?}");
}

#[test]
fn same_seed_same_draws_and_distribution_follows_softmax() {
    let logits = [1.0, 2.0, 0.5, 1.5];
    let draw = |seed| {
        let mut s = Sampler::new(seed);
        (0..64)
            .map(|_| s.sample(&logits, 0, 1.0, 0.7))
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(42), draw(42));
    assert_ne!(draw(42), draw(43));

    let mut sampler = Sampler::new(9);
    let n = 40_000;
    let mut counts = [0f64; 4];
    for _ in 0..n {
        counts[sampler.sample(&logits, 0, 1.0, 1.0)] += 1.0;
    }
    let z: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
    for (i, &l) in logits.iter().enumerate() {
        let expected = f64::from(l).exp() / z;
        assert!(
            (counts[i] / n as f64 - expected).abs() < 0.01,
            "{i}: {counts:?}"
        );
    }
}

#[test]
fn low_temperature_concentrates_on_the_maximum() {
    let mut sampler = Sampler::new(5);
    for _ in 0..200 {
        assert_eq!(sampler.sample(&[1.0, 1.2, 0.9], 0, 1.0, 0.01), 1);
    }
}
