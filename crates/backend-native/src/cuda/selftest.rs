//! Per-kernel checks of the CUDA kernels against the CPU kernels (the oracle) on seeded random
//! inputs: dense and int4 linear layers, attention over a split KV cache, the fused decode
//! attention (`decode.rs`), argmax, the device token choice against the host's (`sampling.rs`).
//! Run by
//! `tests/cuda_kernels.rs` on a GPU machine; each check reports its largest difference.

use crate::cpu::kernels::{
    self as cpu, AttentionParams, DenseWeight, Int4Weight, Scales, Weight, ZeroPoints,
};
use crate::cpu::threads::ThreadPool;
use crate::cuda::device::Device;
use crate::cuda::kernels::{ARGMAX_PARTS, Kernels, LinearShape, Ops};
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use cudarc::driver::CudaStream;
use std::sync::Arc;

mod decode;
mod sampling;

/// One check's outcome.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    /// Largest |cuda - cpu| relative to the largest |cpu| value.
    pub rel_diff: f32,
    pub limit: f32,
}

impl Check {
    pub fn pass(&self) -> bool {
        self.rel_diff <= self.limit
    }
}

/// A small seeded generator (xorshift), values in [-1, 1).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| (self.0.wrapping_mul(31) >> 3) as u8 ^ self.next().to_bits() as u8)
            .collect()
    }
}

fn rel(got: &[f32], want: &[f32]) -> f32 {
    let scale = want.iter().fold(1e-30f32, |m, v| m.max(v.abs()));
    let diff = got.iter().zip(want).fold(0f32, |m, (a, b)| {
        if a.is_nan() != b.is_nan() {
            f32::INFINITY
        } else {
            m.max((a - b).abs())
        }
    });
    diff / scale
}

struct Ctx {
    stream: Arc<CudaStream>,
    kernels: Kernels,
    pool: ThreadPool,
}

impl Ctx {
    fn ops(&self) -> Ops<'_> {
        Ops {
            k: &self.kernels,
            stream: &self.stream,
            pager: None,
        }
    }
    fn up<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        v: &[T],
    ) -> Result<DevBuf<T>, Error> {
        DevBuf::from_host(&self.stream, v)
    }
    fn down(&self, b: &DevBuf<f32>, n: usize) -> Result<Vec<f32>, Error> {
        let mut v = vec![0f32; n];
        b.read(&self.stream, &mut v)?;
        self.stream.synchronize().map_err(|e| Error::Cuda {
            what: "sync",
            message: format!("{e:?}"),
        })?;
        Ok(v)
    }
}

/// Runs every check on device `ordinal`.
pub fn run(ordinal: usize) -> Result<Vec<Check>, Error> {
    let device = Device::open(ordinal)?;
    let ctx = Ctx {
        stream: device.ctx.new_stream().map_err(|e| Error::Cuda {
            what: "stream",
            message: format!("{e:?}"),
        })?,
        kernels: Kernels::load(&device)?,
        pool: ThreadPool::new(2)?,
    };
    let mut checks = Vec::new();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for &(m, k, n) in &[
        (1, 512, 77),
        (5, 300, 40),
        (4, 1024, 129),
        (1, 4096, 96),
        (3, 2048, 9),
    ] {
        checks.push(dense(&ctx, &mut rng, m, k, n)?);
    }
    for &(bs, acc) in &[(16, 0), (32, 4), (64, 4), (128, 0), (32, 0)] {
        checks.push(int4(&ctx, &mut rng, 3, 200, 33, bs, acc)?);
        checks.push(int4(&ctx, &mut rng, 1, 4096, 40, bs, acc)?);
    }
    for &(m, k, w) in &[(1, 1024, 100), (3, 520, 16)] {
        checks.push(glu(&ctx, &mut rng, m, k, w)?);
    }
    for &(window, softcap) in &[(None, None), (Some(100), None), (None, Some(5.0))] {
        checks.push(attention(&ctx, &mut rng, window, softcap)?);
    }
    for case in decode::cases() {
        checks.push(decode::check(&ctx, &mut rng, case)?);
    }
    checks.push(argmax(&ctx, &mut rng)?);
    checks.extend(sampling::checks(&ctx, &mut rng)?);
    Ok(checks)
}

