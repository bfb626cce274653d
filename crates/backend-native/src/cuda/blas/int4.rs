//! Prompt rows of CompFp32 MatMulNBits layers through cuBLAS: each slice of the weight's
//! columns is dequantised (`dequant_int4_*` in kernels/blas.cu, w = (q - zp) * scale in f32 as
//! the GEMV computes it, stored in the layer's scale type) into the generation's scratch, and
//! one GEMM per slice writes those columns of the sums; the epilogue then runs once over all of
//! them. With half-precision scales this is what the ONNX Runtime CUDA EP computes (fp16
//! dequantisation, f32 sums); with f32 scales the same values as the GEMV in another summation
//! order. Prompts of up to 32 rows where it suits take `gemm_int4_skinny*_*` instead
//! (kernels/int4_skinny.cu: the same rounded weights, dequantised in the kernel's own loads).
//! CompInt8 layers (int8 activations) keep the GEMV kernels: their semantics differ.

use super::dense::{GemmIo, elementwise_blocks, gemm_blas};
use super::handle::{Blas, ColMajor};
use super::slices::dequant_cols_in;
use crate::cuda::kernels::{GemmType, HalfCopy, Halves};
use crate::cuda::kernels::{Int4Fp32, Int4Linear, LinearShape, Ops};
use crate::cuda::launch::{cfg, int, launch};
use crate::cuda::memory::DevPtr;
use crate::error::Error;

/// A MatMulNBits weight on the device: packed data, f32 scales, f32 zero points (0: none).
pub(crate) type Int4Parts = (DevPtr, DevPtr, DevPtr);

impl Ops<'_> {
    /// A CompFp32 MatMulNBits layer: through cuBLAS for `MIN_ROWS` rows or more when the pass
    /// has a handle (`blas`) with a dequantisation scratch, else the GEMV kernels. Returns y's half copy
    /// if the GEMM wrote it.
    #[allow(clippy::too_many_arguments)]
    pub fn int4_fp32(
        &self,
        blas: Option<&Blas>,
        l: &Int4Linear<'_>,
        form: Int4Fp32,
        prompt: GemmType,
        s: LinearShape,
        act: i32,
        halves: Halves,
    ) -> Result<Option<HalfCopy>, Error> {
        match gemm_blas(blas, s.m, true) {
            Some(blas) => {
                let layer = (form.block, form.integral_zp);
                self.gemm_int4(blas, l, layer, prompt, s, act, halves)
            }
            None => self.gemv_int4_f32(l, form, s, act).map(|()| None),
        }
    }

    /// y = x W (+ bias) for an int4 W (in blocks of `block`, its zero points integral or not)
    /// through dequantised column slices and cuBLAS GEMMs, or for a few rows the skinny kernel.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_int4(
        &self,
        blas: &Blas,
        l: &Int4Linear<'_>,
        (block, integral_zp): (usize, bool),
        ty: GemmType,
        s: LinearShape,
        act: i32,
        halves: Halves,
    ) -> Result<Option<HalfCopy>, Error> {
        let (k, n) = (s.k, s.n);
        if block < 2 || !block.is_multiple_of(2) {
            return Err(Error::Invalid {
                what: "int4 GEMM",
                why: format!("block size {block} is not even"),
            });
        }
        // The dequantisation reads the weight the GEMV would (f32 zero points); `gemm_with`
        // checks x, the bias and y.
        let [packed, scales, zp] = l.check_weight("gemm_int4", &s, block, 4)?;
        let io = GemmIo {
            x: l.x,
            bias: l.bias,
            y: l.y,
        };
        let cols = dequant_cols_in(k, n, self.k.tuning.dequant_values);
        if cols * k * ty.size() > blas.dequant.len {
            return Err(Error::Invalid {
                what: "int4 GEMM",
                why: format!("{cols} × {k} dequantised values exceed the scratch"),
            });
        }
        let name = match ty {
            GemmType::F32 => "dequant_int4_f32",
            GemmType::F16 => "dequant_int4_f16",
            GemmType::Bf16 => "dequant_int4_bf16",
        };
        let f = self.k.get(name)?;
        let (ki, bs) = (int("k", k)?, int("block", block)?);
        let scratch = blas.dequant.ptr;
        self.gemm_with(blas, ty, io, s, act, halves, |b, ldb, c, ldc| {
            let layer = (k, block, integral_zp);
            let rows = (s.m, self.k.tuning.int4_skinny_rows);
            let entry = skinny_entry(ty, rows, layer, (packed, b, ldb)).filter(|_| self.k.mma);
            if let Some(entry) = entry {
                let scratch = (blas.dequant.ptr, blas.dequant.len / 4);
                let parts = (packed, scales, zp);
                return self.skinny(entry, parts, (b, ldb), (c, ldc), s, block, scratch);
            }
            for first in (0..n).step_by(cols) {
                let rows = cols.min(n - first);
                let (fi, ri) = (int("column", first)?, int("columns", rows)?);
                let grid = elementwise_blocks(dequant_items(rows, k, block));
                let launch_cfg = cfg((grid, 1, 1), 256, 0);
                launch!(
                    self, f, launch_cfg, &packed, &scales, &zp, &scratch, &fi, &ri, &ki, &bs
                )?;
                let slice = ColMajor::of(s.m, k, rows, ldb, ldc)?;
                blas.gemm(ty, slice, (scratch, b, c + 4 * first as u64))?;
            }
            Ok(())
        })
    }
}

