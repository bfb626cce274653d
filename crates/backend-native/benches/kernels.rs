//! Criterion benchmarks of the CPU kernels at Qwen2.5-0.5B shapes (hidden 896, MLP 4864,
//! vocab 151936, 14 heads / 2 KV heads of 64), on 1 and 2 threads.
//!
//! Linear-layer throughput is reported as weight bytes per second (the GEMV roofline).
//!
//! The `gemv_*` groups reuse one small matrix, which stays in the (large) last-level cache and
//! so overstates decode speed. `decode_step_f32_dram` cycles through the ~2 GB of distinct f32
//! weights of one Qwen2.5-0.5B decode step (24 layers of qkv, o, gate, up, down, then the
//! lm_head), as a real decode step does, next to `mem_read_dram`: a plain read of the same
//! bytes on the same threads, the ceiling for it. `prefill_f32` is the m = 128 GEMM.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use genai_backend_native::cpu::kernels::{
    AttentionHeads, AttentionParams, DenseWeight, Int4Weight, Isa, Scales, Weight, attention,
    linear, rms_norm,
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

/// int4 (block 32, int8 activations) over many rows: a prompt (m = 128) and a batch of decode
/// rows (m = 8).
fn prefill(c: &mut Criterion) {
    let pools = pools();
    let (k, n) = (896, 4864);
    let w: Weight = int4(k, n, 32, 4).into();
    let mut g = c.benchmark_group("prefill_int4_b32_acc4");
    for m in [8, 128] {
        let x = values(m * k, 1);
        let mut y = vec![0f32; m * n];
        g.throughput(Throughput::Elements((m * k * n) as u64));
        for pool in &pools {
            g.bench_function(
                BenchmarkId::new(format!("m{m}_k896_n4864"), format!("{}t", pool.threads())),
                |b| b.iter(|| linear(black_box(&x), m, &w, None, &mut y, pool).expect("linear")),
            );
        }
    }
    g.finish();
}

