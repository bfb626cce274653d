//! Checks of the prompt GEMM path for CompFp32 int4 (MatMulNBits) layers (`blas/int4.rs`):
//! f32, f16 and bf16 dequantisation, with and without zero points, block sizes 16 to 128, k not
//! a multiple of the block and odd, a layer wider than one dequantised slice (two GEMMs), the
//! bias/rounding and GLU epilogues. Each case is checked twice: against the same GEMM on the
//! host over the weights dequantised and rounded as the kernel must (catches a wrong nibble,
//! block or slice), and against the CPU int4 kernel itself (the oracle) within the rounding the
//! GEMM's types add.

use super::common::{Check, Ctx, Rng};
use super::epilogue::{epilogue_limit, host_epilogue, max_abs};
use super::gemm_check::{check, cpu_linear, in_slice, sum_tol};
use super::linear::{Dt, rounded};
use crate::cpu::kernels::{self as cpu, Int4Weight, Scales, Weight, ZeroPoints};
use crate::cuda::blas::{Blas, skinny_takes};
use crate::cuda::kernels::{GemmType, Halves};
use crate::cuda::kernels::{Int4Linear, LinearShape, Ops};
use crate::error::Error;

/// One case: `m` rows, `k` inputs, `n` weight rows, block `bs`, zero points or the default 8,
/// the epilogue's `act` rounding and `glu` (with a bias when either is set).
#[derive(Debug, Clone, Copy)]
pub(super) struct Case {
    dt: Dt,
    m: usize,
    k: usize,
    n: usize,
    bs: usize,
    zp: bool,
    act: i32,
    glu: i32,
}

impl Case {
    pub fn gemm_type(&self) -> GemmType {
        match self.dt {
            Dt::F32 => GemmType::F32,
            Dt::F16 => GemmType::F16,
            Dt::Bf16 => GemmType::Bf16,
        }
    }

    /// The layer's (type, k, n), for the scratch.
    pub fn layer(&self) -> (GemmType, usize, usize) {
        (self.gemm_type(), self.k, self.n)
    }
}

pub(super) fn cases(dequant_values: usize) -> Vec<Case> {
    let mut all = Vec::new();
    for dt in [Dt::F32, Dt::F16, Dt::Bf16] {
        let c = |m, k, n, bs, zp, act, glu| Case {
            dt,
            m,
            k,
            n,
            bs,
            zp,
            act,
            glu,
        };
        all.extend([
            c(2, 1536, 256, 32, true, 0, -1),
            c(128, 896, 1152, 32, true, 0, -1),
            c(7, 1000, 77, 16, true, 0, -1), // k not a multiple of the block (nor of 16)
            c(3, 999, 64, 64, false, 0, -1), // odd k, zero points 8
            c(4, 1024, 48, 16, false, 0, -1), // 16-value groups, one scale each, zero points 8
            c(16, 2048, 96, 128, true, 0, -1), // 16 rows, one skinny row tile's most
            c(24, 1568, 72, 32, true, 0, -1), // two row tiles, 49 groups (a partial quad)
            c(32, 4096, 64, 64, false, 0, -1), // two full row tiles, zero points 8
            c(6, 1024, 77, 32, true, 0, -1), // a skinny tile cut inside its 8 columns
            c(20, 2048, 50, 256, true, 0, -1), // 256-value blocks, a cut tile, two row tiles
            c(12, 4096, 40, 64, false, 0, -1), // a partial 32-column block, zero points 8
            c(130, 4096, 96, 128, true, 0, -1),
            c(5, 1536, 200, 32, true, 1, -1),
            c(9, 896, 128, 32, true, 0, 0), // SiLU GLU over (gate, up) rows
        ]);
    }
    // Wider than one dequantised slice (`dequant_values`, 32 Mi values by default): two
    // or more GEMMs into one output, the last slice narrower than the others.
    let wide = |dt, glu| Case {
        dt,
        m: 3,
        k: 4096,
        n: dequant_values / 4096 + 2,
        bs: 32,
        zp: true,
        act: 0,
        glu,
    };
    all.extend([wide(Dt::F16, -1), wide(Dt::F32, 0)]);
    all
}