fn dense(c: &Ctx, rng: &mut Rng, m: usize, k: usize, n: usize) -> Result<Check, Error> {
    let x = rng.vec(m * k);
    let kn = rng.vec(k * n);
    let mut nk = vec![0f32; k * n];
    for (i, row) in kn.chunks(n).enumerate() {
        for (j, v) in row.iter().enumerate() {
            nk[j * k + i] = *v;
        }
    }
    let bias = rng.vec(n);
    let mut want = vec![0f32; m * n];
    let w = Weight::Dense(DenseWeight::from_f32(k, n, &kn)?);
    cpu::linear(&x, m, &w, Some(&bias), &mut want, &c.pool)?;
    let (dx, dw, db, dy) = (
        c.up(&x)?,
        c.up(&nk)?,
        c.up(&bias)?,
        DevBuf::<f32>::zeros(&c.stream, m * n)?,
    );
    let s = LinearShape {
        m,
        k,
        n,
        ldx: k,
        ldy: n,
        glu: -1,
    };
    c.ops()
        .gemv("gemv_f32", dw.ptr, dx.ptr, db.ptr, dy.ptr, s, 0)?;
    Ok(Check {
        name: format!("gemv_f32 m{m} k{k} n{n}"),
        rel_diff: rel(&c.down(&dy, m * n)?, &want),
        limit: 1e-5,
    })
}

/// Gate and up stacked as (gate_i, up_i) row pairs with the SiLU GLU epilogue, against the
/// CPU's two linear layers and `silu_mul`.
fn glu(c: &Ctx, rng: &mut Rng, m: usize, k: usize, w: usize) -> Result<Check, Error> {
    let x = rng.vec(m * k);
    let (gate, up) = (rng.vec(k * w), rng.vec(k * w));
    let (mut g, mut u, mut want) = (vec![0f32; m * w], vec![0f32; m * w], vec![0f32; m * w]);
    let gw = Weight::Dense(DenseWeight::from_f32(k, w, &gate)?);
    let uw = Weight::Dense(DenseWeight::from_f32(k, w, &up)?);
    cpu::linear(&x, m, &gw, None, &mut g, &c.pool)?;
    cpu::linear(&x, m, &uw, None, &mut u, &c.pool)?;
    cpu::silu_mul(&g, &u, &mut want)?;
    let mut pairs = Vec::with_capacity(2 * k * w);
    for j in 0..w {
        pairs.extend((0..k).map(|i| gate[i * w + j]));
        pairs.extend((0..k).map(|i| up[i * w + j]));
    }
    let (dx, dw) = (c.up(&x)?, c.up(&pairs)?);
    let dy = DevBuf::<f32>::zeros(&c.stream, m * w)?;
    let s = LinearShape {
        m,
        k,
        n: 2 * w,
        ldx: k,
        ldy: w,
        glu: 0,
    };
    c.ops().gemv("gemv_f32", dw.ptr, dx.ptr, 0, dy.ptr, s, 0)?;
    let got = c.down(&dy, m * w)?;
    Ok(Check {
        name: format!("gemv_f32 SiLU GLU m{m} k{k} w{w}"),
        rel_diff: rel(&got, &want),
        limit: 1e-5,
    })
}

fn int4(
    c: &Ctx,
    rng: &mut Rng,
    m: usize,
    k: usize,
    n: usize,
    bs: usize,
    acc: i64,
) -> Result<Check, Error> {
    let nb = k.div_ceil(bs);
    let packed = rng.bytes(n * nb * bs / 2);
    let scales: Vec<f32> = rng.vec(n * nb).iter().map(|v| v * 0.05).collect();
    let zp = rng.bytes(n * nb.div_ceil(2));
    let x = rng.vec(m * k);
    let w = Int4Weight::new(
        k,
        n,
        bs,
        acc,
        &packed,
        Scales::F32(&scales),
        Some(ZeroPoints::Packed4(&zp)),
    )?;
    let mut want = vec![0f32; m * n];
    cpu::linear(&x, m, &Weight::Int4(w), None, &mut want, &c.pool)?;
    let mut zu = Vec::with_capacity(n * nb);
    for col in zp.chunks(nb.div_ceil(2)) {
        zu.extend((0..nb).map(|b| (col[b / 2] >> (4 * (b % 2))) & 0x0f));
    }
    let zf: Vec<f32> = zu.iter().map(|&z| f32::from(z)).collect();
    let (dp, ds, dx) = (c.up(&packed)?, c.up(&scales)?, c.up(&x)?);
    let dy = DevBuf::<f32>::zeros(&c.stream, m * n)?;
    let s = LinearShape {
        m,
        k,
        n,
        ldx: k,
        ldy: n,
        glu: -1,
    };
    let name = format!("int4 m{m} k{k} n{n} bs{bs} accuracy_level {acc}");
    if acc == 4 {
        let (dz, qa, sa) = (
            c.up(&zu)?,
            DevBuf::<i8>::zeros(&c.stream, m * nb * bs)?,
            DevBuf::<f32>::zeros(&c.stream, m * nb)?,
        );
        c.ops().gemv_int4_i8(
            (dp.ptr, ds.ptr, dz.ptr),
            bs,
            dx.ptr,
            (qa.ptr, sa.ptr),
            0,
            dy.ptr,
            s,
            0,
        )?;
    } else {
        let dz = c.up(&zf)?;
        c.ops()
            .gemv_int4_f32((dp.ptr, ds.ptr, dz.ptr), bs, dx.ptr, 0, dy.ptr, s, 0)?;
    }
    Ok(Check {
        name,
        rel_diff: rel(&c.down(&dy, m * n)?, &want),
        limit: 1e-5,
    })
}

