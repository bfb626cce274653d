//! Criterion benchmarks of the CPU kernels at Qwen2.5-0.5B shapes (hidden 896, MLP 4864,
//! vocab 151936, 14 heads / 2 KV heads of 64), on 1 and 2 threads.
//!
//! Linear-layer throughput is reported as weight bytes per second (the GEMV roofline).

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use genai_backend_native::cpu::kernels::{
    AttentionParams, DenseWeight, Int4Weight, Isa, Scales, Weight, attention, linear, rms_norm,
};
use genai_backend_native::cpu::threads::ThreadPool;

/// Cheap deterministic pseudo-random values in [-1, 1) (weights need no statistical quality).
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn bytes(len: usize, seed: u64) -> Vec<u8> {
    values(len, seed)
        .iter()
        .map(|v| ((v + 1.0) * 127.9) as u8)
        .collect()
}

fn int4(k: usize, n: usize, block: usize, level: i64) -> Int4Weight {
    let nb = k.div_ceil(block);
    let packed = bytes(n * nb * block / 2, 3);
    let scales: Vec<f32> = values(n * nb, 4)
        .iter()
        .map(|v| 0.01 + 0.01 * v.abs())
        .collect();
    Int4Weight::new(k, n, block, level, &packed, Scales::F32(&scales), None).expect("int4 weight")
}

const SHAPES: [(usize, usize, &str); 3] = [
    (896, 4864, "up"),
    (4864, 896, "down"),
    (896, 151936, "lm_head"),
];

fn pools() -> Vec<ThreadPool> {
    [1, 2]
        .into_iter()
        .map(|t| ThreadPool::new(t).expect("pool"))
        .collect()
}

fn gemv(c: &mut Criterion) {
    eprintln!("kernels use {:?}", Isa::best());
    let pools = pools();
    for (k, n, name) in SHAPES {
        let x = values(k, 1);
        let mut y = vec![0f32; n];
        let weights: [(&str, Weight, u64); 2] = [
            (
                "f32",
                DenseWeight::from_f32(k, n, &values(k * n, 2))
                    .expect("dense")
                    .into(),
                (k * n * 4) as u64,
            ),
            (
                "int4_b32_acc4",
                int4(k, n, 32, 4).into(),
                (k * n / 2 + n * k / 32 * 4) as u64,
            ),
        ];
        for (kind, w, weight_bytes) in &weights {
            let mut g = c.benchmark_group(format!("gemv_{kind}"));
            g.throughput(Throughput::Bytes(*weight_bytes));
            for pool in &pools {
                let id =
                    BenchmarkId::new(format!("{name}_k{k}_n{n}"), format!("{}t", pool.threads()));
                g.bench_function(id, |b| {
                    b.iter(|| linear(black_box(&x), 1, w, None, &mut y, pool).expect("linear"))
                });
            }
            g.finish();
        }
    }
    // Accuracy level 0 (f32 compute over int4) on the MLP shape, for comparison.
    let (k, n) = (896, 4864);
    let w: Weight = int4(k, n, 32, 0).into();
    let x = values(k, 1);
    let mut y = vec![0f32; n];
    let mut g = c.benchmark_group("gemv_int4_b32_acc0");
    g.throughput(Throughput::Bytes((k * n / 2 + n * k / 32 * 4) as u64));
    for pool in &pools {
        g.bench_function(
            BenchmarkId::new("up_k896_n4864", format!("{}t", pool.threads())),
            |b| b.iter(|| linear(black_box(&x), 1, &w, None, &mut y, pool).expect("linear")),
        );
    }
    g.finish();
}

fn prefill(c: &mut Criterion) {
    let pools = pools();
    let (m, k, n) = (128, 896, 4864);
    let x = values(m * k, 1);
    let mut y = vec![0f32; m * n];
    let w: Weight = int4(k, n, 32, 4).into();
    let mut g = c.benchmark_group("prefill_int4_b32_acc4");
    g.throughput(Throughput::Elements((m * k * n) as u64));
    for pool in &pools {
        g.bench_function(
            BenchmarkId::new("m128_k896_n4864", format!("{}t", pool.threads())),
            |b| b.iter(|| linear(black_box(&x), m, &w, None, &mut y, pool).expect("linear")),
        );
    }
    g.finish();
}

fn decode_attention(c: &mut Criterion) {
    let pools = pools();
    let mut g = c.benchmark_group("attention_decode_h14_kv2_d64");
    for past in [128, 1024] {
        let p = AttentionParams {
            num_heads: 14,
            num_kv_heads: 2,
            head_size: 64,
            capacity: past + 1,
            past_len: past,
            new_tokens: 1,
            scale: 0.125,
            window: None,
            softcap: None,
        };
        let q = values(14 * 64, 5);
        let k = values(2 * (past + 1) * 64, 6);
        let v = values(2 * (past + 1) * 64, 7);
        let mut out = vec![0f32; 14 * 64];
        for pool in &pools {
            g.bench_function(
                BenchmarkId::new(format!("past{past}"), format!("{}t", pool.threads())),
                |b| {
                    b.iter(|| {
                        attention(&p, black_box(&q), &k, &v, &mut out, pool).expect("attention")
                    })
                },
            );
        }
    }
    g.finish();
}

fn small(c: &mut Criterion) {
    let x = values(896, 8);
    let w = values(896, 9);
    let mut out = vec![0f32; 896];
    c.bench_function("rms_norm_896", |b| {
        b.iter(|| rms_norm(black_box(&x), &w, 1e-6, &mut out).expect("rms_norm"))
    });
    let pool = ThreadPool::new(2).expect("pool");
    c.bench_function("thread_pool_empty_2t", |b| {
        b.iter(|| {
            pool.run_each(vec![0u8, 1], |_, v| {
                black_box(v);
            })
        })
    });
}

criterion_group!(benches, gemv, prefill, decode_attention, small);
criterion_main!(benches);
