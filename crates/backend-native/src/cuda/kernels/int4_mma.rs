//! The tensor-core one-row int4 launch (`kernels/int4_mma.cu`): when it may run (sm_80 or
//! later, a power-of-two block size of 32 or more, integer zero points, x staged in the shared
//! memory the device grants), its split rule and grid, and the shared-memory opt-in at load.

use super::{LinearShape, Ops, TARGET_WARPS, cfg, grid_dim, opt_in_shared};
use crate::error::Error;
use cudarc::driver::{CudaContext, CudaFunction, LaunchConfig};

/// Warps per block (`I4M_WARPS`).
const WARPS: usize = 8;
/// Weight rows (output columns) one warp owns.
const ROWS: usize = 16;
/// Chunks per row a lane loads per round (`I4M_ROUND`).
const ROUND: usize = 4;
/// Values of a row one warp covers with one chunk per lane: four chunks of 32.
const QUAD: usize = 128;

/// Set to `0` to run one-row CompFp32 int4 layers through `gemv_decode_int4_f32` even where
/// the tensor-core kernel could (an A/B switch; the results differ in rounding only).
pub const INT4_MMA_ENV: &str = "GENAI_BRIDGE_INT4_MMA";

/// Opts `gemv_decode_int4_mma` and its f16-scale twin into the device's shared memory and
/// returns the dynamic bytes a launch of either may use: 0 where they must not run (before
/// sm_80, switched off, or an opt-in failed).
pub(super) fn probe(ctx: &CudaContext, major: i32, fs: [Option<&CudaFunction>; 2]) -> usize {
    let off = std::env::var(INT4_MMA_ENV).is_ok_and(|v| v == "0");
    if major < 8 || off || ctx.bind_to_thread().is_err() {
        return 0;
    }
    let mut shared = usize::MAX;
    for f in fs {
        let granted = f.and_then(|f| {
            let fixed = f.shared_size_bytes().ok()?;
            opt_in_shared(ctx, f, fixed as usize, 0)
        });
        shared = shared.min(granted.unwrap_or(0));
    }
    shared
}

/// Dynamic shared memory of a launch: x as f16 hi and lo halves over the padded row.
fn stage_bytes(k: usize, block: usize) -> usize {
    k.div_ceil(block) * block * 4
}

impl LinearShape {
    /// Warps sharing a 16-row group: doubled (up to [`WARPS`]) while the launch has fewer than
    /// [`TARGET_WARPS`] warps and each warp keeps two quads of the row, then while a warp would
    /// walk more than two rounds. Depends on (k, n) only.
    pub(super) fn int4_mma_split(&self) -> usize {
        let (groups, quads) = (self.n.div_ceil(ROWS), self.k.div_ceil(QUAD));
        let mut split = 1;
        while split < WARPS && groups * split < TARGET_WARPS && quads / (split * 2) >= 2 {
            split *= 2;
        }
        while split < WARPS && quads.div_ceil(split) > 2 * ROUND {
            split *= 2;
        }
        split
    }
}

/// Whether CompFp32 layers of this block size and zero points (`integral_zp`: integers, or
/// none) suit the tensor-core kernel, before what only a device knows (its shared memory).
pub(crate) fn int4_mma_form(block: usize, integral_zp: bool) -> bool {
    integral_zp && block >= 32 && block.is_power_of_two()
}

impl Ops<'_> {
    /// Whether one row of a CompFp32 layer of this shape runs on the tensor cores here:
    /// `integral_zp` says the zero points are integers (or absent).
    pub(crate) fn int4_mma_fits(&self, s: &LinearShape, block: usize, integral_zp: bool) -> bool {
        s.m == 1
            && int4_mma_form(block, integral_zp)
            && stage_bytes(s.k, block) <= self.k.int4_mma_shared
    }

    /// The launch of `gemv_decode_int4_mma` for one row of this shape (same arguments as
    /// `gemv_decode_int4_f32`) and its split.
    pub(super) fn int4_mma_config(
        &self,
        s: &LinearShape,
        block: usize,
    ) -> Result<(LaunchConfig, usize), Error> {
        let split = s.int4_mma_split();
        let blocks = s.n.div_ceil(ROWS).div_ceil(WARPS / split);
        let grid = (grid_dim("gemv columns", blocks)?, 1, 1);
        let shared = u32::try_from(stage_bytes(s.k, block)).map_err(|_| Error::Invalid {
            what: "int4 layer",
            why: format!("k = {} is too long to stage", s.k),
        })?;
        Ok((cfg(grid, (32 * WARPS) as u32, shared), split))
    }
}

#[cfg(test)]
mod tests {
    use super::{LinearShape, QUAD, ROUND, ROWS, WARPS, stage_bytes};
    use crate::cuda::compile::family;

    fn split(n: usize, k: usize) -> usize {
        LinearShape::one_row(n, k, -1).int4_mma_split()
    }

    #[test]
    fn int4_mma_rows_split_by_width_and_length() {
        // Qwen2.5-1.5B (k = 1536: 12 quads): qkv (128 groups), o-proj (96) and gate/up (1120)
        // split while a warp keeps two quads: 4 ways (3 quads, one round, each).
        assert_eq!(split(2048, 1536), 4);
        assert_eq!(split(1536, 1536), 4);
        assert_eq!(split(17_920, 1536), 4);
        // Its down (k = 8960: 70 quads, 96 groups): 8 ways, the most (9 quads each).
        assert_eq!(split(1536, 8960), 8);
        // Qwen2.5-0.5B (k = 896: 7 quads): 2 ways; down (k = 4864: 38 quads) 8.
        assert_eq!(split(1152, 896), 2);
        assert_eq!(split(9728, 896), 2);
        assert_eq!(split(896, 4864), 8);
        // Llama-3-8B (k = 4096: 32 quads): gate/up's 1792 groups reach the warp target at 2
        // ways, then split to two rounds (8 quads) a warp: 4; qkv, o-proj and down (k = 14336)
        // are narrow: 8.
        assert_eq!(split(28_672, 4096), 4);
        assert_eq!(split(6144, 4096), 8);
        assert_eq!(split(4096, 14_336), 8);
        // A wide lm_head splits only to keep a warp to two rounds.
        assert_eq!(split(151_936, 1536), 2);
        // Short rows are not split below two quads per warp.
        assert_eq!(split(64, 256), 1);
        assert_eq!(split(64, 512), 2);
    }

    #[test]
    fn the_stage_covers_the_padded_row_twice_in_f16() {
        assert_eq!(stage_bytes(4096, 32), 4096 * 4);
        assert_eq!(stage_bytes(4100, 128), 4224 * 4);
    }

    #[test]
    fn the_constants_match_the_kernel() {
        let source = family("int4_mma").map(|s| s.code).unwrap_or_default();
        for line in [
            format!("#define I4M_WARPS {WARPS}\n"),
            format!("#define I4M_ROUND {ROUND}\n"),
        ] {
            assert!(
                source.contains(&line),
                "{line:?} not in kernels/int4_mma.cu"
            );
        }
        assert_eq!((ROWS, QUAD), (16, 128));
    }
}
