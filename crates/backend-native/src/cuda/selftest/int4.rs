//! Checks of the int4 (MatMulNBits) linear kernels — CompFp32 and CompInt8, one row
//! (`gemv_decode_int4_*`) and several — against the CPU kernels: every block size, k not a
//! multiple of the block or of 32 (a half chunk at block size 16), odd n, one to four warps per
//! column pair, the bias and activation-rounding epilogue and the GLU pairs, with and without
//! zero points. Every case runs twice, the second time with the packed weights, x and the int8
//! scratch moved off 16-byte alignment, and the two results must be equal bit for bit.

use super::common::{Check, Ctx, Rng};
use super::epilogue::{epilogue_limit, host_epilogue};
use super::linear::{bitwise_equal, shifted_f32, verdict};
use crate::cpu::kernels::{self as cpu, Int4Weight, Scales, Weight, ZeroPoints};
use crate::cuda::kernels::{Int4Fp32, Int4Linear, LinearShape};
use crate::cuda::memory::DevBuf;
use crate::cuda::span::DevSpan;
use crate::error::Error;

/// One case: `m` rows, `k` inputs, `n` outputs (with `glu >= 0`, `n` (gate, up) pairs of
/// weight rows and `glu` the gate's activation), block size `bs`, accuracy level `acc` (4:
/// CompInt8), a bias or none, rounding to `act` (0 f32, 1 f16, 2 bf16), zero points or the
/// default 8; `tensor`: one row may take the tensor-core kernel (CompFp32); x scaled by
/// `x_scale` (the tensor-core kernel rescales x into the f16 range per launch).
#[derive(Debug, Clone, Copy)]
pub(super) struct Int4 {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub bs: usize,
    pub acc: i64,
    pub glu: i32,
    pub bias: bool,
    pub act: i32,
    pub zp: bool,
    pub tensor: bool,
    pub x_scale: f32,
}

impl Int4 {
    /// Weight rows (columns of the layer).
    fn cols(&self) -> usize {
        if self.glu >= 0 { 2 * self.n } else { self.n }
    }
}

/// The int4 cases `selftest::run` checks, each at accuracy levels 0 and 4.
pub(super) fn cases() -> Vec<Int4> {
    let plain = |(m, k, n, bs)| Int4 {
        m,
        k,
        n,
        bs,
        acc: 0,
        glu: -1,
        bias: false,
        act: 0,
        zp: true,
        tensor: false,
        x_scale: 1.0,
    };
    let mut all: Vec<Int4> = [
        (1, 1536, 2048, 32),
        (1, 8960, 1536, 32), // four warps per column pair
        (1, 896, 1152, 16),
        (1, 4096, 64, 128),
        (1, 14336, 96, 64), // CompFp32 multi-row: too wide to stage
        (1, 64, 1536, 64),
        (1, 200, 33, 16),  // an odd block count: a half chunk at the end
        (1, 2984, 77, 16), // a half chunk, two warps per column pair, odd n
        (1, 64, 33, 64),
        (3, 1000, 77, 16),
        (3, 200, 33, 128),
        (4, 8960, 64, 32),
        (5, 4096, 40, 256),
        (2, 4096, 896, 256),
    ]
    .into_iter()
    .map(plain)
    .collect();
    all.extend([
        Int4 {
            bias: true,
            act: 1,
            ..plain((1, 999, 13, 32)) // odd k
        },
        Int4 {
            bias: true,
            act: 2,
            ..plain((1, 4100, 40, 256)) // k not a multiple of the block, four warps
        },
        Int4 {
            bias: true,
            act: 1,
            zp: false,
            ..plain((1, 1536, 896, 32))
        },
        Int4 {
            zp: false,
            ..plain((1, 4096, 64, 128))
        },
        Int4 {
            glu: 0,
            bias: true,
            ..plain((1, 1536, 512, 32))
        },
        Int4 {
            glu: 1,
            ..plain((1, 8960, 48, 128)) // four warps per (gate, up) pair
        },
        Int4 {
            glu: 2,
            zp: false,
            ..plain((1, 200, 13, 16))
        },
        Int4 {
            glu: 0,
            bias: true,
            ..plain((3, 896, 50, 32))
        },
        Int4 {
            bias: true,
            act: 1,
            ..plain((2, 1000, 77, 16))
        },
        // Many 16-row work items (blocks) on the tensor-core kernel, plain and GLU.
        plain((1, 64, 40_000, 32)),
        Int4 {
            glu: 0,
            bias: true,
            ..plain((1, 128, 20_000, 64))
        },
        Int4 {
            x_scale: 1.0e6, // beyond f16: the tensor-core kernel scales x down
            ..plain((1, 4096, 96, 32))
        },
        Int4 {
            x_scale: 1.0e-7, // f16 subnormals unless scaled up
            ..plain((1, 4096, 96, 128))
        },
    ]);
    // Each case at CompInt8 and at CompFp32 through both one-row kernels.
    all.into_iter()
        .flat_map(|c| {
            [(4, false), (0, false), (0, true)].map(|(acc, tensor)| Int4 { acc, tensor, ..c })
        })
        .filter(|c| !c.tensor || c.m == 1)
        .collect()
}