/// Rows of x one row tile of the skinny kernel covers (the mma's 16 a rows); its `2` entries
/// take two tiles.
const SKINNY_TILE_ROWS: usize = 16;
/// Weight columns a block of the skinny kernel takes (`SKINNY_COLS`).
const SKINNY_COLS: usize = 32;
/// Warps of a skinny block (`SKINNY_WARPS`).
const SKINNY_WARPS: u32 = 8;

/// What the prompt route says of CompFp32 int4 layers with up to `skinny_rows` rows through the
/// skinny kernel (`CudaTuning::int4_skinny_rows`).
pub(crate) fn route_note(skinny_rows: usize) -> String {
    let copy = "dequantised slices and cuBLAS GEMMs";
    match skinny_rows {
        0 => format!("int4 weights: {copy} ({}=0)", crate::settings::INT4_SKINNY),
        rows => format!(
            "int4 weights: up to {rows} rows a tensor-core GEMM that dequantises in its loads \
             (sm_80 and later, scales of the activations' type, integral zero points), \
             else {copy}"
        ),
    }
}

/// The skinny entry for a layer of `k` inputs in blocks of `block` over `m` rows of x in `ty`
/// at `x16` (rows `ldx` apart) with its packed weight at `packed`, where it may run
/// ([`skinny_takes`]: up to `rows` rows), the packed weight and x's rows 16-byte aligned.
fn skinny_entry(
    ty: GemmType,
    (m, rows): (usize, usize),
    (k, block, integral_zp): (usize, usize, bool),
    (packed, x16, ldx): (DevPtr, DevPtr, usize),
) -> Option<&'static str> {
    let entry = match (ty, m > SKINNY_TILE_ROWS) {
        (GemmType::F16, false) => "gemm_int4_skinny_f16",
        (GemmType::Bf16, false) => "gemm_int4_skinny_bf16",
        (GemmType::F16, true) => "gemm_int4_skinny2_f16",
        (GemmType::Bf16, true) => "gemm_int4_skinny2_bf16",
        (GemmType::F32, _) => return None,
    };
    let aligned = packed.is_multiple_of(16) && x16.is_multiple_of(16) && ldx.is_multiple_of(8);
    (aligned && skinny_takes(ty, (m, rows), k, block, integral_zp)).then_some(entry)
}

/// Whether a layer of this shape takes the skinny kernel where its pointers are aligned (the
/// selftest names the cases that do): `m` rows of 16-bit x, at most `rows` (the tuning's) and
/// two tiles (the scales are then of x's type, read from the model's f16 or bf16 scales: exact in
/// it, which the kernel's pair arithmetic needs), k and the block multiples of 32 (whole
/// 32-value groups, each in one block), and integral zero points.
pub(crate) fn skinny_takes(
    ty: GemmType,
    (m, rows): (usize, usize),
    k: usize,
    block: usize,
    integral_zp: bool,
) -> bool {
    ty != GemmType::F32
        && m <= rows.min(2 * SKINNY_TILE_ROWS)
        && k.is_multiple_of(32)
        && block.is_multiple_of(32)
        && integral_zp
}

/// Runs of k groups the skinny launch splits a layer of `groups` groups of 32 values into, and
/// the groups a run (a multiple of 4: the kernel's warps take quads of groups): enough runs
/// that `columns` column blocks a run make `wanted` blocks (about two waves), at most one a 32
/// groups (a quad a warp), at most `room_runs` (what the partial sums' scratch holds), at
/// least one.
fn skinny_runs(groups: usize, columns: usize, wanted: usize, room_runs: usize) -> (usize, usize) {
    let runs = wanted
        .div_ceil(columns.max(1))
        .min(groups / 32)
        .min(room_runs)
        .max(1);
    let per = groups.div_ceil(runs).next_multiple_of(4).max(4);
    (groups.div_ceil(per).max(1), per)
}

/// Blocks of the skinny kernel an SM holds (its launch bounds: 2 at 256 threads).
const SKINNY_PER_SM: usize = 2;
/// Waves of skinny blocks a launch aims for.
const SKINNY_WAVES: usize = 2;

