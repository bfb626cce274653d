//! The MatMulNBits (int4) launches: one-row layers through `kernels/int4_decode.cu` (or the
//! tensor-core `kernels/int4_mma.cu`), several rows through `kernels/int4.cu`; and the one-row
//! kernels' split rule.

use super::ops::Ops;
use super::shape::{DEC_COLS, DEC_WARPS, LinearShape, TARGET_WARPS, stage_bytes};
use crate::cuda::launch::{cfg, grid_dim, int, launch};
use crate::cuda::memory::DevPtr;
use crate::cuda::span::{DevSpan, need_opt};
use crate::error::Error;
use cudarc::driver::LaunchConfig;

/// Chunks (16 bytes, 32 values) per column a lane of `gemv_decode_int4_*` loads per round
/// (`I4D_LOADS` in kernels/int4_decode.cu).
const I4D_LOADS: usize = 2;
/// Values of a row one warp of those kernels covers with one chunk per lane: the split stops
/// before a warp would get fewer.
const WARP_VALUES: usize = 32 * 32;
/// Values of a row one warp covers in two load rounds: longer rows are split further.
const ROUND_VALUES: usize = 2 * I4D_LOADS * WARP_VALUES;

/// How a CompFp32 layer's GEMV may run: its block size, whether its zero points are integers
/// (or absent; the tensor cores need them), and the model's f16 scales where the layer's image
/// holds them as well (0: it does not; `host.rs`), which the tensor-core kernel then reads
/// instead of the f32 ones: half the scale bytes, the same values.
#[derive(Debug, Clone, Copy)]
pub struct Int4Fp32 {
    pub block: usize,
    pub integral_zp: bool,
}

/// The buffers of one MatMulNBits linear: the packed weight `[n, nb, block / 2]` bytes, its
/// scales `[n, nb]` (f32, and as f16 bits where the layer's image keeps them: `Int4Fp32`),
/// its zero points one a block (as bytes: f32 for CompFp32, u8 for CompInt8), x `[m, ldx]`,
/// the bias `[n]`, y `[m, ldy]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Int4Linear<'a> {
    pub packed: DevSpan<'a, u8>,
    pub scales: DevSpan<'a, f32>,
    pub scales_f16: Option<DevSpan<'a, u16>>,
    pub zp: Option<DevSpan<'a, u8>>,
    pub x: DevSpan<'a, f32>,
    pub bias: Option<DevSpan<'a, f32>>,
    pub y: DevSpan<'a, f32>,
}

impl Int4Linear<'_> {
    /// The addresses (packed, f32 scales, zero points or 0, x, bias or 0, y), each checked to
    /// hold what `kernel` reads or writes over `s` in blocks of `block` with zero points of
    /// `zp_bytes` bytes each.
    pub(crate) fn check(
        &self,
        kernel: &'static str,
        s: &LinearShape,
        block: usize,
        zp_bytes: usize,
    ) -> Result<[DevPtr; 6], Error> {
        let [packed, scales, zp] = self.check_weight(kernel, s, block, zp_bytes)?;
        Ok([
            packed,
            scales,
            zp,
            self.x.need(kernel, "x", s.x_extent())?,
            need_opt(self.bias, kernel, "bias", s.n)?,
            self.y.need(kernel, "y", s.y_extent())?,
        ])
    }

    /// The weight's addresses (packed, f32 scales, zero points or 0), checked as
    /// [`Int4Linear::check`] checks them.
    pub(crate) fn check_weight(
        &self,
        kernel: &'static str,
        s: &LinearShape,
        block: usize,
        zp_bytes: usize,
    ) -> Result<[DevPtr; 3], Error> {
        let blocks = s.n * s.k.div_ceil(block);
        Ok([
            self.packed.need(kernel, "packed", blocks * block / 2)?,
            self.scales.need(kernel, "scales", blocks)?,
            need_opt(self.zp, kernel, "zero points", blocks * zp_bytes)?,
        ])
    }
}

/// MatMulNBits block sizes the int4 kernels take (32-value chunks cover one or two blocks).
pub(super) fn check_block(block: usize) -> Result<i32, Error> {
    if ![16, 32, 64, 128, 256].contains(&block) {
        return Err(Error::Invalid {
            what: "block_size",
            why: format!("{block} (16, 32, 64, 128 or 256)"),
        });
    }
    int("block_size", block)
}