fn attention(
    c: &Ctx,
    rng: &mut Rng,
    window: Option<usize>,
    softcap: Option<f32>,
) -> Result<Check, Error> {
    let (heads, kv_heads, hs, cap, past, m) = (4, 2, 64, 600, 300, 5);
    let ld = (heads + 2 * kv_heads) * hs;
    let q = rng.vec(m * heads * hs);
    let kc = rng.vec(kv_heads * cap * hs);
    let vc = rng.vec(kv_heads * cap * hs);
    let scale = 0.125;
    let p = AttentionParams {
        num_heads: heads,
        num_kv_heads: kv_heads,
        head_size: hs,
        capacity: cap,
        past_len: past,
        new_tokens: m,
        scale,
        window,
        softcap,
    };
    let mut want = vec![0f32; m * heads * hs];
    cpu::attention(&p, &q, &kc, &vc, &mut want, &c.pool)?;
    let mut qkv = vec![0f32; m * ld];
    for t in 0..m {
        qkv[t * ld..t * ld + heads * hs].copy_from_slice(&q[t * heads * hs..(t + 1) * heads * hs]);
    }
    let splits = cap.div_ceil(crate::cuda::state::ATTN_CHUNK);
    let (dq, dk, dv, step) = (
        c.up(&qkv)?,
        c.up(&kc)?,
        c.up(&vc)?,
        c.up(&[past as i32, m as i32, 0, 0])?,
    );
    let part = DevBuf::<f32>::zeros(&c.stream, m * heads * splits * (hs + 2))?;
    let out = DevBuf::<f32>::zeros(&c.stream, m * heads * hs)?;
    let counts = DevBuf::<i32>::zeros(&c.stream, m * heads)?;
    c.ops().attention(
        dq.ptr,
        ld,
        (dk.ptr, dv.ptr, cap),
        step.ptr,
        (part.ptr, splits, counts.ptr),
        out.ptr,
        (m, heads, kv_heads, hs),
        (scale, window, softcap),
        0,
    )?;
    let first = c.down(&out, m * heads * hs)?;
    c.ops().attention(
        dq.ptr,
        ld,
        (dk.ptr, dv.ptr, cap),
        step.ptr,
        (part.ptr, splits, counts.ptr),
        out.ptr,
        (m, heads, kv_heads, hs),
        (scale, window, softcap),
        0,
    )?;
    let again = c.down(&out, m * heads * hs)?;
    let name = format!("attention window {window:?} softcap {softcap:?}");
    Ok(Check {
        name,
        rel_diff: if first == again {
            rel(&again, &want)
        } else {
            f32::INFINITY
        },
        limit: 1e-5,
    })
}

fn argmax(c: &Ctx, rng: &mut Rng) -> Result<Check, Error> {
    let mut v = rng.vec(50_000);
    v[31_337] = 3.0;
    v[40_000] = 3.0;
    let want = cpu::argmax(&v).unwrap_or(0);
    let (dv, out) = (c.up(&v)?, DevBuf::<i32>::zeros(&c.stream, 1)?);
    let pv = DevBuf::<f32>::zeros(&c.stream, ARGMAX_PARTS)?;
    let pi = DevBuf::<i32>::zeros(&c.stream, ARGMAX_PARTS)?;
    c.ops().argmax(dv.ptr, v.len(), (pv.ptr, pi.ptr), out.ptr)?;
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
