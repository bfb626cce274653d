//! Checks of the dense linear kernels — f32/f16/bf16, plain and with the GLU epilogue (int4:
//! `int4.rs`) — against the CPU kernels, at the real model shapes (k and n among 64, 896,
//! 1536, 4096, 8960, 14336), odd ones, one row and several. Every case runs
//! twice: once with 16-byte aligned weights and activations, once with both moved off that
//! alignment (scalar loads, unstaged copies), and the two results must be equal bit for bit —
//! the kernels' bits may depend on values and shapes only, never on addresses.

use super::common::{Check, Ctx, Rng, rel};
use crate::cpu::kernels::{self as cpu, DenseWeight, Weight};
use crate::cuda::kernels::{DenseLinear, LinearShape, OneRow, RowKernel};
use crate::cuda::memory::DevBuf;
use crate::cuda::span::DevSpan;
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
pub(super) fn shifted_f32(c: &Ctx, v: &[f32]) -> Result<DevBuf<f32>, Error> {
    let mut s = vec![0f32; v.len() + 1];
    s[1..].copy_from_slice(v);
    c.up(&s)
}

/// Whether two results are the same bits (and the same length).
pub(super) fn bitwise_equal(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The verdict: the CPU difference when both runs agree bit for bit, else infinite.
pub(super) fn verdict(
    name: String,
    first: &[f32],
    again: &[f32],
    want: &[f32],
    limit: f32,
) -> Check {
    let same = bitwise_equal(first, again);
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
    let bias = db.as_ref().map(DevBuf::span);
    let run = |w: DevSpan<'_, u8>, x: DevSpan<'_, f32>| -> Result<Vec<f32>, Error> {
        let dy = DevBuf::<f32>::zeros(&c.stream, m * n)?;
        let y = dy.span();
        c.ops().gemv(kernel, &DenseLinear { w, x, bias, y }, s, 0)?;
        c.down(&dy, m * n)
    };
    let first = run(w_al.span(), x_al.span())?;
    let again = run(w_sh.span_from(esize)?, x_sh.span_from(1)?)?;
    let name = format!(
        "{kernel}{} m{m} k{k} n{n}",
        if glu { " SiLU GLU" } else { "" }
    );
    let check = verdict(name, &first, &again, &want, 1e-5);
    if m > 1 {
        return Ok(check);
    }
    // One row: every one-row kernel at every split (the shared-memory one also on unaligned
    // weights and x, where a block's weights fit in shared memory), each bitwise equal to the
    // walk (the same products in the same order), and each within the limit of the CPU.
    let mut pairs_equal = true;
    let mut worst = check.rel_diff;
    let aligned = (w_al.span(), x_al.span());
    let unaligned = (w_sh.span_from(esize)?, x_sh.span_from(1)?);
    let one_row = |plan: OneRow, (w, x): (DevSpan<'_, u8>, DevSpan<'_, f32>)| {
        let dy = DevBuf::<f32>::zeros(&c.stream, m * n)?;
        let y = dy.span();
        c.ops()
            .gemv_one_row(kernel, &DenseLinear { w, x, bias, y }, s, 0, plan)?;
        c.down(&dy, m * n)
    };
    for split in [1, 2, 4] {
        let walk = one_row(OneRow::walk(split), aligned)?;
        worst = worst.max(rel(&walk, &want));
        let shared = OneRow {
            via: RowKernel::Shared,
            split,
        };
        let mut others = vec![(OneRow::pipe(split), aligned)];
        if c.kernels.one_row_fits(kernel, &s, shared) {
            others.extend([(shared, aligned), (shared, unaligned)]);
        }
        for (plan, at) in others {
            let other = one_row(plan, at)?;
            pairs_equal &= bitwise_equal(&walk, &other);
            worst = worst.max(rel(&other, &want));
        }
    }
    Ok(Check {
        name: format!(
            "{}, walk, pipe and shared kernels at splits 1, 2, 4 bitwise {}",
            check.name,
            if pairs_equal { "equal" } else { "DIFFERENT" }
        ),
        rel_diff: if pairs_equal { worst } else { f32::INFINITY },
        limit: check.limit,
    })
}