/// The packed rows are read in words at least: a 4-byte aligned address.
fn check_packed(packed: DevPtr) -> Result<(), Error> {
    if !packed.is_multiple_of(4) {
        return Err(Error::Invalid {
            what: "int4 weight",
            why: format!("packed data at {packed:#x} is not 4-byte aligned"),
        });
    }
    Ok(())
}

impl LinearShape {
    /// The CompInt8 stage of the multi-row kernels: block scales, then int8 rows
    /// (`int4_i8_body`).
    pub(super) fn stage_i8(&self, block: usize) -> u32 {
        let (nb, rows) = (self.k.div_ceil(block), self.block_rows());
        stage_bytes((rows * nb * 4).next_multiple_of(16) + rows * nb * block)
    }

    /// Warps sharing a column pair in `gemv_decode_int4_*`: doubled (up to [`DEC_WARPS`])
    /// while the launch has fewer than [`TARGET_WARPS`] warps and each warp keeps at least one
    /// chunk per lane, and further while a warp would walk more than two load rounds. Depends
    /// on (k, n) only.
    pub(super) fn decode_split_int4(&self) -> usize {
        let pairs = self.n.div_ceil(DEC_COLS);
        let mut split = 1;
        while split < DEC_WARPS
            && ((pairs * split < TARGET_WARPS && self.k / (split * 2) >= WARP_VALUES)
                || self.k.div_ceil(split) > ROUND_VALUES)
        {
            split *= 2;
        }
        split
    }
}

impl Ops<'_> {
    /// MatMulNBits linear, dequantising to f32 (CompFp32); one row may run on the tensor cores
    /// (`gemv_decode_int4_mma*`, on the f16 scales where the layer has them) as `form` allows.
    pub fn gemv_int4_f32(
        &self,
        l: &Int4Linear<'_>,
        form: Int4Fp32,
        s: LinearShape,
        act: i32,
    ) -> Result<(), Error> {
        self.gemv_int4_f32_entry(l, form, s, act, None)
    }

    /// [`Ops::gemv_int4_f32`], with the tensor-core entry forced deep or wide where `wide` says
    /// (the self-test runs both).
    pub(crate) fn gemv_int4_f32_entry(
        &self,
        l: &Int4Linear<'_>,
        form: Int4Fp32,
        s: LinearShape,
        act: i32,
        wide: Option<bool>,
    ) -> Result<(), Error> {
        let (m, k, n, ldx, ldy, split) = s.check()?;
        let block = form.block;
        let bs = check_block(block)?;
        let [packed, scales, zp, x, bias, y] = l.check("gemv_int4_f32", &s, block, 4)?;
        check_packed(packed)?;
        if s.m == 1 {
            // The tensor-core kernels take the scalar one's arguments (`_s16`: f16 scales).
            let half = l.scales_f16.is_some();
            let (name, config, split, mma) =
                self.int4_one_row(&s, block, form.integral_zp, half, wide)?;
            let f = self.k.get(name)?;
            let split = int("split", split)?;
            let scales = match l.scales_f16 {
                Some(half_scales) if mma && half => {
                    let blocks = s.n * s.k.div_ceil(block);
                    half_scales.need(name, "f16 scales", blocks)?
                }
                _ => scales,
            };
            return launch!(
                self, f, config, &packed, &scales, &zp, &x, &bias, &y, &n, &k, &bs, &split, &s.glu,
                &act
            );
        }
        let f = self.k.get("gemv_int4_f32")?;
        let shared = s.stage_f32(s.k.div_ceil(block) * block);
        launch!(
            self,
            f,
            cfg(s.grid()?, 256, shared),
            &packed,
            &scales,
            &zp,
            &x,
            &ldx,
            &bias,
            &y,
            &ldy,
            &n,
            &k,
            &m,
            &bs,
            &split,
            &s.glu,
            &act
        )
    }

    /// Whether one row of a CompFp32 layer of this shape runs on the tensor cores here
    /// (`Int4Mma::fits`).
    pub(crate) fn int4_mma_fits(&self, s: &LinearShape, block: usize, integral_zp: bool) -> bool {
        self.k.int4_mma.fits(s, block, integral_zp)
    }

    /// The kernel, launch and split of one CompFp32 int4 row of this shape, and whether it is
    /// the tensor-core kernel: that where it fits (on the f16 scales where `half`: the layer
    /// has them; `wide` forces its entry), else `gemv_decode_int4_f32`.
    pub(crate) fn int4_one_row(
        &self,
        s: &LinearShape,
        block: usize,
        integral_zp: bool,
        half: bool,
        wide: Option<bool>,
    ) -> Result<(&'static str, LaunchConfig, usize, bool), Error> {
        if self.int4_mma_fits(s, block, integral_zp) {
            let (name, config, split) = self.k.int4_mma.config(s, block, half, wide)?;
            Ok((name, config, split, true))
        } else {
            let split = s.decode_split_int4();
            let config = cfg(s.decode_grid(split)?, 32 * DEC_WARPS as u32, 0);
            Ok(("gemv_decode_int4_f32", config, split, false))
        }
    }

    /// MatMulNBits linear with int8 activations (CompInt8): quantizes x into `qa`/`sa`, then
    /// the integer products.
    pub fn gemv_int4_i8(
        &self,
        l: &Int4Linear<'_>,
        block: usize,
        (qa, sa): (DevSpan<'_, i8>, DevSpan<'_, f32>),
        s: LinearShape,
        act: i32,
    ) -> Result<(), Error> {
        let (m, k, n, ldx, ldy, split) = s.check()?;
        let bs = check_block(block)?;
        let [packed, scales, zp, x, bias, y] = l.check("gemv_int4_i8", &s, block, 1)?;
        check_packed(packed)?;
        let nb = s.k.div_ceil(block);
        // quantize_blocks_f32: rows of nb blocks of int8 values and their scales.
        let rows = s.m.max(1);
        let qa = qa.need("quantize_blocks_f32", "qa", rows * nb * block)?;
        let sa = sa.need("quantize_blocks_f32", "sa", rows * nb)?;
        let f = self.k.get("quantize_blocks_f32")?;
        let grid = (grid_dim("blocks", nb)?, grid_dim("rows", s.m)?, 1);
        launch!(self, f, cfg(grid, 32, 0), &x, &ldx, &k, &bs, &qa, &sa)?;
        if s.m == 1 {
            let f = self.k.get("gemv_decode_int4_i8")?;
            let split = s.decode_split_int4();
            let grid = s.decode_grid(split)?;
            let split = int("split", split)?;
            return launch!(
                self,
                f,
                cfg(grid, 32 * DEC_WARPS as u32, 0),
                &packed,
                &scales,
                &zp,
                &qa,
                &sa,
                &bias,
                &y,
                &n,
                &k,
                &bs,
                &split,
                &s.glu,
                &act
            );
        }
        let f = self.k.get("gemv_int4_i8")?;
        let shared = s.stage_i8(block);
        launch!(
            self,
            f,
            cfg(s.grid()?, 256, shared),
            &packed,
            &scales,
            &zp,
            &qa,
            &sa,
            &bias,
            &y,
            &ldy,
            &n,
            &k,
            &m,
            &bs,
            &split,
            &s.glu,
            &act
        )
    }
}

