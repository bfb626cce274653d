//! Choosing the next token from logits: greedy argmax, and top-k / temperature / top-p sampling
//! in ONNX Runtime GenAI's order with a seeded, reproducible random generator.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Ordering;

/// Index of the largest logit; the lowest index wins ties and NaN never wins.
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    let mut best_value = f32::NEG_INFINITY;
    for (index, &value) in logits.iter().enumerate() {
        if value > best_value {
            best = index;
            best_value = value;
        }
    }
    best
}

/// Orders logits from largest to smallest, NaN last, ties by index.
fn descending(logits: &[f32], a: usize, b: usize) -> Ordering {
    let (x, y) = (logits[a], logits[b]);
    match (x.is_nan(), y.is_nan()) {
        (true, true) => a.cmp(&b),
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => y.partial_cmp(&x).unwrap_or(Ordering::Equal).then(a.cmp(&b)),
    }
}

/// A seeded sampler; one per generator.
#[derive(Debug, Clone)]
pub struct Sampler {
    rng: ChaCha8Rng,
    order: Vec<usize>,
    probs: Vec<f32>,
}

impl Sampler {
    /// `seed < 0` draws a seed from the operating system (nondeterministic), as ORT GenAI's -1.
    pub fn new(seed: i64) -> Self {
        let rng = match u64::try_from(seed) {
            Ok(seed) => ChaCha8Rng::seed_from_u64(seed),
            Err(_) => ChaCha8Rng::from_os_rng(),
        };
        Sampler {
            rng,
            order: Vec::new(),
            probs: Vec::new(),
        }
    }

    /// Samples one index: keep the `top_k` largest logits (0 or >= len keeps all), softmax them
    /// at `temperature`, cut to the smallest prefix whose probability reaches `top_p` (inclusive,
    /// applied when 0 < top_p < 1), renormalise and draw.
    pub fn sample(&mut self, logits: &[f32], top_k: usize, top_p: f32, temperature: f32) -> usize {
        if logits.is_empty() {
            return 0;
        }
        let k = if top_k == 0 || top_k > logits.len() {
            logits.len()
        } else {
            top_k
        };
        self.order.clear();
        self.order.extend(0..logits.len());
        if k < logits.len() {
            self.order
                .select_nth_unstable_by(k - 1, |&a, &b| descending(logits, a, b));
            self.order.truncate(k);
        }
        self.order
            .sort_unstable_by(|&a, &b| descending(logits, a, b));

        let max = logits[self.order[0]];
        let temperature = if temperature > 0.0 { temperature } else { 1.0 };
        self.probs.clear();
        self.probs.extend(self.order.iter().map(|&i| {
            let p = ((logits[i] - max) / temperature).exp();
            if p.is_finite() { p } else { 0.0 }
        }));
        let total: f32 = self.probs.iter().sum();
        if total.is_nan() || total <= 0.0 {
            return self.order[0];
        }
        self.probs.iter_mut().for_each(|p| *p /= total);

        let mut kept = self.probs.len();
        if top_p > 0.0 && top_p < 1.0 {
            let mut cumulative = 0.0;
            for (i, p) in self.probs.iter().enumerate() {
                cumulative += p;
                if cumulative >= top_p {
                    kept = i + 1;
                    break;
                }
            }
        }
        let kept_total: f32 = self.probs[..kept].iter().sum();
        let target = self.rng.random::<f32>() * kept_total;
        let mut cumulative = 0.0;
        for (i, p) in self.probs[..kept].iter().enumerate() {
            cumulative += p;
            if target < cumulative {
                return self.order[i];
            }
        }
        self.order[kept - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_prefers_lowest_index_on_ties_and_skips_nan() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
        assert_eq!(argmax(&[f32::NAN, -1.0, -2.0]), 1);
    }

    #[test]
    fn top_k_one_is_argmax() {
        let mut sampler = Sampler::new(7);
        for _ in 0..50 {
            assert_eq!(sampler.sample(&[0.1, 0.9, 0.5, 0.9], 1, 0.0, 1.0), 1);
        }
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
}
