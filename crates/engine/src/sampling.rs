//! Choosing the next token from logits: greedy argmax, and top-k / temperature / top-p sampling
//! with a seeded, reproducible random generator.
//!
//! A sampled choice is a pure function of the logits and one uniform number `u` in `[0, 1)`
//! drawn from the generator's seeded stream ([`select`]); the CUDA decoder's device sampler
//! (`kernels/sampling.cu`) implements the same definition with the same arithmetic, so both
//! choose the same token from the same logits and `u`:
//!
//! 1. Order: tokens by [`order_key`] (logit, largest first; NaN after -inf), ties by lower index.
//! 2. Top-k: with `0 < top_k < vocab`, keep the first `top_k` tokens of that order.
//! 3. Weights: `m` = the logit of the first token; when `m` is not finite (+inf, all -inf or all
//!    NaN) the first token is chosen. Otherwise every kept token weighs
//!    [`weight`]`(l, m, T)` = `trunc(exp_weight((l - m) / T) * 2^40)`, an integer (`T` the
//!    temperature, 1 when not positive; [`exp_weight`] is a fixed sequence of f32 operations,
//!    0 below `e^-30`). Sums of weights are exact u64 sums, so their order does not matter.
//! 4. Top-p: with `0 < top_p < 1`, `W` the kept tokens' total weight and
//!    `need = clamp(ceil(f64(top_p) * f64(W)), 1, W)`: keep the shortest prefix (in the order of
//!    step 1) whose weight reaches `need`.
//! 5. Draw: `W'` the kept weight and `target = min(floor(f64(u) * f64(W')), W' - 1)`; walking the
//!    kept tokens by increasing index, choose the first at which the running weight exceeds
//!    `target`. Tokens of weight 0 are never chosen.
//!
//! Greedy search is [`argmax`], with no uniform drawn.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Index of the largest logit; the lowest index wins ties and NaN never wins (0 when no logit
/// is above -inf).
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

/// A total order on logits as an integer: larger logits get larger keys, -0.0 sorts just below
/// +0.0, and NaN gets 0 (below -inf).
pub fn order_key(v: f32) -> u32 {
    let bits = v.to_bits();
    if v.is_nan() {
        0
    } else if bits & 0x8000_0000 != 0 {
        !bits
    } else {
        bits | 0x8000_0000
    }
}

/// The fixed-point scale of a weight: 2^40.
pub const WEIGHT_SCALE: f32 = 1_099_511_627_776.0;

const LOG2E: u32 = 0x3fb8_aa3b;
const LN2_HI: u32 = 0x3f31_7200;
const LN2_LO: u32 = 0x35bf_be8e;
/// 1/7!, 1/6!, ..., 1/2!, then 1, 1.
const POLY: [u32; 8] = [
    0x3950_0d01,
    0x3ab6_0b61,
    0x3c08_8889,
    0x3d2a_aaab,
    0x3e2a_aaab,
    0x3f00_0000,
    0x3f80_0000,
    0x3f80_0000,
];

/// `e^x` for `x <= 0`, as a fixed sequence of correctly rounded f32 operations (round to
/// nearest even, fused multiply-adds) that the device repeats bit for bit: `x = n ln2 + r`,
/// a degree-7 Taylor polynomial in `r`, times `2^n`. 0 below -30 and for NaN. Relative error
/// below 1e-6.
pub fn exp_weight(x: f32) -> f32 {
    if x.is_nan() || x < -30.0 {
        return 0.0;
    }
    let n = (x * f32::from_bits(LOG2E)).round_ties_even();
    let r = (-n).mul_add(f32::from_bits(LN2_HI), x);
    let r = (-n).mul_add(f32::from_bits(LN2_LO), r);
    let mut p = f32::from_bits(POLY[0]);
    for c in &POLY[1..] {
        p = p.mul_add(r, f32::from_bits(*c));
    }
    // n is in [-44, 0]: 2^n is a normal float.
    let scale = f32::from_bits(((n as i32 + 127) as u32) << 23);
    p * scale
}

/// The integer weight of a logit `l` against the maximum `m` at temperature `t` (> 0).
pub fn weight(l: f32, m: f32, t: f32) -> u64 {
    (exp_weight((l - m) / t) * WEIGHT_SCALE) as u64
}