/// The case's name: shape, accuracy level, epilogue.
fn name(case: &Int4) -> String {
    let Int4 { m, k, bs, acc, .. } = *case;
    let mut name = format!(
        "int4 m{m} k{k} n{} bs{bs} accuracy_level {acc}",
        case.cols()
    );
    if case.glu >= 0 {
        name += [" SiLU GLU", " GELU GLU", " GELU tanh GLU"][case.glu.clamp(0, 2) as usize];
    }
    if case.bias {
        name += " bias";
    }
    if case.act != 0 {
        name += &format!(" act {}", case.act);
    }
    if !case.zp {
        name += " zp 8";
    }
    if case.x_scale != 1.0 {
        name += &format!(" x * {:e}", case.x_scale);
    }
    name
}

pub(super) fn check(c: &Ctx, rng: &mut Rng, case: Int4) -> Result<Check, Error> {
    let Int4 {
        m,
        k,
        bs,
        acc,
        glu,
        act,
        ..
    } = case;
    let (cols, nb) = (case.cols(), k.div_ceil(bs));
    let width = if glu >= 0 { case.n } else { cols };
    let packed = rng.bytes(cols * nb * bs / 2);
    // Tensor-core cases take f16-exact scales, so that their second run can read them as f16
    // (`gemv_decode_int4_mma_s16`) and must still equal the first bit for bit.
    let scales: Vec<f32> = rng
        .vec(cols * nb)
        .iter()
        .map(|v| v * 0.05)
        .map(|s| match case.tensor {
            true => half::f16::from_f32(s).to_f32(),
            false => s,
        })
        .collect();
    let scales_f16: Vec<u16> = scales
        .iter()
        .map(|&s| half::f16::from_f32(s).to_bits())
        .collect();
    let zp = rng.bytes(cols * nb.div_ceil(2));
    let x: Vec<f32> = rng.vec(m * k).iter().map(|v| v * case.x_scale).collect();
    let bias = rng.vec(cols);
    let w = Int4Weight::new(
        k,
        cols,
        bs,
        acc,
        &packed,
        Scales::F32(&scales),
        case.zp.then_some(ZeroPoints::Packed4(&zp)),
    )?;
    // The CPU sums, then the epilogue on the host (GLU: rows 2j and 2j + 1 are a pair).
    let mut sums = vec![0f32; m * cols];
    cpu::linear(&x, m, &Weight::Int4(w), None, &mut sums, &c.pool)?;
    let want = host_epilogue(&sums, case.bias.then_some(&bias[..]), cols, act, glu);
    let mut zu = Vec::with_capacity(cols * nb);
    for col in zp.chunks(nb.div_ceil(2)) {
        zu.extend((0..nb).map(|b| (col[b / 2] >> (4 * (b % 2))) & 0x0f));
    }
    let zf: Vec<f32> = zu.iter().map(|&z| f32::from(z)).collect();
    // The packed data once aligned, once 4 bytes on (word loads only).
    let p_al = c.up(&packed)?;
    let p_sh = c.up(&[vec![0u8; 4], packed.clone()].concat())?;
    let (ds, x_al, x_sh) = (c.up(&scales)?, c.up(&x)?, shifted_f32(c, &x)?);
    let ds16 = c.up(&scales_f16)?;
    let (dzu, dzf, db) = (c.up(&zu)?, c.up(&zf)?, c.up(&bias)?);
    let (zu, zf) = if case.zp {
        (Some(dzu.span()), Some(dzf.span().as_bytes()))
    } else {
        (None, None)
    };
    let bias = case.bias.then(|| db.span());
    // CompInt8 scratch, 16 bytes spare: the second run moves qa 8 bytes on.
    let qa = DevBuf::<i8>::zeros(&c.stream, m * nb * bs + 16)?;
    let sa = DevBuf::<f32>::zeros(&c.stream, m * nb)?;
    let s = LinearShape {
        m,
        k,
        n: cols,
        ldx: k,
        ldy: width,
        glu,
    };
    let run = |p: DevSpan<'_, u8>, x: DevSpan<'_, f32>, q: DevSpan<'_, i8>, half: bool, wide| {
        let dy = DevBuf::<f32>::zeros(&c.stream, m * width)?;
        let mut l = Int4Linear {
            packed: p,
            scales: ds.span(),
            scales_f16: half.then(|| ds16.span()),
            zp: zf,
            x,
            bias,
            y: dy.span(),
        };
        if acc == 4 {
            l.zp = zu;
            c.ops().gemv_int4_i8(&l, bs, (q, sa.span()), s, act)?;
        } else {
            let form = Int4Fp32 {
                block: bs,
                integral_zp: case.tensor,
            };
            c.ops().gemv_int4_f32_entry(&l, form, s, act, wide)?;
        }
        c.down(&dy, m * width)
    };
    let first = run(p_al.span(), x_al.span(), qa.span(), false, None)?;
    let shifted = (p_sh.span_from(4)?, x_sh.span_from(1)?, qa.span_from(8)?);
    let mut again = run(shifted.0, shifted.1, shifted.2, case.tensor, None)?;
    let limit = epilogue_limit(1e-5, &sums, &want, act, glu);
    let mut name = name(&case);
    if case.tensor {
        let mma = c.ops().int4_mma_fits(&s, bs, true);
        if mma {
            // Both entries, whichever the rule picked first: the same bits again.
            for wide in [false, true] {
                let forced = run(p_al.span(), x_al.span(), qa.span(), true, Some(wide))?;
                if !bitwise_equal(&forced, &first) {
                    again = forced;
                }
            }
        }
        name += if mma {
            " tensor cores (f32 scales, then f16 scales shifted, deep and wide)"
        } else {
            " (tensor cores do not fit: scalar)"
        };
    }
    Ok(verdict(name, &first, &again, &want, limit))
}
