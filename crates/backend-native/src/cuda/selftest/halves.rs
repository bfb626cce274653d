//! The half copies a prompt GEMM reads instead of casting x (`HalfCopy`, blas.rs), bit for
//! bit: the norm's (`skip_norm_half_f32`) against the plain norm and the host's rounding of its
//! output, and a GEMM reading a copy of x, its epilogue writing one of y, against the same GEMM
//! casting x itself. The prompt attention merge's copy is checked with the attention
//! (`selftest.rs`).

use super::common::{Check, Ctx, Rng};
use super::gemm_check::gemm_type;
use super::linear::{Dt, bitwise_equal, rounded, weight_bytes};
use crate::cuda::blas::Blas;
use crate::cuda::kernels::{DenseLinear, LinearShape, NormRows, Ops, SkipNorm};
use crate::cuda::kernels::{GemmType, HalfCopy, Halves};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

/// `values` rounded to nearest even to bf16 (`ty` Bf16) or f16 (anything else), as bits.
pub(super) fn host_half(ty: GemmType, values: &[f32]) -> Vec<u16> {
    let one = |v: f32| match ty {
        GemmType::Bf16 => half::bf16::from_f32(v).to_bits(),
        _ => half::f16::from_f32(v).to_bits(),
    };
    values.iter().map(|&v| one(v)).collect()
}

fn verdict(ok: bool) -> (&'static str, f32) {
    if ok {
        ("bitwise equal", 0.0)
    } else {
        ("DIFFERENT", f32::INFINITY)
    }
}

/// A bitwise comparison's check: `name`, then whether it held.
pub(super) fn bitwise(name: String, ok: bool) -> Check {
    let (word, rel_diff) = verdict(ok);
    Check {
        name: format!("{name} {word}"),
        rel_diff,
        limit: 0.0,
    }
}

/// `m` rows of the norm with and without the half copy: (width, act, copy type).
pub(super) fn norm_checks(c: &Ctx, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    let cases = [
        (896, 1, GemmType::F16),
        (1536, 2, GemmType::Bf16),
        (4096, 1, GemmType::F16),
        (1000, 0, GemmType::F16),
        (3, 2, GemmType::Bf16),
    ];
    let m = 5;
    let mut checks = Vec::new();
    for (width, act, ty) in cases {
        let x: Vec<f32> = rng.vec(m * width).iter().map(|v| v * 40.0).collect();
        let weight: Vec<f32> = rng.vec(width).iter().map(|v| 1.0 + v).collect();
        let (dd, dw) = (c.up(&rng.vec(m * width))?, c.up(&weight)?);
        let run = |half: Option<HalfCopy>| -> Result<(Vec<f32>, Vec<f32>), Error> {
            let (dx, out) = (c.up(&x)?, DevBuf::<f32>::zeros(&c.stream, m * width)?);
            let norm = SkipNorm {
                x: dx.span(),
                delta: Some(dd.span()),
                weight: dw.span(),
                bias: None,
                out: out.span(),
                rows: NormRows::packed(m, width),
                eps: 1e-6,
                rms: true,
                write_sum: true,
                act,
            };
            c.ops().skip_norm_half(&norm, half)?;
            Ok((c.down(&out, m * width)?, c.down(&dx, m * width)?))
        };
        let (plain, plain_sum) = run(None)?;
        let dhalf = DevBuf::<u16>::zeros(&c.stream, m * width)?;
        let copy = HalfCopy {
            ptr: dhalf.ptr,
            ty,
            len: m * width,
        };
        let (out, sum) = run(Some(copy))?;
        let same = bitwise_equal(&plain, &out) && bitwise_equal(&plain_sum, &sum);
        let copied = c.down(&dhalf, m * width)? == host_half(ty, &out);
        checks.push(bitwise(
            format!(
                "skip_norm half copy {ty:?} width {width} act {act} m{m}: out, residual and \
                 copy"
            ),
            same && copied,
        ));
    }
    Ok(checks)
}

/// The GEMM cases: `(dt, m, k, n, act, bias, glu)`.
const GEMM_CASES: [(Dt, usize, usize, usize, i32, bool, i32); 5] = [
    (Dt::F16, 7, 896, 1152, 1, true, -1),
    (Dt::F16, 130, 896, 2 * 4864, 0, false, 0),
    (Dt::Bf16, 33, 1536, 2 * 1003, 0, true, 1),
    (Dt::Bf16, 256, 4864, 896, 2, false, -1),
    (Dt::F16, 9, 999, 77, 0, false, -1),
];

/// The GEMM cases' layers, `(type, k, n)`, for the scratch the checks' handle needs.
pub(super) fn gemm_layers() -> impl Iterator<Item = (GemmType, usize, usize)> {
    GEMM_CASES
        .iter()
        .map(|&(dt, _, k, n, ..)| (gemm_type(dt), k, n))
}

/// A GEMM fed x's half copy (x itself NaN) writing y's, against the GEMM casting x; with no
/// epilogue (no bias, rounding or GLU) no copy of y is made.
pub(super) fn gemm_checks(
    c: &Ctx,
    ops: &Ops<'_>,
    blas: &Blas,
    rng: &mut Rng,
) -> Result<Vec<Check>, Error> {
    let mut checks = Vec::new();
    for (dt, m, k, n, act, with_bias, glu) in GEMM_CASES {
        let ty = gemm_type(dt);
        let cols = if glu >= 0 { n / 2 } else { n };
        let x = rng.vec(m * k);
        let w = rounded(dt, &rng.vec(n * k));
        let (dw, dx) = (c.up(&weight_bytes(dt, &w, 0))?, c.up(&x)?);
        let bias = c.up(&rng.vec(n))?;
        let nan = c.up(&vec![f32::NAN; m * k])?;
        let dxh = c.up(&host_half(ty, &x))?;
        let dyh = DevBuf::<u16>::zeros(&c.stream, m * cols)?;
        let shape = LinearShape {
            m,
            k,
            n,
            ldx: k,
            ldy: cols,
            glu,
        };
        let bias = with_bias.then(|| bias.span());
        let run = |x, halves| -> Result<(Vec<f32>, Option<HalfCopy>), Error> {
            let y = DevBuf::<f32>::zeros(&c.stream, m * cols)?;
            let d = DenseLinear {
                w: dw.span(),
                x,
                bias,
                y: y.span(),
            };
            let copy = ops.gemm(blas, ty, &d, shape, act, halves)?;
            Ok((c.down(&y, m * cols)?, copy))
        };
        let (cast, none) = run(dx.span(), Halves::default())?;
        let x_copy = HalfCopy {
            ptr: dxh.ptr,
            ty,
            len: m * k,
        };
        let y_copy = HalfCopy {
            ptr: dyh.ptr,
            ty,
            len: m * cols,
        };
        let halves = Halves {
            x: Some(x_copy),
            y: Some(y_copy),
        };
        let (read, copy) = run(nan.span(), halves)?;
        let epilogue = with_bias || act != 0 || glu >= 0;
        let copy_ok = match copy {
            Some(h) => epilogue && h == y_copy && c.down(&dyh, m * cols)? == host_half(ty, &read),
            None => !epilogue,
        };
        let same = none.is_none() && bitwise_equal(&cast, &read);
        checks.push(bitwise(
            format!(
                "gemm {dt:?} m{m} k{k} n{n} act {act} bias {with_bias} glu {glu}: reading x's \
                 half copy, writing y's{}:",
                if epilogue { "" } else { " (none: no epilogue)" }
            ),
            same && copy_ok,
        ));
    }
    Ok(checks)
}