pub(super) fn check_case(
    c: &Ctx,
    ops: &Ops<'_>,
    blas: &Blas,
    rng: &mut Rng,
    case: Case,
) -> Result<Vec<Check>, Error> {
    let Case {
        dt,
        m,
        k,
        n,
        bs,
        act,
        glu,
        ..
    } = case;
    let nb = k.div_ceil(bs);
    let packed = rng.bytes(n * nb * bs / 2);
    let scales = rounded(
        dt,
        &rng.vec(n * nb).iter().map(|v| v * 0.05).collect::<Vec<_>>(),
    );
    let zp4 = rng.bytes(n * nb.div_ceil(2));
    let zu: Vec<u8> = zp4
        .chunks(nb.div_ceil(2))
        .flat_map(|col| (0..nb).map(move |b| (col[b / 2] >> (4 * (b % 2))) & 0x0f))
        .collect();
    let zf: Vec<f32> = zu.iter().map(|&z| f32::from(z)).collect();
    let x = rng.vec(m * k);
    let bias = rng.vec(n);
    // The weight as the kernel must dequantise it, [n, k], then as the CPU's [k, n].
    let w: Vec<f32> = (0..n * k)
        .map(|i| {
            let (col, j) = (i / k, i % k);
            let byte = packed[col * nb * bs / 2 + j / 2];
            let q = f32::from(if j % 2 == 0 { byte & 15 } else { byte >> 4 });
            let at = col * nb + j / bs;
            let z = if case.zp { zf[at] } else { 8.0 };
            (q - z) * scales[at]
        })
        .collect();
    let w = rounded(dt, &w);
    let kn: Vec<f32> = (0..k * n).map(|i| w[(i % n) * k + i / n]).collect();
    let exact = cpu_linear(c, &rounded(dt, &x), m, k, &kn)?;
    // The oracle: the CPU int4 kernel, CompFp32, on the f32 x.
    let oracle_w = Int4Weight::new(
        k,
        n,
        bs,
        0,
        &packed,
        Scales::F32(&scales),
        case.zp.then_some(ZeroPoints::Packed4(&zp4)),
    )?;
    let mut oracle = vec![0f32; m * n];
    cpu::linear(&x, m, &Weight::Int4(oracle_w), None, &mut oracle, &c.pool)?;

    let (dp, ds, dz) = (c.up(&packed)?, c.up(&scales)?, c.up(&zf)?);
    let (dx, db) = (c.up(&x)?, c.up(&bias)?);
    let with_epilogue = act != 0 || glu >= 0;
    let width = if glu >= 0 { n / 2 } else { n };
    let ldy = width + 3;
    let shape = LinearShape {
        m,
        k,
        n,
        ldx: k,
        ldy,
        glu,
    };
    let got = in_slice(c, (m, width, 1, ldy), |y| {
        let l = Int4Linear {
            packed: dp.span(),
            scales: ds.span(),
            scales_f16: None,
            zp: case.zp.then(|| dz.span().as_bytes()),
            x: dx.span(),
            bias: with_epilogue.then(|| db.span()),
            y,
        };
        ops.gemm_int4(
            blas,
            &l,
            (bs, true),
            case.gemm_type(),
            shape,
            act,
            Halves::default(),
        )
        .map(|_| ())
    })?;
    let rows = c.kernels.tuning.int4_skinny_rows;
    let name = format!(
        "gemm int4 {dt:?} m{m} k{k} n{n} bs{bs}{}{}{}",
        if skinny_takes(case.gemm_type(), (m, rows), k, bs, true) {
            " skinny"
        } else {
            ""
        },
        if case.zp { "" } else { " zp 8" },
        match (glu, act) {
            (g, _) if g >= 0 => " SiLU GLU".to_string(),
            (_, 0) => String::new(),
            (_, a) => format!(" bias, act {a}"),
        }
    );
    let tol = sum_tol(dt);
    let (want, limit) = if with_epilogue {
        let want = host_epilogue(&exact, Some(&bias), n, act, glu);
        let limit = epilogue_limit(tol, &exact, &want, act, glu);
        (want, limit)
    } else {
        (exact.clone(), tol)
    };
    let mut out = vec![check(
        format!("{name}, host dequant"),
        got.as_deref(),
        &want,
        limit,
    )];
    if !with_epilogue {
        // Rounding the weight and x to the GEMM's type moves each sum by at most
        // 2u * sum |w x| (u = 2^-24 f32, 2^-11 f16, 2^-8 bf16).
        let u = match dt {
            Dt::F32 => 0.0,
            Dt::F16 => (-11f32).exp2(),
            Dt::Bf16 => (-8f32).exp2(),
        };
        let abs = |v: &[f32]| v.iter().map(|a| a.abs()).collect::<Vec<f32>>();
        let s = cpu_linear(c, &abs(&x), m, k, &abs(&kn))?;
        let limit = 2.0 * u * max_abs(&s) / max_abs(&oracle) + tol;
        out.push(check(
            format!("{name}, vs CPU int4"),
            got.as_deref(),
            &oracle,
            limit,
        ));
    }
    Ok(out)
}
