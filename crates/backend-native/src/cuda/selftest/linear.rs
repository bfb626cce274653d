//! Checks of the linear kernels — dense f32/f16/bf16 (plain and with the GLU epilogue) and
//! int4 (CompFp32 and CompInt8) — against the CPU kernels, at the real model shapes (k and n
//! among 64, 896, 1536, 4096, 8960, 14336), odd ones, one row and several. Every case runs
//! twice: once with 16-byte aligned weights and activations, once with both moved off that
//! alignment (scalar loads, unstaged copies), and the two results must be equal bit for bit —
//! the kernels' bits may depend on values and shapes only, never on addresses.

use super::{Check, Ctx, Rng, rel};
use crate::cpu::kernels::{self as cpu, DenseWeight, Int4Weight, Scales, Weight, ZeroPoints};
use crate::cuda::kernels::{DevPtr, LinearShape};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

/// Dense weight precision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dt {
    F32,
    F16,
    Bf16,
}

/// One dense case: `m` rows, `k` inputs, `n` outputs (with `glu`, `n` (gate, up) pairs).
#[derive(Debug, Clone, Copy)]
pub(super) struct Dense {
    pub dt: Dt,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub glu: bool,
}

/// One int4 case; `acc` is the MatMulNBits accuracy level (4: CompInt8).
#[derive(Debug, Clone, Copy)]
pub(super) struct Int4 {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub bs: usize,
    pub acc: i64,
}

/// The dense cases `selftest::run` checks.
pub(super) fn dense_cases() -> Vec<Dense> {
    let d = |dt, m, k, n| Dense {
        dt,
        m,
        k,
        n,
        glu: false,
    };
    let mut all = Vec::new();
    for dt in [Dt::F32, Dt::F16, Dt::Bf16] {
        for &(m, k, n) in &[
            (1, 64, 1536),
            (1, 896, 1152),
            (1, 1536, 2048),
            (1, 1536, 896),
            (1, 8960, 1536),
            (1, 14336, 64), // too wide to stage: x from global memory
            (1, 1001, 77),
            (1, 999, 13),
            (1, 12, 5),
            (3, 1536, 896),
            (5, 4096, 64),
            (7, 8960, 96),
            (4, 997, 33),
            (2, 64, 4096),
        ] {
            all.push(d(dt, m, k, n));
        }
        all.push(Dense {
            glu: true,
            ..d(dt, 3, 896, 100)
        });
    }
    all.extend([
        d(Dt::F16, 1, 4096, 14336),
        d(Dt::F16, 1, 14336, 4096),
        d(Dt::Bf16, 1, 1536, 8960),
        Dense {
            glu: true,
            ..d(Dt::F16, 1, 1536, 8960)
        },
        Dense {
            glu: true,
            ..d(Dt::F32, 1, 1024, 100)
        },
    ]);
    all
}

/// The int4 cases `selftest::run` checks.
pub(super) fn int4_cases() -> Vec<Int4> {
    let mut all = Vec::new();
    for &(m, k, n, bs) in &[
        (1, 1536, 2048, 32),
        (1, 8960, 1536, 32),
        (1, 896, 1152, 16),
        (1, 4096, 64, 128),
        (1, 14336, 96, 64), // CompFp32: too wide to stage
        (1, 64, 1536, 64),
        (1, 200, 33, 16), // an odd block count: a half chunk at the end
        (3, 1000, 77, 16),
        (3, 200, 33, 128),
        (4, 8960, 64, 32),
        (5, 4096, 40, 256),
        (2, 4096, 896, 256),
    ] {
        for acc in [0, 4] {
            all.push(Int4 { m, k, n, bs, acc });
        }
    }
    all
}

/// Bytes of `values` in the precision, little-endian, after `lead` zero bytes.
pub(super) fn weight_bytes(dt: Dt, values: &[f32], lead: usize) -> Vec<u8> {
    let mut out = vec![0u8; lead];
    for &v in values {
        match dt {
            Dt::F32 => out.extend(v.to_le_bytes()),
            Dt::F16 => out.extend(half::f16::from_f32(v).to_bits().to_le_bytes()),
            Dt::Bf16 => out.extend(half::bf16::from_f32(v).to_bits().to_le_bytes()),
        }
    }
    out
}

/// `values` rounded to the precision (what the CPU weight holds).
pub(super) fn rounded(dt: Dt, values: &[f32]) -> Vec<f32> {
    match dt {
        Dt::F32 => values.to_vec(),
        Dt::F16 => values
            .iter()
            .map(|&v| half::f16::from_f32(v).to_f32())
            .collect(),
        Dt::Bf16 => values
            .iter()
            .map(|&v| half::bf16::from_f32(v).to_f32())
            .collect(),
    }
}

/// x with one leading float (so `ptr + 4` is 4- but not 16-byte aligned).
fn shifted_f32(c: &Ctx, v: &[f32]) -> Result<DevBuf<f32>, Error> {
    let mut s = vec![0f32; v.len() + 1];
    s[1..].copy_from_slice(v);
    c.up(&s)
}

/// The verdict: the CPU difference when both runs agree bit for bit, else infinite.
fn verdict(name: String, first: &[f32], again: &[f32], want: &[f32], limit: f32) -> Check {
    let same = first.len() == again.len()
        && first
            .iter()
            .zip(again)
            .all(|(a, b)| a.to_bits() == b.to_bits());
    Check {
        name: format!(
            "{name} (twice, bitwise {})",
            if same { "equal" } else { "DIFFERENT" }
        ),
        rel_diff: if same {
            rel(first, want)
        } else {
            f32::INFINITY
        },
        limit,
    }
}

