//! Per-kernel checks of the CUDA kernels against the CPU kernels (the oracle) on seeded random
//! inputs: dense and int4 linear layers (`linear.rs`, `int4.rs`), the prompt GEMMs through cuBLAS
//! (`gemm.rs`; int4 `gemm_int4.rs`), attention over a split KV cache, the fused decode attention (`decode.rs`),
//! argmax and the device token choice against the host's (`sampling.rs`). Run by
//! `tests/cuda_kernels.rs` on a GPU machine; each check reports its largest difference.

use crate::cpu::kernels::{self as cpu, AttentionParams};
use crate::cpu::threads::ThreadPool;
use crate::cuda::device::Device;
use crate::cuda::kernels::{ARGMAX_PARTS, Kernels, KvCache, KvKind, PromptAttention, PromptKernel};
use crate::cuda::kernels::{GemmType, HalfCopy};
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use crate::settings::CudaTuning;
use common::{Ctx, Rng, rel};
use halves::host_half;

mod common;
mod decode;
mod epilogue;
mod gemm;
mod gemm_check;
mod gemm_int4;
mod halves;
mod int4;
mod linear;
mod sampling;

pub use common::Check;

/// Runs every check on device `ordinal`, the kernels loaded under `tuning` (their rules and
/// definitions; `CudaTuning::default()` for what ships).
pub fn run(ordinal: usize, tuning: &CudaTuning) -> Result<Vec<Check>, Error> {
    let device = Device::open(ordinal)?;
    let ctx = Ctx {
        stream: device.ctx.new_stream().map_err(|e| Error::Cuda {
            what: "stream",
            message: format!("{e:?}"),
        })?,
        kernels: Kernels::load(&device, tuning)?,
        pool: ThreadPool::new(2)?,
    };
    let mut checks = Vec::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for case in linear::dense_cases() {
        checks.push(linear::dense(&ctx, &mut rng, case)?);
    }
    for case in int4::cases() {
        checks.push(int4::check(&ctx, &mut rng, case)?);
    }
    checks.extend(halves::norm_checks(&ctx, &mut rng)?);
    checks.extend(gemm::checks(&ctx, &mut rng)?);
    for case in prompt_cases() {
        checks.extend(attention(&ctx, &mut rng, case)?);
    }
    for case in decode::cases() {
        checks.push(decode::check(&ctx, &mut rng, case)?);
    }
    checks.push(argmax(&ctx, &mut rng)?);
    checks.extend(sampling::checks(&ctx, &mut rng)?);
    Ok(checks)
}

/// One prompt-attention case: `m` tokens after `past` cached positions.
#[derive(Debug, Clone, Copy)]
struct PromptCase {
    heads: usize,
    kv_heads: usize,
    hs: usize,
    cap: usize,
    past: usize,
    m: usize,
    window: Option<usize>,
    softcap: Option<f32>,
    kv: KvKind,
}

