//! Checks of the fused decode-attention kernel (rotary + KV append + attention of one token)
//! against the CPU's rotary, cache write and attention: lengths 1..5000 around every pass,
//! split, group and passes-per-split boundary (`decode_layout`), GQA groups 1/4/7/16, head
//! sizes 16..256 (one and two float4 units per lane), windows, a soft cap, partial and
//! interleaved rotary. Every case runs twice in each mode the device has (clusters on and off,
//! one and two passes staged) and all those runs must agree bit for bit. Half-precision caches
//! (f16, bf16, with activations of that precision) must also give the bits of an f32 cache
//! holding the same values.

use super::common::{Check, Ctx, Rng, rel};
use crate::cpu::kernels::{self as cpu, AttentionParams};
use crate::cuda::kernels::{
    DecodeCall, DecodeHeads, DecodeMode, KvCache, KvKind, Trigger, decode_splits,
};
use crate::cuda::memory::DevBuf;
use crate::cuda::span::DevSpan;
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
    /// The cache's kind; the activations have its precision.
    pub kv: KvKind,
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
        kv: KvKind::F32,
    };
    // One split up to 32 positions; a warp's 4 keys; one pass per split up to 256, two up to
    // 512 (one group), a second group from 513; 64 splits at 4096, three passes from 4097.
    let lengths = [
        1, 2, 31, 32, 33, 36, 37, 64, 65, 190, 255, 256, 257, 288, 511, 512, 513, 545, 2048, 4096,
        4097, 5000,
    ];
    let mut all = Vec::new();
    for &positions in &lengths {
        // GQA groups of 1, 4, 7 and 16 (two head slices per KV head).
        for &(heads, kv_heads) in &[(2, 2), (8, 2), (14, 2), (32, 2)] {
            all.push(Case {
                heads,
                kv_heads,
                positions,
                spare: 7,
                ..base
            });
        }
    }
    // Head sizes: tiny, 64, odd unit counts (24, 31, 33), 128, 256 (two units per lane).
    for &hs in &[16, 64, 96, 124, 132, 256] {
        for &positions in &[1, 33, 257, 513] {
            all.push(Case {
                heads: 14,
                kv_heads: 2,
                hs,
                positions,
                rotary: (hs, false),
                spare: 3,
                ..base
            });
        }
    }
    all.extend([
        // The Qwen2.5-1.5B shape in a large cache (a 64-split grid, most blocks idle).
        Case {
            spare: 3840,
            ..base
        },
        Case {
            positions: 190,
            spare: 210,
            ..base
        },
        // Windows: fewer positions than the token's index, the layout follows the window.
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
            window: Some(513),
            positions: 2000,
            ..base
        },
        Case {
            window: Some(32),
            positions: 1000,
            ..base
        },
        Case {
            softcap: Some(5.0),
            positions: 70,
            ..base
        },
        Case {
            softcap: Some(5.0),
            positions: 600,
            heads: 16,
            kv_heads: 16,
            ..base
        },
        // Partial interleaved rotary, partial half-split rotary, no rotary.
        Case {
            hs: 96,
            rotary: (32, true),
            positions: 150,
            ..base
        },
        Case {
            hs: 128,
            rotary: (64, false),
            positions: 520,
            ..base
        },
        Case {
            hs: 256,
            rotary: (0, false),
            positions: 5000,
            ..base
        },
        Case {
            heads: 32,
            kv_heads: 2,
            hs: 16,
            rotary: (16, false),
            positions: 129,
            ..base
        },
    ]);
    // Half-precision caches: around the pass, split, group and passes-per-split boundaries,
    // the Llama-3-8B and Qwen2.5 geometries, head sizes 64 and 256, windows and partial rotary.
    for kv in [KvKind::F16, KvKind::Bf16] {
        for &positions in &[1, 33, 190, 257, 513, 4097] {
            for &(heads, kv_heads) in &[(32, 8), (12, 2)] {
                all.push(Case {
                    heads,
                    kv_heads,
                    positions,
                    spare: 5,
                    kv,
                    ..base
                });
            }
        }
        for &hs in &[64, 256] {
            all.push(Case {
                hs,
                rotary: (hs, false),
                positions: 300,
                kv,
                ..base
            });
        }
        all.extend([
            Case {
                window: Some(100),
                positions: 300,
                kv,
                ..base
            },
            Case {
                hs: 96,
                rotary: (32, true),
                positions: 150,
                softcap: Some(5.0),
                kv,
                ..base
            },
        ]);
    }
    all
}