pub(super) fn dense(c: &Ctx, rng: &mut Rng, case: Dense) -> Result<Check, Error> {
    let Dense { dt, m, k, n, glu } = case;
    let x = rng.vec(m * k);
    // Columns of the device layer: n plain outputs, or n (gate, up) pairs.
    let cols = if glu { 2 * n } else { n };
    let kn = rounded(dt, &rng.vec(k * cols));
    let bias = if glu { Vec::new() } else { rng.vec(n) };
    let cpu_weight = |kn: &[f32], n: usize| DenseWeight::from_f32(k, n, kn).map(Weight::Dense);
    let mut want = vec![0f32; m * n];
    if glu {
        // kn holds gate then up, each [k, n].
        let (gate, up): (Vec<f32>, Vec<f32>) = (0..k)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .map(|(i, j)| (kn[i * cols + j], kn[i * cols + n + j]))
            .unzip();
        let (mut g, mut u) = (vec![0f32; m * n], vec![0f32; m * n]);
        cpu::linear(&x, m, &cpu_weight(&gate, n)?, None, &mut g, &c.pool)?;
        cpu::linear(&x, m, &cpu_weight(&up, n)?, None, &mut u, &c.pool)?;
        cpu::silu_mul(&g, &u, &mut want)?;
    } else {
        let w = cpu_weight(&kn, n)?;
        cpu::linear(&x, m, &w, Some(&bias), &mut want, &c.pool)?;
    }
    // Device rows: [n, k], with GLU the rows of gate j and up j adjacent.
    let mut nk = Vec::with_capacity(k * cols);
    let order: Vec<usize> = if glu {
        (0..n).flat_map(|j| [j, n + j]).collect()
    } else {
        (0..n).collect()
    };
    for cj in order {
        nk.extend((0..k).map(|i| kn[i * cols + cj]));
    }
    let esize = if dt == Dt::F32 { 4 } else { 2 };
    let kernel = match dt {
        Dt::F32 => "gemv_f32",
        Dt::F16 => "gemv_f16",
        Dt::Bf16 => "gemv_bf16",
    };
    let w_al = c.up(&weight_bytes(dt, &nk, 0))?;
    let w_sh = c.up(&weight_bytes(dt, &nk, esize))?;
    let (x_al, x_sh) = (c.up(&x)?, shifted_f32(c, &x)?);
    let db = if glu { None } else { Some(c.up(&bias)?) };
    let s = LinearShape {
        m,
        k,
        n: cols,
        ldx: k,
        ldy: n,
        glu: if glu { 0 } else { -1 },
    };
    let run = |w: DevPtr, xp: DevPtr| -> Result<Vec<f32>, Error> {
        let dy = DevBuf::<f32>::zeros(&c.stream, m * n)?;
        let bias = db.as_ref().map_or(0, |b| b.ptr);
        c.ops().gemv(kernel, w, xp, bias, dy.ptr, s, 0)?;
        c.down(&dy, m * n)
    };
    let first = run(w_al.ptr, x_al.ptr)?;
    let again = run(w_sh.ptr + esize as u64, x_sh.ptr + 4)?;
    let name = format!(
        "{kernel}{} m{m} k{k} n{n}",
        if glu { " SiLU GLU" } else { "" }
    );
    Ok(verdict(name, &first, &again, &want, 1e-5))
}

pub(super) fn int4(c: &Ctx, rng: &mut Rng, case: Int4) -> Result<Check, Error> {
    let Int4 { m, k, n, bs, acc } = case;
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
    // The packed data once aligned, once 4 bytes on (word loads only).
    let p_al = c.up(&packed)?;
    let p_sh = c.up(&[vec![0u8; 4], packed.clone()].concat())?;
    let (ds, x_al, x_sh) = (c.up(&scales)?, c.up(&x)?, shifted_f32(c, &x)?);
    let (dzu, dzf) = (c.up(&zu)?, c.up(&zf)?);
    // CompInt8 scratch, 16 bytes spare: the second run moves qa 8 bytes on.
    let qa = DevBuf::<i8>::zeros(&c.stream, m * nb * bs + 16)?;
    let sa = DevBuf::<f32>::zeros(&c.stream, m * nb)?;
    let s = LinearShape {
        m,
        k,
        n,
        ldx: k,
        ldy: n,
        glu: -1,
    };
    let run = |p: DevPtr, xp: DevPtr, q: DevPtr| -> Result<Vec<f32>, Error> {
        let dy = DevBuf::<f32>::zeros(&c.stream, m * n)?;
        if acc == 4 {
            let parts = (p, ds.ptr, dzu.ptr);
            c.ops()
                .gemv_int4_i8(parts, bs, xp, (q, sa.ptr), 0, dy.ptr, s, 0)?;
        } else {
            let parts = (p, ds.ptr, dzf.ptr);
            c.ops().gemv_int4_f32(parts, bs, xp, 0, dy.ptr, s, 0)?;
        }
        c.down(&dy, m * n)
    };
    let first = run(p_al.ptr, x_al.ptr, qa.ptr)?;
    let again = run(p_sh.ptr + 4, x_sh.ptr + 4, qa.ptr + 8)?;
    let name = format!("int4 m{m} k{k} n{n} bs{bs} accuracy_level {acc}");
    Ok(verdict(name, &first, &again, &want, 1e-5))
}
