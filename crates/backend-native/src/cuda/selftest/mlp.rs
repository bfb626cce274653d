//! Checks of the fused one-row MLP in both forms (`mlp_fused_*` and, where the device has
//! clusters, `mlp_walk_*`; kernels/mlp_fused.cu) and the norm that reads its sums
//! (`skip_norm_fixed_f32`): the down projection's sums against the host's MLP over the same
//! half-precision weights (f64 sums, the CPU decoder's activation kernels); the same sums bit for
//! bit on a second launch (the fixed-point adds do not depend on the blocks' order); the fixed
//! norm bit for bit against the plain norm given those sums as f32, and every sum word cleared
//! behind it. Shapes: the
//! Qwen2.5-0.5B MLP at its one-wave slice, a last block with fewer units than the slice, the
//! widest hidden row (2,048), a row narrower than a warp's pieces, each activation and the
//! gate/up bias; the walk also on a hidden row past its prefetched pieces and rows (1,536) and
//! a span only partly inside the intermediate units (inter 200, 8).

use super::halves::{bitwise, host_half};
use super::linear::bitwise_equal;
use super::{Check, Ctx, Rng};
use crate::cpu::kernels as cpu;
use crate::cuda::blas::GemmType;
use crate::cuda::kernels::{ACC_WORDS, FusedMlp, MlpForm, WALK_SPAN, fused_entry};
use crate::cuda::memory::DevBuf;
use crate::error::Error;

/// One case: weights' type, hidden, intermediate units, the slice a block takes, the GLU's
/// activation and whether gate/up has a bias.
type Case = (GemmType, usize, usize, usize, i32, bool);

const CASES: [Case; 5] = [
    (GemmType::F16, 896, 4864, 40, 0, false),
    (GemmType::Bf16, 256, 200, 24, 1, true),
    (GemmType::F16, 2048, 64, 8, 2, true),
    (GemmType::Bf16, 64, 8, 8, 0, false),
    (GemmType::Bf16, 1536, 8960, 0, 0, false),
];

/// The GLU's activation over the gate sums, by the CPU decoder's own kernels (the oracle):
/// 0 SiLU, 1 GELU (erf), 2 GELU (tanh).
fn cpu_activation(gates: &mut [f32], kind: i32) {
    match kind {
        0 => cpu::silu(gates),
        1 => cpu::gelu(gates),
        _ => cpu::gelu_tanh(gates),
    }
}

fn half_to_f64(ty: GemmType, bits: u16) -> f64 {
    match ty {
        GemmType::Bf16 => f64::from(half::bf16::from_bits(bits).to_f32()),
        _ => f64::from(half::f16::from_bits(bits).to_f32()),
    }
}

/// The fused checks: every case in the walk form where the device has it, and in the
/// one-wave form where the case names a slice.
pub(super) fn checks(c: &Ctx, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    let mut checks = Vec::new();
    if !c.kernels.mlp.walk {
        eprintln!(
            "NOT RUN: the walk form of the fused MLP: this device has no thread block clusters"
        );
    }
    for case in CASES {
        let mut forms = Vec::new();
        if case.3 > 0 {
            forms.push((MlpForm::Wave, case.3));
        }
        if c.kernels.mlp.walk {
            forms.push((MlpForm::Walk, WALK_SPAN));
        }
        let data = CaseData::new(c, rng, case)?;
        for (form, slice) in forms {
            checks.extend(form_checks(c, rng, &data, form, slice)?);
        }
    }
    Ok(checks)
}

/// A case's weights and input, on the host and on the device, and the host's sums.
struct CaseData {
    case: Case,
    dgu: DevBuf<u16>,
    dd: DevBuf<u16>,
    dx: DevBuf<f32>,
    dbias: Option<DevBuf<f32>>,
    want: Vec<f32>,
}

impl CaseData {
    fn new(c: &Ctx, rng: &mut Rng, case: Case) -> Result<CaseData, Error> {
        let (ty, hidden, inter, _, act, bias) = case;
        let wgu = host_half(ty, &rng.vec(2 * inter * hidden));
        let wd = host_half(ty, &rng.vec(hidden * inter));
        let x = rng.vec(hidden);
        let bgu: Vec<f32> = if bias { rng.vec(2 * inter) } else { Vec::new() };
        // The host's MLP over the same half weights: the sums in f64, the activation by the CPU
        // kernels.
        let dot = |row: usize| {
            let w = &wgu[row * hidden..(row + 1) * hidden];
            let b = if bias { f64::from(bgu[row]) } else { 0.0 };
            b + w
                .iter()
                .zip(&x)
                .map(|(&w, &x)| half_to_f64(ty, w) * f64::from(x))
                .sum::<f64>()
        };
        let mut gates: Vec<f32> = (0..inter).map(|j| dot(2 * j) as f32).collect();
        cpu_activation(&mut gates, act);
        let h: Vec<f64> = (0..inter)
            .map(|j| f64::from(gates[j]) * dot(2 * j + 1))
            .collect();
        let want: Vec<f32> = (0..hidden)
            .map(|o| {
                let row = &wd[o * inter..(o + 1) * inter];
                row.iter()
                    .zip(&h)
                    .map(|(&w, h)| half_to_f64(ty, w) * h)
                    .sum::<f64>() as f32
            })
            .collect();
        Ok(CaseData {
            case,
            dgu: c.up(&wgu)?,
            dd: c.up(&wd)?,
            dx: c.up(&x)?,
            dbias: if bias { Some(c.up(&bgu)?) } else { None },
            want,
        })
    }
}