impl Ops<'_> {
    /// The sums `c` (rows `ldc` apart) of an int4 layer over x's 16-bit copy through
    /// `gemm_int4_skinny_*` (`entry`): in runs of k groups over about two waves of blocks, their
    /// partial sums in the dequantisation scratch (`part`, `room` f32 values) added in run order
    /// by `skinny_sum_f32`, or one run straight into c.
    #[allow(clippy::too_many_arguments)]
    fn skinny(
        &self,
        entry: &'static str,
        (packed, scales, zp): Int4Parts,
        (x16, ldx): (DevPtr, usize),
        (c, ldc): (DevPtr, usize),
        s: LinearShape,
        block: usize,
        (part, room): (DevPtr, usize),
    ) -> Result<(), Error> {
        let (m, k, n) = (s.m, s.k, s.n);
        let columns = n.div_ceil(SKINNY_COLS);
        let wanted = SKINNY_WAVES * SKINNY_PER_SM * self.k.sms();
        let (runs, per) = skinny_runs(k / 32, columns, wanted, room / (m * n).max(1));
        let dim = |what: &'static str, v: usize| {
            u32::try_from(v).map_err(|_| Error::Invalid {
                what: "int4 GEMM",
                why: format!("{v} {what}"),
            })
        };
        let f = self.k.get(entry)?;
        let grid = (dim("column blocks", columns)?, dim("runs", runs)?, 1);
        let launch_cfg = cfg(grid, 32 * SKINNY_WARPS, 0);
        let (ldxi, ldci, mi, ni) = (
            int("ldx", ldx)?,
            int("ldc", ldc)?,
            int("m", m)?,
            int("n", n)?,
        );
        let (ki, bs, pi) = (
            int("k", k)?,
            int("block", block)?,
            int("groups a run", per)?,
        );
        launch!(
            self, f, launch_cfg, &x16, &ldxi, &packed, &scales, &zp, &c, &ldci, &part, &mi, &ni,
            &ki, &bs, &pi
        )?;
        if runs == 1 {
            return Ok(());
        }
        let (sum, ri) = (self.k.get("skinny_sum_f32")?, int("runs", runs)?);
        let sum_cfg = cfg((elementwise_blocks(m * n), 1, 1), 256, 0);
        launch!(self, sum, sum_cfg, &part, &ri, &mi, &ni, &c, &ldci)
    }
}

/// Values a thread of the dequantisation's vector path takes (`DEQUANT_GROUP`).
const DEQUANT_GROUP: usize = 16;

/// Threads `dequant_int4_*` wants for `rows` columns of `k` values in blocks of `block`: one a
/// group of 16 values where k and the block are multiples of 16 (the vector path), else one a
/// packed byte. The kernel walks the grid in strides, so fewer (the cap) still covers them.
/// (Four groups a thread, their loads issued first, measured slower: round 35, 20.3 against
/// 15.3 µs a 16 Mi-value slice under ncu.)
fn dequant_items(rows: usize, k: usize, block: usize) -> usize {
    if k.is_multiple_of(DEQUANT_GROUP) && block.is_multiple_of(DEQUANT_GROUP) {
        rows * (k / DEQUANT_GROUP)
    } else {
        rows * k.div_ceil(2)
    }
}

#[cfg(test)]
mod tests {
    use super::{dequant_items, skinny_runs};

    #[test]
    fn the_skinny_runs_fill_two_waves_within_the_scratch() {
        // Llama-3-8B down (k 14,336: 448 groups; 128 column blocks) on 132 SMs, 528 blocks
        // wanted: 5 runs of 92 groups (23 quads; the last 80).
        assert_eq!(skinny_runs(448, 128, 528, usize::MAX), (5, 92));
        // Wide layers take one run; so do short rows (fewer than 32 groups).
        assert_eq!(skinny_runs(128, 896, 528, usize::MAX), (1, 128));
        assert_eq!(skinny_runs(28, 28, 528, usize::MAX), (1, 28));
        // The scratch bounds the runs; none fits: one run.
        assert_eq!(skinny_runs(448, 128, 528, 3), (3, 152));
        assert_eq!(skinny_runs(448, 128, 528, 0), (1, 448));
        // Llama-3-8B o (128 groups, 128 blocks): a quad a warp, 4 runs.
        assert_eq!(skinny_runs(128, 128, 528, usize::MAX), (4, 32));
        for (groups, columns, room) in [(448, 128, 99), (280, 48, 9), (48, 64, 99), (1, 1, 1)] {
            let (runs, per) = skinny_runs(groups, columns, 528, room);
            assert!(runs >= 1 && runs <= room.max(1) && per.is_multiple_of(4));
            // Every group in exactly one run, no run empty.
            assert!(runs * per >= groups && (runs - 1) * per < groups);
        }
    }

    #[test]
    fn the_vector_path_takes_a_thread_for_sixteen_values() {
        assert_eq!(dequant_items(3, 4096, 32), 3 * 256);
        assert_eq!(dequant_items(3, 4096, 16), 3 * 256);
        // k or the block not a multiple of 16: a thread a packed byte.
        assert_eq!(dequant_items(2, 1000, 16), 2 * 500);
        assert_eq!(dequant_items(2, 999, 64), 2 * 500);
        assert_eq!(dequant_items(2, 1024, 8), 2 * 512);
    }
}