/// Small GQA shapes with windows and a soft cap, half caches, a prompt from position 0 over
/// many token tiles, a long past, odd head sizes and capacities, head size 256.
fn prompt_cases() -> Vec<PromptCase> {
    let base = PromptCase {
        heads: 4,
        kv_heads: 2,
        hs: 64,
        cap: 600,
        past: 300,
        m: 5,
        window: None,
        softcap: None,
        kv: KvKind::F32,
    };
    let case = |heads, kv_heads, hs, cap, past, m| PromptCase {
        heads,
        kv_heads,
        hs,
        cap,
        past,
        m,
        ..base
    };
    vec![
        base,
        PromptCase {
            window: Some(100),
            ..base
        },
        PromptCase {
            softcap: Some(5.0),
            ..base
        },
        PromptCase {
            window: Some(100),
            kv: KvKind::F16,
            ..base
        },
        PromptCase {
            window: Some(100),
            kv: KvKind::Bf16,
            ..base
        },
        case(14, 2, 64, 700, 0, 200),
        PromptCase {
            kv: KvKind::F16,
            ..case(32, 8, 128, 4100, 3600, 37)
        },
        PromptCase {
            window: Some(40),
            ..case(12, 2, 128, 300, 31, 33)
        },
        case(8, 8, 256, 520, 100, 20),
        PromptCase {
            softcap: Some(5.0),
            ..case(6, 2, 96, 333, 1, 17)
        },
        // Half caches through the tensor-core kernel: a group of 7 over many row tiles from
        // position 0, a long past in bf16, a window across spans, head sizes 96 and 256, a
        // soft cap, one token.
        PromptCase {
            kv: KvKind::F16,
            ..case(14, 2, 64, 700, 0, 200)
        },
        PromptCase {
            kv: KvKind::Bf16,
            ..case(32, 8, 128, 4100, 3600, 37)
        },
        PromptCase {
            window: Some(40),
            kv: KvKind::Bf16,
            ..case(12, 2, 128, 300, 31, 33)
        },
        PromptCase {
            window: Some(70),
            kv: KvKind::F16,
            ..case(8, 8, 256, 520, 100, 20)
        },
        PromptCase {
            softcap: Some(5.0),
            kv: KvKind::F16,
            ..case(6, 2, 96, 333, 1, 17)
        },
        PromptCase {
            kv: KvKind::Bf16,
            ..case(4, 1, 64, 129, 128, 1)
        },
    ]
}

