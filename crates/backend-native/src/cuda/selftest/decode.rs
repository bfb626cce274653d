//! Checks of the fused decode-attention kernel (rotary + KV append + attention of one token)
//! against the CPU's rotary, cache write and attention, at lengths around the chunk and split
//! boundaries, several GQA ratios and head sizes, with a window and a soft cap.

use super::{Check, Ctx, Rng, rel};
use crate::cpu::kernels::{self as cpu, AttentionParams};
use crate::cuda::kernels::{DecodeHeads, decode_splits};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

/// One decode-attention case.
#[derive(Debug, Clone, Copy)]
pub(super) struct Case {
    pub heads: usize,
    pub kv_heads: usize,
    pub hs: usize,
    /// Positions attended to including the new token (the token sits at `positions - 1`).
    pub positions: usize,
    /// Cache capacity beyond `positions`.
    pub spare: usize,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
    /// (rotary_dim, interleaved); rotary_dim 0: no rotation.
    pub rotary: (usize, bool),
}

/// The cases `selftest::run` checks.
pub(super) fn cases() -> Vec<Case> {
    let base = Case {
        heads: 12,
        kv_heads: 2,
        hs: 128,
        positions: 256,
        spare: 0,
        window: None,
        softcap: None,
        rotary: (128, false),
    };
    let mut all = Vec::new();
    for &positions in &[1, 31, 32, 33, 300, 2000] {
        for &(heads, kv_heads) in &[(2, 2), (8, 2), (14, 2)] {
            for &hs in &[64, 128] {
                all.push(Case {
                    heads,
                    kv_heads,
                    hs,
                    positions,
                    rotary: (hs, false),
                    spare: 7,
                    ..base
                });
            }
        }
    }
    all.extend([
        // The Qwen2.5-1.5B shape, a large cache (every split block of the grid exists).
        Case {
            spare: 3840,
            ..base
        },
        Case {
            window: Some(100),
            positions: 300,
            ..base
        },
        Case {
            window: Some(40),
            positions: 33,
            ..base
        },
        Case {
            softcap: Some(5.0),
            positions: 70,
            ..base
        },
        // 16 query heads per KV head: two head slices per KV head.
        Case {
            heads: 32,
            kv_heads: 2,
            positions: 97,
            ..base
        },
        // Partial interleaved rotary, an odd head size for the chunking, no rotary, tiny heads.
        Case {
            hs: 96,
            rotary: (32, true),
            positions: 150,
            ..base
        },
        Case {
            hs: 256,
            rotary: (0, false),
            positions: 5000,
            ..base
        },
        Case {
            heads: 4,
            kv_heads: 2,
            hs: 16,
            rotary: (16, false),
            positions: 129,
            ..base
        },
    ]);
    all
}

/// Runs one case twice (the second run must equal the first bit for bit, and leave the
/// tickets zero) and compares the output and the appended key and value with the CPU.
pub(super) fn check(c: &Ctx, rng: &mut Rng, case: Case) -> Result<Check, Error> {
    let Case {
        heads,
        kv_heads,
        hs,
        positions,
        spare,
        window,
        softcap,
        rotary: (rd, inter),
    } = case;
    let cap = positions + spare;
    let p = positions - 1;
    let ld = (heads + 2 * kv_heads) * hs;
    let qkv = rng.vec(ld);
    let mut kc = rng.vec(kv_heads * cap * hs);
    let mut vc = rng.vec(kv_heads * cap * hs);
    let half = rd / 2;
    let angles: Vec<f32> = (0..cap * half.max(1)).map(|i| i as f32 * 0.37).collect();
    let (cos, sin): (Vec<f32>, Vec<f32>) = angles.iter().map(|a| (a.cos(), a.sin())).unzip();
    let scale = 1.0 / (hs as f32).sqrt();
    let (dk, dv) = (c.up(&kc)?, c.up(&vc)?);
    let mut q = qkv[..heads * hs].to_vec();
    let mut k = qkv[heads * hs..(heads + kv_heads) * hs].to_vec();
    let v = &qkv[(heads + kv_heads) * hs..];
    if rd > 0 {
        cpu::rotary(&mut q, &[p], hs, &cos, &sin, rd, inter)?;
        cpu::rotary(&mut k, &[p], hs, &cos, &sin, rd, inter)?;
    }
    for h in 0..kv_heads {
        let dst = (h * cap + p) * hs;
        kc[dst..dst + hs].copy_from_slice(&k[h * hs..(h + 1) * hs]);
        vc[dst..dst + hs].copy_from_slice(&v[h * hs..(h + 1) * hs]);
    }
    let params = AttentionParams {
        num_heads: heads,
        num_kv_heads: kv_heads,
        head_size: hs,
        capacity: cap,
        past_len: p,
        new_tokens: 1,
        scale,
        window,
        softcap,
    };
    let mut want = vec![0f32; heads * hs];
    cpu::attention(&params, &q, &kc, &vc, &mut want, &c.pool)?;
    let d = DecodeHeads {
        heads,
        kv_heads,
        head_size: hs,
    };
    let splits = decode_splits(cap, hs);
    let (dq, dcos, dsin) = (c.up(&qkv)?, c.up(&cos)?, c.up(&sin)?);
    let step = c.up(&[p as i32, 1, 0, 0])?;
    let part = DevBuf::<f32>::zeros(&c.stream, heads * splits * (hs + 2))?;
    let counts = DevBuf::<i32>::zeros(&c.stream, d.rows())?;
    let out = DevBuf::<f32>::zeros(&c.stream, heads * hs)?;
    let mut runs = Vec::new();
    for _ in 0..2 {
        c.ops().attention_decode(
            dq.ptr,
            step.ptr,
            (dcos.ptr, dsin.ptr, rd, inter),
            (dk.ptr, dv.ptr, cap),
            (part.ptr, part.len),
            (counts.ptr, counts.len),
            out.ptr,
            d,
            (scale, window, softcap),
            0,
        )?;
        runs.push(c.down(&out, heads * hs)?);
    }
    let mut tickets = vec![0i32; d.rows()];
    counts.read(&c.stream, &mut tickets)?;
    let (got_k, got_v) = (c.down(&dk, kc.len())?, c.down(&dv, vc.len())?);
    let name = format!(
        "decode attention {heads}/{kv_heads} heads hs{hs} n{positions} cap{cap} \
         window {window:?} softcap {softcap:?} rotary {rd}{}",
        if inter { " interleaved" } else { "" }
    );
    let diff = if runs[0] != runs[1] || tickets.iter().any(|&t| t != 0) {
        f32::INFINITY
    } else {
        rel(&runs[1], &want)
            .max(rel(&got_k, &kc))
            .max(rel(&got_v, &vc))
    };
    Ok(Check {
        name,
        rel_diff: diff,
        limit: 1e-5,
    })
}
