//! Per-step comparison of two logit vectors.

/// How two logit vectors differ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepMetrics {
    pub max_abs: f32,
    /// max |a - b| / max(|a|, 1e-6) over the entries.
    pub max_rel: f32,
    /// Whether b's pick is a top-1 of the reference: the same token, or one whose reference logit
    /// equals the reference's maximum exactly (an exact tie, which the reference breaks towards
    /// the lower id by convention only).
    pub top1_equal: bool,
    /// The picks differ on an exact tie of the reference (counted in `top1_equal`).
    pub top1_tie: bool,
    /// a[top-1 of a] - a[top-1 of b]: how far apart the two picks are in the reference's own
    /// logits (0 when they agree). A disagreement whose margin is within the logit error is a
    /// near-tie that rounding flipped.
    pub top1_margin: f32,
    /// The reference's own top logit, a[top-1 of a]: the scale of its rounding step
    /// ([`crate::Precision::rounding_step`]).
    pub top1_value: f32,
    /// |top5(a) ∩ top5(b)| / 5.
    pub top5_overlap: f64,
    /// KL(softmax(a) ‖ softmax(b)), in nats.
    pub kl: f64,
}

/// Compares `b` against the reference `a`.
pub fn compare_logits(a: &[f32], b: &[f32]) -> StepMetrics {
    let mut max_abs = 0.0f32;
    let mut max_rel = 0.0f32;
    for (&x, &y) in a.iter().zip(b) {
        let diff = (x - y).abs();
        let diff = if diff.is_nan() { f32::INFINITY } else { diff };
        max_abs = max_abs.max(diff);
        max_rel = max_rel.max(diff / x.abs().max(1e-6));
    }
    let top_a = top_k(a, 5);
    let top_b = top_k(b, 5);
    let overlap =
        top_a.iter().filter(|i| top_b.contains(i)).count() as f64 / top_a.len().max(1) as f64;
    let margin = match (top_a.first(), top_b.first()) {
        (Some(&i), Some(&j)) if i != j => a[i] - a[j],
        _ => 0.0,
    };
    let top1_value = top_a.first().map_or(0.0, |&i| a[i]);
    let same = top_a.first() == top_b.first();
    let tie = !same && margin == 0.0;
    StepMetrics {
        max_abs,
        max_rel,
        top1_equal: same || tie,
        top1_tie: tie,
        top1_margin: margin,
        top1_value,
        top5_overlap: overlap,
        kl: kl_divergence(a, b),
    }
}

/// Indices of the k largest values, largest first (lowest index first on ties).
fn top_k(values: &[f32], k: usize) -> Vec<usize> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&i, &j| {
        values[j]
            .partial_cmp(&values[i])
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(i.cmp(&j))
    });
    order.truncate(k);
    order
}

fn log_softmax(values: &[f32]) -> Vec<f64> {
    let max = values.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let sum: f64 = values.iter().map(|&v| (v as f64 - max).exp()).sum();
    let log_sum = sum.ln() + max;
    values.iter().map(|&v| v as f64 - log_sum).collect()
}

fn kl_divergence(a: &[f32], b: &[f32]) -> f64 {
    let (la, lb) = (log_softmax(a), log_softmax(b));
    let kl: f64 = la
        .iter()
        .zip(&lb)
        .map(|(&p, &q)| {
            if p.is_finite() {
                p.exp() * (p - q)
            } else {
                0.0
            }
        })
        .sum();
    if kl.is_nan() {
        f64::INFINITY
    } else {
        kl.max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_logits_agree_perfectly() {
        let m = compare_logits(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]);
        assert_eq!((m.max_abs, m.top1_equal, m.top5_overlap), (0.0, true, 1.0));
        assert_eq!(m.top1_margin, 0.0);
        assert!(m.kl.abs() < 1e-12);
    }

    #[test]
    fn differences_are_measured() {
        let m = compare_logits(&[0.0, 2.0, 1.0, -1.0], &[0.0, 1.0, 2.5, -1.0]);
        assert_eq!(m.max_abs, 1.5);
        assert!((m.max_rel - 1.5).abs() < 1e-6);
        assert!(!m.top1_equal);
        // The reference's pick (index 1, 2.0) against b's (index 2, 1.0 in the reference).
        assert_eq!(m.top1_margin, 1.0);
        assert_eq!(m.top1_value, 2.0);
        // KL of softmax([0,2,1,-1]) against softmax([0,1,2.5,-1]), computed by hand.
        let p: Vec<f64> = [0.0f64, 2.0, 1.0, -1.0].iter().map(|v| v.exp()).collect();
        let q: Vec<f64> = [0.0f64, 1.0, 2.5, -1.0].iter().map(|v| v.exp()).collect();
        let (zp, zq): (f64, f64) = (p.iter().sum(), q.iter().sum());
        let expected: f64 = p
            .iter()
            .zip(&q)
            .map(|(a, b)| a / zp * ((a / zp) / (b / zq)).ln())
            .sum();
        assert!((m.kl - expected).abs() < 1e-9, "{} vs {expected}", m.kl);
    }

    #[test]
    fn a_flip_on_an_exact_tie_of_the_reference_agrees() {
        // The reference ties ids 1 and 2 exactly (its own pick: 1); b picks 2.
        let m = compare_logits(&[0.0, 2.0, 2.0, -1.0], &[0.0, 1.99, 2.01, -1.0]);
        assert!(m.top1_equal && m.top1_tie);
        assert_eq!(m.top1_margin, 0.0);
        // A near-tie is still a disagreement.
        let m = compare_logits(&[0.0, 2.0, 1.999, -1.0], &[0.0, 1.99, 2.01, -1.0]);
        assert!(!m.top1_equal && !m.top1_tie);
        assert!(m.top1_margin > 0.0);
        // Agreeing picks are not ties.
        let m = compare_logits(&[0.0, 2.0, 2.0], &[0.0, 2.0, 1.0]);
        assert!(m.top1_equal && !m.top1_tie);
    }

    #[test]
    fn nan_counts_as_infinitely_different() {
        let m = compare_logits(&[0.0, 1.0], &[f32::NAN, 1.0]);
        assert!(m.max_abs.is_infinite());
    }
}