/// The temperature the weights use: 1 when not positive.
pub fn effective_temperature(temperature: f32) -> f32 {
    if temperature > 0.0 { temperature } else { 1.0 }
}

/// `ceil(f64(top_p) * f64(total))` clamped to `1..=total`: the weight the top-p prefix reaches.
pub fn top_p_need(top_p: f32, total: u64) -> u64 {
    let need = (f64::from(top_p) * total as f64).ceil() as u64;
    need.clamp(1, total.max(1))
}

/// `min(floor(f64(u) * f64(total)), total - 1)`: the weight the draw passes.
pub fn draw_target(uniform: f32, total: u64) -> u64 {
    let target = (f64::from(uniform) * total as f64).floor() as u64;
    target.min(total.saturating_sub(1))
}

/// True when `a` comes before `b` in the order of step 1.
fn before(logits: &[f32], a: usize, b: usize) -> std::cmp::Ordering {
    order_key(logits[b])
        .cmp(&order_key(logits[a]))
        .then(a.cmp(&b))
}

/// The sampled choice of the module's definition for uniform `u` in `[0, 1)`; `scratch` is
/// reused between calls.
pub fn select(
    logits: &[f32],
    top_k: usize,
    top_p: f32,
    temperature: f32,
    u: f32,
    scratch: &mut Vec<(usize, u64)>,
) -> usize {
    let n = logits.len();
    let Some(first) = (0..n).min_by(|&a, &b| before(logits, a, b)) else {
        return 0;
    };
    let m = logits[first];
    if !m.is_finite() {
        return first;
    }
    let t = effective_temperature(temperature);
    let mut order: Vec<usize> = (0..n).collect();
    if top_k > 0 && top_k < n {
        order.select_nth_unstable_by(top_k - 1, |&a, &b| before(logits, a, b));
        order.truncate(top_k);
    }
    // Tokens of weight 0 add nothing to any sum and are never drawn.
    scratch.clear();
    scratch.extend(
        order
            .into_iter()
            .map(|i| (i, weight(logits[i], m, t)))
            .filter(|&(_, q)| q > 0),
    );
    if top_p > 0.0 && top_p < 1.0 {
        let need = top_p_need(top_p, scratch.iter().map(|&(_, q)| q).sum());
        scratch.sort_unstable_by(|a, b| before(logits, a.0, b.0));
        let mut cumulative = 0u64;
        if let Some(end) = scratch.iter().position(|&(_, q)| {
            cumulative += q;
            cumulative >= need
        }) {
            scratch.truncate(end + 1);
        }
    }
    scratch.sort_unstable_by_key(|&(i, _)| i);
    let target = draw_target(u, scratch.iter().map(|&(_, q)| q).sum());
    let mut cumulative = 0u64;
    for &(i, q) in scratch.iter() {
        cumulative += q;
        if cumulative > target {
            return i;
        }
    }
    scratch.last().map_or(first, |&(i, _)| i)
}

/// A seeded sampler; one per generator.
#[derive(Debug, Clone)]
pub struct Sampler {
    rng: ChaCha8Rng,
    scratch: Vec<(usize, u64)>,
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
            scratch: Vec::new(),
        }
    }

    /// The next uniform number in `[0, 1)` of the seeded stream: one per sampled choice.
    pub fn draw(&mut self) -> f32 {
        self.rng.random::<f32>()
    }

    /// [`select`] with uniform `u` (from [`draw`](Self::draw)).
    pub fn select(
        &mut self,
        logits: &[f32],
        top_k: usize,
        top_p: f32,
        temperature: f32,
        u: f32,
    ) -> usize {
        select(logits, top_k, top_p, temperature, u, &mut self.scratch)
    }

    /// Draws a uniform and selects: keep the `top_k` largest logits (0 or >= len keeps all),
    /// weigh them at `temperature`, cut to the shortest prefix reaching `top_p` of the weight
    /// (inclusive, when 0 < top_p < 1), and draw.
    pub fn sample(&mut self, logits: &[f32], top_k: usize, top_p: f32, temperature: f32) -> usize {
        let u = self.draw();
        self.select(logits, top_k, top_p, temperature, u)
    }
}

#[cfg(test)]
#[path = "sampling_tests.rs"]
mod tests;
