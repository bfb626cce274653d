//! Checks of the prompt GEMM path (`blas.rs`) against the CPU kernels: dense f32/f16/bf16
//! weights at 2 to 256 rows, the model shapes (k and n among 64, 896, 1536, 4864) and odd ones,
//! x rows wider than k. Per case: the sums alone, written by cuBLAS straight into a column
//! slice of y (ldy > n, what lies around the slice must stay untouched); then with the epilogue
//! (bias and activation rounding, or the GLU pairs). The epilogue kernel alone is checked bit
//! for bit against the host, ties and overflow included.

use super::common::{Check, Ctx, Rng, rel};
use super::epilogue::{epilogue_limit, host_epilogue, max_abs};
use super::gemm_check::{check, cpu_linear, gemm_type, in_slice, sum_tol};
use super::linear::{Dt, rounded, weight_bytes};
use super::{gemm_int4, halves};
use crate::cuda::blas::{Blas, Epilogue, GemmScratch, cublas_available};
use crate::cuda::kernels::Halves;
use crate::cuda::kernels::{DenseLinear, LinearShape, Ops};
use crate::error::Error;

/// One case: `m` rows, `k` inputs (x rows `k + pad` apart), `n` outputs (with `glu >= 0`, `n`
/// (gate, up) pairs: `2n` weight rows), rounding to `act` (0 f32, 1 f16, 2 bf16).
#[derive(Debug, Clone, Copy)]
struct Case {
    dt: Dt,
    m: usize,
    k: usize,
    n: usize,
    pad: usize,
    act: i32,
    glu: i32,
}

impl Case {
    fn cols(&self) -> usize {
        if self.glu >= 0 { 2 * self.n } else { self.n }
    }
}

fn cases() -> Vec<Case> {
    let c = |dt, m, k, n, pad, act, glu| Case {
        dt,
        m,
        k,
        n,
        pad,
        act,
        glu,
    };
    let mut all = Vec::new();
    for (dt, act) in [(Dt::F32, 0), (Dt::F16, 1), (Dt::Bf16, 2)] {
        for &(m, k, n, pad) in &[
            (2, 896, 1536, 0),
            (7, 1536, 896, 4),
            (128, 896, 4864, 0),
            (256, 4864, 896, 0),
            (256, 1536, 1536, 8),
            (7, 64, 4864, 0),
            (128, 4864, 64, 0),
            (3, 999, 77, 1),
            (130, 1001, 13, 3),
            (256, 77, 1003, 0),
        ] {
            all.push(c(dt, m, k, n, pad, act, -1));
        }
        for &(m, k, n, glu) in &[(7, 896, 100, 0), (128, 1536, 896, 1), (256, 64, 1003, 2)] {
            all.push(c(dt, m, k, n, 0, 0, glu));
        }
    }
    all.extend([
        c(Dt::F32, 7, 896, 1536, 0, 1, -1),
        c(Dt::F32, 128, 1536, 896, 0, 2, -1),
        c(Dt::F16, 128, 896, 1536, 0, 0, -1),
        c(Dt::Bf16, 7, 1536, 896, 0, 0, -1),
        c(Dt::F16, 2, 4864, 64, 0, 0, 0),
    ]);
    all
}

/// Every GEMM check (one line saying they did not run where cuBLAS is missing).
pub(super) fn checks(c: &Ctx, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    if let Err(why) = cublas_available() {
        return Ok(vec![Check {
            name: format!("NOT RUN: cuBLAS GEMM checks: {why}"),
            rel_diff: 0.0,
            limit: 0.0,
        }]);
    }
    let all = cases();
    let dequant_values = c.kernels.tuning.dequant_values;
    let int4 = gemm_int4::cases(dequant_values);
    let scratch = GemmScratch::of(
        all.iter()
            .map(|k| (gemm_type(k.dt), k.k, k.cols()))
            .chain(halves::gemm_layers()),
        int4.iter().map(|k| k.layer()),
        dequant_values,
    );
    let blas = Blas::new(&c.stream, scratch)?;
    let ops = c.ops();
    let mut out = epilogue_checks(c, &ops, rng)?;
    out.extend(halves::gemm_checks(c, &ops, &blas, rng)?);
    for case in all {
        out.extend(case_checks(c, &ops, &blas, rng, case)?);
    }
    for case in int4 {
        out.extend(gemm_int4::check_case(c, &ops, &blas, rng, case)?);
    }
    Ok(out)
}

