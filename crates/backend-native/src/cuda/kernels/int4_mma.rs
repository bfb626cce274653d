//! The tensor-core one-row int4 launch (`kernels/int4_mma.cu`): when it may run (sm_80 or
//! later, a power-of-two block size of 32 or more, integer zero points, x staged in the shared
//! memory the device grants), its split rule and grid, and the shared-memory opt-in at load.

use super::shape::{LinearShape, TARGET_WARPS};
use crate::cuda::launch::{cfg, grid_dim, opt_in_shared};
use crate::error::Error;
use cudarc::driver::{CudaContext, CudaFunction, LaunchConfig, sys};
use std::collections::HashMap;

/// Warps per block (`I4M_WARPS`).
const WARPS: usize = 8;
/// Weight rows (output columns) one warp owns.
const ROWS: usize = 16;
/// Chunks per row a lane loads per round (`I4M_ROUND`).
const ROUND: usize = 4;
/// Values of a row one warp covers with one chunk per lane: four chunks of 32.
const QUAD: usize = 128;

/// The tensor-core kernel's entries that stage x: (f32 scales, f16 scales) × (deep, wide).
const DEEP: [&str; 2] = ["gemv_decode_int4_mma", "gemv_decode_int4_mma_s16"];
const WIDE: [&str; 2] = ["gemv_decode_int4_mma_wide", "gemv_decode_int4_mma_s16_wide"];

/// Which entries the tensor-core launches take: `I4M_ROUND` chunks a round at 2 blocks per SM
/// (deep) or `I4M_WIDE_ROUND` at up to 4 (wide). Auto: wide where the deep launch needs more
/// than one wave of the device's resident blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Rounds {
    #[default]
    Auto,
    Deep,
    Wide,
}

/// Where the tensor-core int4 kernel may run on this device and which entry a launch takes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Int4Mma {
    /// Dynamic shared memory a launch may use; 0: the kernel does not run here (before
    /// sm_80, switched off, or an opt-in failed).
    pub shared: usize,
    /// Blocks of a deep entry the whole device holds at once (SMs × blocks per SM without
    /// dynamic shared memory); 0 when the driver does not say (deep launches only, then).
    pub deep_resident: usize,
    pub rounds: Rounds,
}

impl Int4Mma {
    /// Opts every entry into the device's shared memory and counts the deep entries' resident
    /// blocks; `choice` (`CudaTuning::int4_mma`, an A/B switch) may turn the kernel off (the
    /// scalar kernel then runs: the results differ in rounding only) or force its entries (the
    /// same bits).
    pub(super) fn probe(
        ctx: &CudaContext,
        major: i32,
        functions: &HashMap<&'static str, CudaFunction>,
        choice: crate::settings::Int4Mma,
    ) -> Self {
        use crate::settings::Int4Mma as Choice;
        let rounds = match choice {
            Choice::Off => return Self::default(),
            Choice::Deep => Rounds::Deep,
            Choice::Wide => Rounds::Wide,
            Choice::Auto => Rounds::Auto,
        };
        if major < 8 || ctx.bind_to_thread().is_err() {
            return Self::default();
        }
        let mut shared = usize::MAX;
        for name in [DEEP, WIDE].iter().flatten() {
            let granted = functions.get(name).and_then(|f| {
                let fixed = f.shared_size_bytes().ok()?;
                opt_in_shared(ctx, f, fixed as usize, 0)
            });
            shared = shared.min(granted.unwrap_or(0));
        }
        let sms = ctx
            .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .ok()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(0);
        let per_sm = functions
            .get(DEEP[1])
            .and_then(|f| {
                f.occupancy_max_active_blocks_per_multiprocessor((32 * WARPS) as u32, 0, None)
                    .ok()
            })
            .map_or(0, |b| b as usize);
        Self {
            shared,
            deep_resident: sms * per_sm,
            rounds,
        }
    }

    /// The entry a launch of `blocks` blocks takes, on f16 scales where `half`; `wide` forces
    /// the choice (the self-test runs both).
    pub(super) fn entry(&self, blocks: usize, half: bool, wide: Option<bool>) -> &'static str {
        let wide = wide.unwrap_or(match self.rounds {
            Rounds::Auto => self.deep_resident > 0 && blocks > self.deep_resident,
            Rounds::Deep => false,
            Rounds::Wide => true,
        });
        let names = if wide { WIDE } else { DEEP };
        names[usize::from(half)]
    }
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

impl Int4Mma {
    /// Whether one row of a CompFp32 layer of this shape runs on the tensor cores here:
    /// `integral_zp` says the zero points are integers (or absent).
    pub(crate) fn fits(&self, s: &LinearShape, block: usize, integral_zp: bool) -> bool {
        s.m == 1 && int4_mma_form(block, integral_zp) && stage_bytes(s.k, block) <= self.shared
    }

    /// The entry and launch of the tensor-core kernel for one row of this shape (the
    /// arguments of `gemv_decode_int4_f32`; `half`: on the f16 scales; `wide` forces the entry)
    /// and its split.
    pub(super) fn config(
        &self,
        s: &LinearShape,
        block: usize,
        half: bool,
        wide: Option<bool>,
    ) -> Result<(&'static str, LaunchConfig, usize), Error> {
        let split = s.int4_mma_split();
        let blocks = s.n.div_ceil(ROWS).div_ceil(WARPS / split);
        let grid = (grid_dim("gemv columns", blocks)?, 1, 1);
        let shared = u32::try_from(stage_bytes(s.k, block)).map_err(|_| Error::Invalid {
            what: "int4 layer",
            why: format!("k = {} is too long to stage", s.k),
        })?;
        let entry = self.entry(blocks, half, wide);
        Ok((entry, cfg(grid, (32 * WARPS) as u32, shared), split))
    }
}

#[cfg(test)]
mod tests {
    use super::{DEEP, Int4Mma, LinearShape, QUAD, ROUND, ROWS, Rounds, WARPS, WIDE, stage_bytes};
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
    fn launches_past_one_deep_wave_take_the_wide_entries() {
        // The H200: 132 SMs × 2 deep blocks.
        let h200 = Int4Mma {
            shared: 1 << 17,
            deep_resident: 264,
            rounds: Rounds::Auto,
        };
        // Llama-3-8B o-proj and down (256 blocks) stay deep, qkv (384) and gate/up go wide.
        assert_eq!(h200.entry(256, true, None), DEEP[1]);
        assert_eq!(h200.entry(264, false, None), DEEP[0]);
        assert_eq!(h200.entry(265, true, None), WIDE[1]);
        assert_eq!(h200.entry(896, false, None), WIDE[0]);
        // Forced either way, by the switch or by the caller.
        assert_eq!(h200.entry(896, true, Some(false)), DEEP[1]);
        assert_eq!(h200.entry(8, true, Some(true)), WIDE[1]);
        let deep = Int4Mma {
            rounds: Rounds::Deep,
            ..h200
        };
        assert_eq!(deep.entry(4008, true, None), DEEP[1]);
        let wide = Int4Mma {
            rounds: Rounds::Wide,
            ..h200
        };
        assert_eq!(wide.entry(8, false, None), WIDE[0]);
        // A device that did not say how many blocks it holds runs deep.
        let unknown = Int4Mma {
            deep_resident: 0,
            ..h200
        };
        assert_eq!(unknown.entry(4008, true, None), DEEP[1]);
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