/// Rounds values to the precision of a cache kind (the activations' precision that goes with
/// it: the kernels' `act` is its code), to nearest even as the decoder rounds.
pub(super) fn round_to(kv: KvKind, values: &mut [f32]) {
    for v in values.iter_mut() {
        *v = match kv {
            KvKind::F32 => *v,
            KvKind::F16 => half::f16::from_f32(*v).to_f32(),
            KvKind::Bf16 => half::bf16::from_f32(*v).to_f32(),
        };
    }
}

/// A cache's values on the device as `kind` holds them (each already representable).
pub(super) fn kv_up(c: &Ctx, values: &[f32], kind: KvKind) -> Result<DevBuf<u8>, Error> {
    let bytes: Vec<u8> = match kind {
        KvKind::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        KvKind::F16 => values
            .iter()
            .flat_map(|&v| half::f16::from_f32(v).to_le_bytes())
            .collect(),
        KvKind::Bf16 => values
            .iter()
            .flat_map(|&v| half::bf16::from_f32(v).to_le_bytes())
            .collect(),
    };
    c.up(&bytes)
}

/// `n` values of a cache of `kind` back from the device.
fn kv_down(c: &Ctx, buf: &DevBuf<u8>, n: usize, kind: KvKind) -> Result<Vec<f32>, Error> {
    let bytes = c.down(buf, n * kind.bytes())?;
    Ok(match kind {
        KvKind::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
        KvKind::F16 => bytes
            .chunks_exact(2)
            .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        KvKind::Bf16 => bytes
            .chunks_exact(2)
            .map(|b| half::bf16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
    })
}

/// Runs one case twice in every mode (all runs must equal the first bit for bit, and leave the
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
        kv,
    } = case;
    let cap = positions + spare;
    let p = positions - 1;
    let ld = (heads + 2 * kv_heads) * hs;
    // Every input in the activations' precision, as the decoder hands them on.
    let rounded = |mut v: Vec<f32>| {
        round_to(kv, &mut v);
        v
    };
    let qkv = rounded(rng.vec(ld));
    let mut kc = rounded(rng.vec(kv_heads * cap * hs));
    let mut vc = rounded(rng.vec(kv_heads * cap * hs));
    let half = rd / 2;
    let angles: Vec<f32> = (0..cap * half.max(1)).map(|i| i as f32 * 0.37).collect();
    let (cos, sin): (Vec<f32>, Vec<f32>) = angles.iter().map(|a| (a.cos(), a.sin())).unzip();
    let scale = 1.0 / (hs as f32).sqrt();
    let (dk, dv) = (kv_up(c, &kc, kv)?, kv_up(c, &vc, kv)?);
    // The same values in an f32 cache: the half kinds must give its bits.
    let f32_cache = if kv == KvKind::F32 {
        None
    } else {
        Some((kv_up(c, &kc, KvKind::F32)?, kv_up(c, &vc, KvKind::F32)?))
    };
    let mut q = qkv[..heads * hs].to_vec();
    let mut k = qkv[heads * hs..(heads + kv_heads) * hs].to_vec();
    let v = &qkv[(heads + kv_heads) * hs..];
    if rd > 0 {
        cpu::rotary(&mut q, &[p], hs, &cos, &sin, rd, inter)?;
        cpu::rotary(&mut k, &[p], hs, &cos, &sin, rd, inter)?;
    }
    round_to(kv, &mut q);
    round_to(kv, &mut k);
    for h in 0..kv_heads {
        let dst = (h * cap + p) * hs;
        kc[dst..dst + hs].copy_from_slice(&k[h * hs..(h + 1) * hs]);
        vc[dst..dst + hs].copy_from_slice(&v[h * hs..(h + 1) * hs]);
    }
    let params = AttentionParams {
        heads: cpu::AttentionHeads {
            num_heads: heads,
            num_kv_heads: kv_heads,
            head_size: hs,
            scale,
            window,
            softcap,
        },
        capacity: cap,
        past_len: p,
        new_tokens: 1,
    };
    let mut want = vec![0f32; heads * hs];
    cpu::attention(&params, &q, &kc, &vc, &mut want, &c.pool)?;
    round_to(kv, &mut want);
    let d = DecodeHeads {
        heads,
        kv_heads,
        head_size: hs,
        kv,
    };
    let Some(mode) = c.kernels.decode.mode(&d) else {
        return Ok(Check {
            name: format!("decode attention hs{hs} {kv:?}: NOT RUN, the stage does not fit"),
            rel_diff: 0.0,
            limit: 0.0,
        });
    };
    // The rule's mode, then each other cluster choice, ring depth and trigger the device has
    // (each with a different trigger, so every trigger runs with both merges).
    let mut modes = vec![mode];
    if c.kernels.decode.cluster {
        modes.push(DecodeMode {
            cluster: !mode.cluster,
            trigger: Trigger::AfterKeys,
            ..mode
        });
    }
    if mode.ring == 2 {
        modes.push(DecodeMode {
            ring: 1,
            trigger: Trigger::AfterWait,
            ..mode
        });
    }
    let other = if mode.trigger == Trigger::Start {
        Trigger::AfterWait
    } else {
        Trigger::Start
    };
    modes.push(DecodeMode {
        trigger: other,
        ..mode
    });
    let splits = decode_splits(cap);
    let (dq, dcos, dsin) = (c.up(&qkv)?, c.up(&cos)?, c.up(&sin)?);
    let step = c.up(&[p as i32, 1, 0, 0])?;
    let part = DevBuf::<f32>::zeros(&c.stream, heads * splits * (hs + 2))?;
    let counts = DevBuf::<i32>::zeros(&c.stream, d.rows())?;
    let mut out = DevBuf::<f32>::zeros(&c.stream, heads * hs)?;
    // NaN before every run: an output a mode leaves unwritten fails the check.
    let unset = vec![f32::NAN; heads * hs];
    // SAFETY: `out` outlives every launch below (it lives to the end of this function), and
    // the host rewrites it only between launches, ordered on the same stream.
    let out_span = unsafe { DevSpan::from_raw(out.ptr, out.len) };
    let call = DecodeCall {
        qkv: dq.span(),
        step: step.span(),
        rotary: Some((dcos.span(), dsin.span(), rd, inter)),
        cache: KvCache {
            k: dk.span(),
            v: dv.span(),
            capacity: cap,
            kind: kv,
        },
        part: part.span(),
        counts: counts.span(),
        out: out_span,
        heads: d,
        scale,
        window,
        softcap,
        act: kv.code(),
    };
    let mut runs = Vec::new();
    for &m in &modes {
        for _ in 0..2 {
            out.write(&c.stream, &unset)?;
            c.ops().attention_decode_as(&call, m)?;
            runs.push(c.down(&out, heads * hs)?);
        }
    }
    let mut names: Vec<String> = modes
        .iter()
        .map(|m| format!("r{}{}", m.ring, if m.cluster { "c" } else { "" }))
        .collect();
    if let Some((fk, fv)) = &f32_cache {
        let d32 = DecodeHeads {
            kv: KvKind::F32,
            ..d
        };
        let cache = KvCache {
            k: fk.span(),
            v: fv.span(),
            kind: KvKind::F32,
            ..call.cache
        };
        if let Some(m) = c.kernels.decode.mode(&d32) {
            let f32_call = DecodeCall {
                cache,
                heads: d32,
                ..call
            };
            out.write(&c.stream, &unset)?;
            c.ops().attention_decode_as(&f32_call, m)?;
            runs.push(c.down(&out, heads * hs)?);
            names.push(format!(
                "r{}{} f32 cache",
                m.ring,
                if m.cluster { "c" } else { "" }
            ));
        }
    }
    let mut tickets = vec![0i32; d.rows()];
    counts.read(&c.stream, &mut tickets)?;
    let got_k = kv_down(c, &dk, kc.len(), kv)?;
    let got_v = kv_down(c, &dv, vc.len(), kv)?;
    let name = format!(
        "decode attention {heads}/{kv_heads} heads hs{hs} n{positions} cap{cap} \
         window {window:?} softcap {softcap:?} rotary {rd}{} {kv:?} cache [{}]",
        if inter { " interleaved" } else { "" },
        names.join(" ")
    );
    let same = runs.iter().all(|r| r == &runs[0]);
    let diff = if !same || tickets.iter().any(|&t| t != 0) {
        f32::INFINITY
    } else {
        rel(&runs[1], &want)
            .max(rel(&got_k, &kc))
            .max(rel(&got_v, &vc))
    };
    // Half precision: the rotation's and the output's roundings may fall either side of a
    // half-way point where the CPU's f32 sums differ in their last bit (a few units in the last
    // place of the type, relative to the largest output).
    let limit = match kv {
        KvKind::F32 => 1e-5,
        KvKind::F16 => 4e-3,
        KvKind::Bf16 => 3e-2,
    };
    Ok(Check {
        name,
        rel_diff: diff,
        limit,
    })
}