/// Prompt attention over a cache of `kv` (its values and q representable there; f32 sums and
/// output, so the CPU's result on the same values is the reference at f32's limit), through
/// every kernel that takes the cache's kind (tensor cores for half caches, tiled, split): one
/// check each, NOT RUN where the kernel does not run the shape here.
fn attention(c: &Ctx, rng: &mut Rng, case: PromptCase) -> Result<Vec<Check>, Error> {
    let PromptCase {
        heads,
        kv_heads,
        hs,
        cap,
        past,
        m,
        window,
        softcap,
        kv,
    } = case;
    let ld = (heads + 2 * kv_heads) * hs;
    // q as the rotary leaves it: rounded to the activations' precision, the cache's kind.
    let mut q = rng.vec(m * heads * hs);
    decode::round_to(kv, &mut q);
    let mut kc = rng.vec(kv_heads * cap * hs);
    let mut vc = rng.vec(kv_heads * cap * hs);
    decode::round_to(kv, &mut kc);
    decode::round_to(kv, &mut vc);
    let scale = 0.125;
    let p = AttentionParams {
        heads: cpu::AttentionHeads {
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_size: hs,
            scale,
            window,
            softcap,
        },
        capacity: cap,
        past_len: past,
        new_tokens: m,
    };
    let mut want = vec![0f32; m * heads * hs];
    cpu::attention(&p, &q, &kc, &vc, &mut want, &c.pool)?;
    let mut qkv = vec![0f32; m * ld];
    for t in 0..m {
        qkv[t * ld..t * ld + heads * hs].copy_from_slice(&q[t * heads * hs..(t + 1) * heads * hs]);
    }
    let splits = cap.div_ceil(crate::cuda::kernels::ATTN_CHUNK);
    let (dq, dk, dv, step) = (
        c.up(&qkv)?,
        decode::kv_up(c, &kc, kv)?,
        decode::kv_up(c, &vc, kv)?,
        c.up(&[past as i32, m as i32, 0, 0])?,
    );
    let cache = KvCache {
        k: dk.span(),
        v: dv.span(),
        capacity: cap,
        kind: kv,
    };
    let part = DevBuf::<f32>::zeros(&c.stream, m * heads * splits * (hs + 2))?;
    let out = DevBuf::<f32>::zeros(&c.stream, m * heads * hs)?;
    let counts = DevBuf::<i32>::zeros(&c.stream, m * heads)?;
    let ops = c.ops();
    let a = PromptAttention {
        qkv: dq.span(),
        ld,
        cache,
        step: step.span(),
        part: part.span(),
        splits,
        counts: counts.span(),
        out: out.span(),
        m,
        heads,
        kv_heads,
        hs,
        scale,
        window,
        softcap,
        act: 0,
        half: None,
    };
    // The second run also asks for the output's half copy: in the cache's half type (f16 for
    // an f32 cache), as the GEMM after the attention would read it.
    let half_ty = if kv == KvKind::Bf16 {
        GemmType::Bf16
    } else {
        GemmType::F16
    };
    let dhalf = DevBuf::<u16>::zeros(&c.stream, m * heads * hs)?;
    let with_half = PromptAttention {
        half: Some(HalfCopy {
            ptr: dhalf.ptr,
            ty: half_ty,
            len: m * heads * hs,
        }),
        ..a
    };
    // Each kernel that takes a cache of this kind, and the kernel if it runs this shape here;
    // the tensor-core kernel with the spans it plans, with as many as the partials hold (the
    // shortest spans) and with the fewest it allows (the longest).
    let mut kernels = Vec::new();
    if kv != KvKind::F32 {
        for (label, spans) in [
            ("planned", ops.mma_planned_spans(&a)),
            ("most", splits),
            (
                "fewest",
                crate::cuda::kernels::mma_spans(usize::MAX, 1, cap, splits),
            ),
        ] {
            let mma = ops
                .mma_entry(kv, hs)
                .map(|name| PromptKernel::Mma(name, spans));
            kernels.push((format!("tensor-core, {label} spans: {spans}"), mma));
        }
    }
    let tiled = ops.tiled_fits(hs).then_some(PromptKernel::Tiled);
    kernels.push(("tiled".to_string(), tiled));
    kernels.push(("split".to_string(), Some(PromptKernel::Split)));
    let mut checks = Vec::new();
    for (label, kernel) in kernels {
        let name = format!(
            "prompt attention ({label}) {heads}/{kv_heads} heads hs{hs} cap{cap} past{past} \
             m{m} window {window:?} softcap {softcap:?} {kv:?} cache"
        );
        let Some(kernel) = kernel else {
            checks.push(Check {
                name: format!("{name}: NOT RUN, the kernel does not run this shape here"),
                rel_diff: 0.0,
                limit: 0.0,
            });
            continue;
        };
        // Run twice, the second time with the half copy: the merge must give the same bits,
        // and the copy (where the kernel has a separate merge) the output's rounding.
        let first = ops.attention_with(&a, kernel)?;
        let first_out = c.down(&out, m * heads * hs)?;
        let copied = ops.attention_with(&with_half, kernel)?;
        let again = c.down(&out, m * heads * hs)?;
        let half_ok = match copied {
            Some(h) => {
                let got = c.down(&dhalf, m * heads * hs)?;
                Some(h) == with_half.half && got == host_half(half_ty, &again)
            }
            None => kernel == PromptKernel::Split,
        };
        checks.push(Check {
            name: format!(
                "{name}; half copy {}",
                match (copied, half_ok) {
                    (_, false) => "WRONG",
                    (Some(_), true) => "as the output rounds",
                    (None, true) => "none (merges itself)",
                }
            ),
            rel_diff: if first.is_none() && first_out == again && half_ok {
                rel(&again, &want)
            } else {
                f32::INFINITY
            },
            limit: 1e-5,
        });
    }
    Ok(checks)
}

fn argmax(c: &Ctx, rng: &mut Rng) -> Result<Check, Error> {
    let mut v = rng.vec(50_000);
    v[31_337] = 3.0;
    v[40_000] = 3.0;
    let want = cpu::argmax(&v).unwrap_or(0);
    let (dv, out) = (c.up(&v)?, DevBuf::<i32>::zeros(&c.stream, 1)?);
    let pv = DevBuf::<f32>::zeros(&c.stream, ARGMAX_PARTS)?;
    let pi = DevBuf::<i32>::zeros(&c.stream, ARGMAX_PARTS)?;
    c.ops()
        .argmax(dv.span(), v.len(), (pv.span(), pi.span()), out.span())?;
    let mut got = [0i32];
    out.read(&c.stream, &mut got)?;
    let diff = if got[0] as usize == want {
        0.0
    } else {
        f32::INFINITY
    };
    Ok(Check {
        name: format!("argmax (cpu {want}, cuda {})", got[0]),
        rel_diff: diff,
        limit: 0.0,
    })
}