#[cfg(test)]
mod tests {
    use super::LinearShape;

    fn split(n: usize, k: usize) -> usize {
        LinearShape::one_row(n, k, -1).decode_split_int4()
    }

    #[test]
    fn int4_rows_split_by_width_and_length() {
        // Qwen2.5-1.5B: qkv, o-proj, gate/up and lm_head have k = 1536 (48 chunks): one warp
        // per column pair; down (k = 8960, 768 pairs) gets four.
        for n in [2048, 1536, 17920, 151_936] {
            assert_eq!(split(n, 1536), 1, "n {n}");
        }
        assert_eq!(split(1536, 8960), 4);
        // Qwen2.5-0.5B: k = 896 never splits; down (k = 4864, 448 pairs) four ways.
        assert_eq!(split(1152, 896), 1);
        assert_eq!(split(896, 4864), 4);
        // Llama-3-8B: qkv and gate/up are wide (two rounds of 2 chunks per lane at k = 4096);
        // down (k = 14336) is split until a warp walks two rounds (3584 values).
        assert_eq!(split(6144, 4096), 1);
        assert_eq!(split(28_672, 4096), 1);
        assert_eq!(split(4096, 14_336), 4);
        // Narrow layers split while each warp keeps a chunk per lane.
        assert_eq!(split(77, 3000), 2);
        assert_eq!(split(13, 1999), 1);
        assert_eq!(split(64, 4096), 4);
    }

    #[test]
    fn the_round_constant_matches_the_kernel() {
        let source = crate::cuda::compile::family("int4_decode")
            .map(|s| s.code)
            .unwrap_or_default();
        let line = format!("#define I4D_LOADS {}\n", super::I4D_LOADS);
        assert!(
            source.contains(&line),
            "{line:?} not in kernels/int4_decode.cu"
        );
    }
}
