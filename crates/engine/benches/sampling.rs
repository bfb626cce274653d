//! Criterion benchmarks of token choice over a Qwen2.5-sized vocabulary (151,936 logits):
//! greedy argmax, top-k sampling and top-p sampling.

use criterion::{Criterion, criterion_group, criterion_main};
use genai_engine::{Sampler, argmax};
use rand::{Rng, SeedableRng};
use std::hint::black_box;

const VOCAB: usize = 151_936;

fn logits() -> Vec<f32> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    (0..VOCAB).map(|_| rng.random_range(-8.0f32..8.0)).collect()
}

fn sampling(c: &mut Criterion) {
    let logits = logits();
    let mut sampler = Sampler::new(1);
    c.bench_function("greedy argmax 151936", |b| {
        b.iter(|| argmax(black_box(&logits)))
    });
    c.bench_function("top-k 50 sample 151936", |b| {
        b.iter(|| sampler.sample(black_box(&logits), 50, 0.0, 0.8))
    });
    c.bench_function("top-p 0.9 sample 151936", |b| {
        b.iter(|| sampler.sample(black_box(&logits), 0, 0.9, 0.8))
    });
    c.bench_function("top-k 50 + top-p 0.9 sample 151936", |b| {
        b.iter(|| sampler.sample(black_box(&logits), 50, 0.9, 0.8))
    });
}

criterion_group!(benches, sampling);
criterion_main!(benches);