fn decode_attention(c: &mut Criterion) {
    let pools = pools();
    let mut g = c.benchmark_group("attention_decode_h14_kv2_d64");
    for past in [128, 1024] {
        let p = AttentionParams {
            heads: AttentionHeads {
                num_heads: 14,
                num_kv_heads: 2,
                head_size: 64,
                scale: 0.125,
                window: None,
                softcap: None,
            },
            capacity: past + 1,
            past_len: past,
            new_tokens: 1,
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

/// Hidden size, MLP size, fused qkv width, layers and vocabulary of Qwen2.5-0.5B.
const HIDDEN: usize = 896;
const MLP: usize = 4864;
const QKV: usize = 1152;
const LAYERS: usize = 24;
const VOCAB: usize = 151_936;

/// The weights of one decode step, each layer's matrices distinct in memory.
fn decode_step_weights() -> (Vec<Weight>, u64) {
    let shapes = [
        (HIDDEN, QKV),
        (HIDDEN, HIDDEN),
        (HIDDEN, MLP),
        (HIDDEN, MLP),
        (MLP, HIDDEN),
    ];
    let mut out = Vec::new();
    let mut bytes = 0u64;
    let sources: Vec<Vec<f32>> = shapes
        .iter()
        .enumerate()
        .map(|(i, &(k, n))| values(k * n, 10 + i as u64))
        .collect();
    for _ in 0..LAYERS {
        for (&(k, n), src) in shapes.iter().zip(&sources) {
            out.push(DenseWeight::from_f32(k, n, src).expect("dense").into());
            bytes += (k * n * 4) as u64;
        }
    }
    drop(sources);
    let lm = values(HIDDEN * VOCAB, 20);
    out.push(
        DenseWeight::from_f32(HIDDEN, VOCAB, &lm)
            .expect("dense")
            .into(),
    );
    bytes += (HIDDEN * VOCAB * 4) as u64;
    (out, bytes)
}

/// Sums `data` read as `streams` contiguous pieces side by side (4 cache lines of each per
/// step, as the decode kernel reads a panel chunk, with its software prefetch), with AVX-512
/// when available: a plain streaming read, the decode ceiling.
fn read_sum(data: &[f32], streams: usize) -> f32 {
    let len = data.len() / (64 * streams) * 64;
    let pieces: Vec<&[f32]> = (0..streams)
        .map(|s| &data[s * len..(s + 1) * len])
        .collect();
    let tail: f32 = data[streams * len..].iter().sum();
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        #[target_feature(enable = "avx512f")]
        fn v512(pieces: &[&[f32]], len: usize) -> f32 {
            let mut acc = [_mm512_setzero_ps(); 4];
            let mut i = 0;
            while i < len {
                for p in pieces {
                    for (l, a) in acc.iter_mut().enumerate() {
                        // The decode kernel's software prefetch, 1 KB ahead.
                        let ahead = p.as_ptr().wrapping_add(i + 256 + 16 * l);
                        _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                        // SAFETY: i + 64 <= len <= p.len().
                        let v = unsafe { _mm512_loadu_ps(p.as_ptr().add(i + 16 * l)) };
                        *a = _mm512_add_ps(*a, v);
                    }
                }
                i += 64;
            }
            let s = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
            _mm512_reduce_add_ps(s)
        }
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: AVX-512 F was detected at run time.
            return unsafe { v512(&pieces, len) } + tail;
        }
    }
    pieces.iter().map(|p| p.iter().sum::<f32>()).sum::<f32>() + tail
}

fn decode_dram(c: &mut Criterion) {
    let (weights, bytes) = decode_step_weights();
    let pools = pools();
    let x = values(MLP, 1);
    let mut y = vec![0f32; VOCAB];
    let mut g = c.benchmark_group("decode_step_f32_dram");
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    for pool in &pools {
        g.bench_function(
            BenchmarkId::from_parameter(format!("{}t", pool.threads())),
            |b| {
                b.iter(|| {
                    for w in &weights {
                        let (k, n) = (w.k(), w.n());
                        linear(black_box(&x[..k]), 1, w, None, &mut y[..n], pool).expect("linear");
                    }
                })
            },
        );
    }
    g.finish();
    // The ceiling: the same matrices read in the same order, each split in one half per thread,
    // read as 1 or 6 streams (the decode kernel reads 6).
    let mut g = c.benchmark_group("mem_read_dram");
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(8));
    let plain: Vec<Vec<f32>> = weights.iter().map(|w| vec![1f32; w.k() * w.n()]).collect();
    drop(weights);
    for pool in &pools {
        for streams in [1, 6] {
            let id = format!("{}t_{streams}streams", pool.threads());
            g.bench_function(BenchmarkId::from_parameter(id), |b| {
                b.iter(|| {
                    for m in &plain {
                        pool.for_ranges(m.len(), 1024, |r| {
                            black_box(read_sum(&m[r], streams));
                        });
                    }
                })
            });
        }
    }
    g.finish();
}

fn prefill_f32(c: &mut Criterion) {
    let pools = pools();
    let m = 128;
    let mut g = c.benchmark_group("prefill_f32_m128");
    for (k, n, name) in [
        (HIDDEN, MLP, "up"),
        (MLP, HIDDEN, "down"),
        (HIDDEN, QKV, "qkv"),
        (HIDDEN, HIDDEN, "o"),
    ] {
        let x = values(m * k, 1);
        let mut y = vec![0f32; m * n];
        let w: Weight = DenseWeight::from_f32(k, n, &values(k * n, 2))
            .expect("dense")
            .into();
        // Elements = multiply-adds; GFLOP/s is twice the reported Gelem/s.
        g.throughput(Throughput::Elements((m * k * n) as u64));
        for pool in &pools {
            let id = BenchmarkId::new(format!("{name}_k{k}_n{n}"), format!("{}t", pool.threads()));
            g.bench_function(id, |b| {
                b.iter(|| linear(black_box(&x), m, &w, None, &mut y, pool).expect("linear"))
            });
        }
    }
    g.finish();
}

criterion_group!(
    benches,
    gemv,
    prefill,
    prefill_f32,
    decode_dram,
    decode_attention,
    small
);
criterion_main!(benches);