/// One form's checks of a case: the sums against the host's, a second launch's bits, the norm.
fn form_checks(
    c: &Ctx,
    rng: &mut Rng,
    d: &CaseData,
    form: MlpForm,
    slice: usize,
) -> Result<Vec<Check>, Error> {
    let (ty, hidden, inter, _, act, bias) = d.case;
    let kind = if ty == GemmType::Bf16 {
        "gemv_bf16"
    } else {
        "gemv_f16"
    };
    let mut acc = DevBuf::<u64>::zeros(&c.stream, ACC_WORDS * hidden)?;
    let p = FusedMlp {
        form,
        entry: fused_entry(kind, form).ok_or(Error::Invalid {
            what: "selftest",
            why: format!("no fused entry for {kind} in {form:?}"),
        })?,
        slice,
        hidden,
        inter,
        gate_up: d.dgu.ptr,
        gate_up_bias: d.dbias.as_ref().map_or(0, |b| b.ptr),
        down: d.dd.ptr,
        activation: act,
    };
    c.ops().mlp_fused(&p, d.dx.ptr, acc.ptr)?;
    let words = c.down(&acc, ACC_WORDS * hidden)?;
    let stride = written_stride(&words);
    let sums: Vec<f32> = (0..hidden)
        .map(|o| (words[o * stride] as i64) as f32 * 2f32.powi(-32))
        .collect();
    let name =
        format!("mlp_fused {form:?} {ty:?} hidden {hidden} inter {inter} slice {slice} act {act}");
    let mut checks = vec![Check {
        name: format!("{name} bias {bias}: sums against the host's f64"),
        rel_diff: super::rel(&sums, &d.want),
        limit: 2e-5,
    }];
    // Again from zero: the same words.
    let zero = vec![0u64; ACC_WORDS * hidden];
    acc.write(&c.stream, &zero)?;
    c.ops().mlp_fused(&p, d.dx.ptr, acc.ptr)?;
    let again = c.down(&acc, ACC_WORDS * hidden)? == words;
    checks.push(bitwise(format!("{name}: a second launch's sums"), again));
    checks.push(norm_check(c, rng, &acc, &sums, hidden, ty)?);
    Ok(checks)
}

/// The words between two outputs' sums in a buffer one launch wrote from zero
/// (`MF_ACC_STRIDE`, as the run's defines set it): the largest power of two up to `ACC_WORDS`
/// whose other words all stayed zero.
fn written_stride(words: &[u64]) -> usize {
    let untouched = |s: usize| words.iter().enumerate().all(|(i, &w)| i % s == 0 || w == 0);
    [16, 8, 4, 2, 1]
        .into_iter()
        .find(|&s| s <= ACC_WORDS && untouched(s))
        .unwrap_or(1)
}

/// The fixed norm over `acc` against the plain norm over `sums` (the same values as f32), and
/// `acc` all zero after it.
fn norm_check(
    c: &Ctx,
    rng: &mut Rng,
    acc: &DevBuf<u64>,
    sums: &[f32],
    hidden: usize,
    ty: GemmType,
) -> Result<Check, Error> {
    let residual: Vec<f32> = rng.vec(hidden).iter().map(|v| v * 8.0).collect();
    let weight: Vec<f32> = rng.vec(hidden).iter().map(|v| 1.0 + v).collect();
    let dw = c.up(&weight)?;
    // Rounded to the weights' half kind, as that model's norm rounds.
    let act = if ty == GemmType::Bf16 { 2 } else { 1 };
    let (fx, fout) = (c.up(&residual)?, DevBuf::<f32>::zeros(&c.stream, hidden)?);
    let ops = c.ops();
    ops.skip_norm_fixed(
        (fx.ptr, acc.ptr),
        (dw.ptr, 0),
        fout.ptr,
        hidden,
        (1e-6, true),
        act,
    )?;
    let (px, pout, dd) = (
        c.up(&residual)?,
        DevBuf::<f32>::zeros(&c.stream, hidden)?,
        c.up(sums)?,
    );
    let rows = (1, hidden, 1, hidden);
    ops.skip_norm_half(
        px.ptr,
        dd.ptr,
        (dw.ptr, 0),
        pout.ptr,
        rows,
        (1e-6, true, true, act),
        None,
    )?;
    let same = bitwise_equal(&c.down(&fout, hidden)?, &c.down(&pout, hidden)?)
        && bitwise_equal(&c.down(&fx, hidden)?, &c.down(&px, hidden)?);
    let cleared = c.down(acc, ACC_WORDS * hidden)?.iter().all(|&w| w == 0);
    Ok(bitwise(
        format!(
            "skip_norm_fixed width {hidden} act {act}: out and residual against skip_norm, \
             sums cleared"
        ),
        same && cleared,
    ))
}
