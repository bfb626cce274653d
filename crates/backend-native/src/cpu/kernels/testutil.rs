//! Test helpers: seeded random inputs and tolerance checks.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

pub(crate) fn rng(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// `len` values uniform in `[-scale, scale)`.
pub(crate) fn vec(rng: &mut ChaCha8Rng, len: usize, scale: f32) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-scale..scale)).collect()
}

/// Asserts `|got - want| <= tol` element-wise, naming the first failure.
#[track_caller]
pub(crate) fn assert_close(got: &[f32], want: &[f64], tol: impl Fn(usize) -> f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let t = tol(i);
        assert!(
            (f64::from(g) - w).abs() <= t,
            "{what}: element {i}: got {g}, want {w} (tolerance {t})"
        );
    }
}

/// Asserts two f32 slices are bitwise identical.
#[track_caller]
pub(crate) fn assert_bits(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}: length");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert_eq!(x.to_bits(), y.to_bits(), "{what}: element {i}: {x} vs {y}");
    }
}