fn case_checks(
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
        pad,
        act,
        glu,
        ..
    } = case;
    let (cols, ldx) = (case.cols(), k + pad);
    let x = rng.vec(m * ldx);
    let xc: Vec<f32> = x.chunks(ldx).flat_map(|r| r[..k].to_vec()).collect();
    // Device rows [cols, k] (GLU: gate j and up j adjacent), the CPU's transpose [k, cols].
    let w = rounded(dt, &rng.vec(cols * k));
    let kn: Vec<f32> = (0..k * cols)
        .map(|i| w[(i % cols) * k + i / cols])
        .collect();
    let bias = rng.vec(cols);
    // The sums of x as the GEMM reads it (rounded to the weight type).
    let exact = cpu_linear(c, &rounded(dt, &xc), m, k, &kn)?;
    let (dw, dx, db) = (c.up(&weight_bytes(dt, &w, 0))?, c.up(&x)?, c.up(&bias)?);
    let ty = gemm_type(dt);
    let shape = |ldy, glu| LinearShape {
        m,
        k,
        n: cols,
        ldx,
        ldy,
        glu,
    };
    let what = format!(
        "gemm {dt:?} m{m} k{k} n{cols}{}",
        if pad > 0 { " ldx>k" } else { "" }
    );
    let mut out = Vec::new();
    let sums = in_slice(c, (m, cols, 3, cols + 5), |y| {
        ops.gemm(
            blas,
            ty,
            &DenseLinear {
                w: dw.span(),
                x: dx.span(),
                bias: None,
                y,
            },
            shape(cols + 5, -1),
            0,
            Halves::default(),
        )
        .map(|_| ())
    })?;
    let tol = sum_tol(dt);
    out.push(check(
        format!("{what} sums, y slice"),
        sums.as_deref(),
        &exact,
        tol,
    ));
    if dt != Dt::F32 {
        // Against f32 x: each x is rounded to 11 (f16) or 8 (bf16) significant bits, a relative
        // error of at most u = 2^-11 or 2^-8, so each sum moves by at most u * sum |w x| (S,
        // from the CPU kernel on |x| and |w|), on top of the summation's difference.
        let u = if dt == Dt::F16 { -11f32 } else { -8f32 }.exp2();
        let abs = |v: &[f32]| v.iter().map(|a| a.abs()).collect::<Vec<f32>>();
        let s = cpu_linear(c, &abs(&xc), m, k, &abs(&kn))?;
        let f32x = cpu_linear(c, &xc, m, k, &kn)?;
        let limit = u * max_abs(&s) / max_abs(&f32x) + tol;
        out.push(check(
            format!("{what} sums vs f32 x"),
            sums.as_deref(),
            &f32x,
            limit,
        ));
    }
    let width = if glu >= 0 { cols / 2 } else { cols };
    let want = host_epilogue(&exact, Some(&bias), cols, act, glu);
    let got = in_slice(c, (m, width, 2, width + 7), |y| {
        ops.gemm(
            blas,
            ty,
            &DenseLinear {
                w: dw.span(),
                x: dx.span(),
                bias: Some(db.span()),
                y,
            },
            shape(width + 7, glu),
            act,
            Halves::default(),
        )
        .map(|_| ())
    })?;
    let limit = epilogue_limit(tol, &exact, &want, act, glu);
    let epi = if glu >= 0 {
        ["SiLU", "GELU", "GELU tanh"][glu.clamp(0, 2) as usize].to_string() + " GLU"
    } else {
        format!("bias, act {act}")
    };
    out.push(check(
        format!("{what} {epi}, y slice"),
        got.as_deref(),
        &want,
        limit,
    ));
    Ok(out)
}

/// The epilogue kernel on given sums, bit for bit: the bias add and the activation rounding,
/// with round-to-nearest-even ties and overflow to infinity in the first columns.
fn epilogue_checks(c: &Ctx, ops: &Ops<'_>, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    let (m, n) = (5, 777);
    let tie = |bits: i32| 1.0 + (-(bits as f32)).exp2();
    let special = [
        tie(11),                     // f16 tie: down to 1
        1.0 + 3.0 * (-11f32).exp2(), // a tie: up, to even
        tie(8),                      // bf16 tie: down to 1
        1.0 + 3.0 * (-8f32).exp2(),
        65_520.0, // f16 overflow: infinity
        -65_520.0,
        (-20f32).exp2(), // an f16 subnormal
        3.0 * (-26f32).exp2(),
        -0.0,
    ];
    let mut sums: Vec<f32> = rng.vec(m * n).iter().map(|v| v * 300.0).collect();
    let mut bias = rng.vec(n);
    for (j, &v) in special.iter().enumerate() {
        sums[j] = v;
        bias[j] = 0.0;
    }
    let (ds, db) = (c.up(&sums)?, c.up(&bias)?);
    let mut out = Vec::new();
    for (act, with_bias) in [(0, true), (1, true), (1, false), (2, true), (2, false)] {
        let b = with_bias.then_some(bias.as_slice());
        let want = host_epilogue(&sums, b, n, act, -1);
        let got = in_slice(c, (m, n, 1, n + 2), |y| {
            let e = Epilogue {
                sums: ds.span(),
                bias: with_bias.then(|| db.span()),
                y,
                ldy: n + 2,
                m,
                n,
                act,
                glu: -1,
            };
            ops.gemm_epilogue(&e, None)
        })?;
        let same = got
            .as_ref()
            .is_some_and(|g| g.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()));
        let rel_diff = match got {
            Some(_) if same => 0.0,
            Some(g) => rel(&g, &want).max(f32::MIN_POSITIVE),
            None => f32::INFINITY,
        };
        out.push(Check {
            name: format!("gemm epilogue act {act} bias {with_bias} (bitwise)"),
            rel_diff,
            limit: 0.0,
        });
    }
    Ok(out)
}
