//! The wave-aware split of the one-row dense GEMVs (every rule's base): a launch of B blocks on a device that holds R of them at once runs
//! ceil(B / R) waves, and each block's warps walk ceil(values per warp / one load round)
//! dependent load rounds, so the split with the fewest waves × rounds should finish first. The
//! warp-count rule (`LinearShape::decode_split`) can leave a nearly empty last wave (1.5B qkv:
//! 1,024 blocks where 924 fit). Measured on the H200 in the same runs: 1.5B fp16 +6.2%, 8B fp16
//! +2.7%, 0.5B fp16 equal (docs/cuda.md, round 7). Rows that leave a warp three or more rounds
//! at that split go to the pipelined kernel at a split of its own (`one_row_plan`; round 10).

use super::one_row::{OneRow, PIPE_ROUNDS, decode_kernel, decode_pipe_kernel};
use super::shape::{DEC_COLS, DEC_WARPS, LinearShape};
use cudarc::driver::{CudaContext, CudaFunction, sys};
use std::collections::HashMap;

/// Values of one column a warp of `gemv_decode_*` loads per round (4 loads of 8 values per lane).
const ROUND_VALUES: usize = 4 * 8 * 32;

/// The one-row dense kernels whose resident block count the rules need: both one-row entries
/// of each dense linear kernel.
fn kernels() -> impl Iterator<Item = &'static str> {
    ["gemv_f32", "gemv_f16", "gemv_bf16"]
        .into_iter()
        .flat_map(|kind| [decode_kernel(kind), decode_pipe_kernel(kind)])
}

/// Blocks of each one-row dense kernel the whole device holds at once (SMs × blocks per SM at
/// 128 threads, no dynamic shared memory); kernels the driver cannot answer for are left out
/// (the rule then falls back to the default split).
pub(super) fn resident_blocks(
    ctx: &CudaContext,
    functions: &HashMap<&'static str, CudaFunction>,
) -> HashMap<&'static str, usize> {
    // The occupancy queries run on the thread's current context.
    if ctx.bind_to_thread().is_err() {
        return HashMap::new();
    }
    let sms = multiprocessors(ctx);
    kernels()
        .filter_map(|name| {
            let f = functions.get(name)?;
            let per_sm = f
                .occupancy_max_active_blocks_per_multiprocessor(32 * DEC_WARPS as u32, 0, None)
                .ok()?;
            Some((name, sms * per_sm as usize)).filter(|&(_, r)| r > 0)
        })
        .collect()
}

/// The device's SM count (0 when the driver does not answer).
pub(super) fn multiprocessors(ctx: &CudaContext) -> usize {
    ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .ok()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(0)
}

impl LinearShape {
    /// Blocks of a one-row launch with `split` warps per column pair.
    pub(super) fn decode_blocks(&self, split: usize) -> usize {
        self.n.div_ceil(DEC_COLS).div_ceil(DEC_WARPS / split)
    }

    /// The split (1, 2 or 4; each warp keeps at least 256 values of a row past 1) with the
    /// fewest waves × load rounds on a device holding `resident` blocks; on a tie the one
    /// with fewer load rounds per warp (a shorter dependent chain; on the H200, round 9,
    /// builds whose resident count gave Llama-3-8B's lm_head split 4 instead of the tied
    /// split 2 ran an 8B-l4 step ~13% faster), then `default`, then the smaller split.
    pub(super) fn decode_split_waves(&self, resident: usize, default: usize) -> usize {
        if resident == 0 {
            return default;
        }
        let cost = |split: usize| {
            let (waves, rounds) = (
                self.decode_blocks(split).div_ceil(resident),
                self.decode_rounds(split),
            );
            (waves * rounds, rounds)
        };
        let mut best = default;
        let mut split = 1;
        while split <= DEC_WARPS {
            if (split == 1 || self.k / split >= 256) && cost(split) < cost(best) {
                best = split;
            }
            split *= 2;
        }
        best
    }

    /// The walk or pipelined plan of this one-row shape that every rule starts from (the shared
    /// entries come after, `Kernels::plan_under`), with the resident block counts of
    /// `gemv_decode_*` and `gemv_decode_pipe_*` (0: unknown).
    pub(super) fn one_row_plan(&self, walk: usize, pipe: usize) -> OneRow {
        let split = self.decode_split_waves(walk, self.decode_split());
        if pipe == 0 || self.decode_rounds(split) < PIPE_ROUNDS {
            return OneRow::walk(split);
        }
        OneRow::pipe(self.decode_pipe_split(pipe))
    }

    /// Dependent load rounds a warp of `gemv_decode_*` walks at `split`.
    pub(super) fn decode_rounds(&self, split: usize) -> usize {
        self.k.div_ceil(split).div_ceil(ROUND_VALUES).max(1)
    }

    /// The split of the pipelined kernel (`gemv_decode_pipe_*`, which keeps a warp's loads in
    /// flight across its rounds, so rounds cost little and waves are what count): the fewest
    /// waves on a device holding `resident` of its blocks, then the largest split (more warps
    /// per column pair, a shorter walk each). Llama-3-8B down (k 14,336, n 4,096) on an H200
    /// (1,056 resident): split 2, 1,024 blocks in one wave.
    pub(super) fn decode_pipe_split(&self, resident: usize) -> usize {
        let waves = |split: usize| self.decode_blocks(split).div_ceil(resident.max(1));
        let mut best = 1;
        for split in [2, 4] {
            if split <= DEC_WARPS && self.k / split >= 256 && waves(split) <= waves(best) {
                best = split;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::kernels::RowKernel;
    use crate::cuda::kernels::one_row::{ragged, widens};

    fn split(n: usize, k: usize, resident: usize) -> usize {
        let s = LinearShape::one_row(n, k, -1);
        s.decode_split_waves(resident, s.decode_split())
    }

    // 924 blocks: 132 SMs × 7 blocks of `gemv_decode_f16` at 68 registers on an H200 (the walk
    // without the L2 policy, `W_EVICT=0`; with it, the default since round 23, 64 and 1,056).
    const H200: usize = 924;

    #[test]
    fn a_nearly_empty_last_wave_is_avoided() {
        // Qwen2.5-1.5B qkv: split 4 is 1,024 blocks (two waves of one round); split 2 is 512
        // blocks, one wave of one round.
        assert_eq!(split(2048, 1536, H200), 2);
        // Qwen2.5-1.5B gate/up: split 1 is 2,240 blocks (3 waves × 2 rounds), split 2 is
        // 4,480 (5 waves × 1 round).
        assert_eq!(split(17920, 1536, H200), 2);
        // Llama-3-8B o-proj: 2,048 blocks at split 4, 3 waves × 1 round, beats 2 × 2 and 1 × 4.
        assert_eq!(split(4096, 4096, H200), 4);
    }

    #[test]
    fn ties_go_to_fewer_rounds_then_the_default() {
        // Llama-3-8B qkv: 1 × 4, 2 × 2 and 4 × 1 tie: one round per warp wins.
        assert_eq!(split(6144, 4096, H200), 4);
        // Llama-3-8B lm_head: 35 waves × 2 rounds ties 70 × 1: split 4.
        assert_eq!(split(128_256, 4096, H200), 4);
        // Qwen2.5-0.5B qkv: one wave of one round at every split: the default (2) stays.
        assert_eq!(split(1152, 896, H200), 2);
        // Qwen2.5-0.5B gate/up: split 2 would be 3 waves against 2 (one round either way);
        // split 4 would leave a warp fewer than 256 values.
        assert_eq!(split(9728, 896, H200), 1);
        // An unknown device (no resident count): the default rule.
        assert_eq!(split(2048, 1536, 0), 4);
    }

    #[test]
    fn eight_walk_blocks_an_sm_move_the_ties_and_the_second_waves() {
        // 132 SMs × 8 blocks: the walk at 64 registers (its L2 policy, docs/cuda.md round 22).
        let eight = 1056;
        // Qwen2.5-1.5B qkv: split 4's 1,024 blocks now fit one wave of one round like split 2's
        // 512, so the tie goes to the default (4); at 924 split 4 took two waves.
        assert_eq!((split(2048, 1536, H200), split(2048, 1536, eight)), (2, 4));
        // Llama-3.2-1B o the same way (split 4: 1,024 blocks).
        assert_eq!((split(2048, 2048, H200), split(2048, 2048, eight)), (2, 4));
        // Llama-3.2-1B down keeps split 4, whose 1,024 blocks now take one wave instead of a
        // full one and 100 blocks.
        let down = LinearShape::one_row(2048, 8192, -1);
        assert_eq!(split(2048, 8192, eight), 4);
        assert_eq!(down.decode_blocks(4).div_ceil(H200), 2);
        assert_eq!(down.decode_blocks(4).div_ceil(eight), 1);
        // Qwen2.5-0.5B and Llama-3-8B keep every plan.
        for (n, k) in [
            (1152, 896),
            (896, 896),
            (896, 4864),
            (151_936, 896),
            (6144, 4096),
        ] {
            assert_eq!(split(n, k, H200), split(n, k, eight), "{n} × {k}");
        }
    }

    #[test]
    fn the_pipelined_split_fills_waves_then_widens() {
        // 132 SMs × 8 blocks of `gemv_decode_pipe_f16` (60 registers).
        let pipe = |n, k| LinearShape::one_row(n, k, -1).decode_pipe_split(1056);
        // Llama-3-8B down: split 4 is 2,048 blocks (2 waves), split 2 is 1,024 (one).
        assert_eq!(pipe(4096, 14_336), 2);
        // Qwen2.5-1.5B down: 768 blocks at split 4 still fit one wave.
        assert_eq!(pipe(1536, 8960), 4);
        // Rows too short for a warp to keep 256 values past split 1.
        assert_eq!(pipe(4096, 300), 1);
        // Very wide: every split takes many waves; the fewest is split 1's.
        assert_eq!(pipe(1 << 20, 8192), 1);
    }

    #[test]
    fn long_rows_go_to_the_pipelined_kernel() {
        let plan = |n, k, pipe| LinearShape::one_row(n, k, -1).one_row_plan(H200, pipe);
        let (walk, piped) = (OneRow::walk, OneRow::pipe);
        // Llama-3-8B down (4 rounds at split 4) and Qwen2.5-1.5B down (3 rounds).
        assert_eq!(plan(4096, 14_336, 1056), piped(2));
        assert_eq!(plan(1536, 8960, 1056), piped(4));
        // Qwen2.5-0.5B down (2 rounds) and Llama-3-8B qkv (1 round) stay.
        assert_eq!(plan(896, 4864, 1056), walk(4));
        assert_eq!(plan(6144, 4096, 1056), walk(4));
        // Llama-3-8B o (3 waves of the walk at split 4) stays on the walk kernel.
        assert_eq!(plan(4096, 4096, 1056), walk(4));
        // No resident count for the pipelined kernel: never.
        assert_eq!(plan(4096, 14_336, 0), walk(4));
    }

    #[test]
    fn the_default_widens_where_every_layer_linear_takes_the_shared_entry() {
        // The plans `shared-walk` would give each layer linear (qkv, o, gate/up, down): the
        // base rule's walks move to the shared entry where all their blocks are resident
        // (`Kernels::shared_plan`, a driver occupancy query; H200 figures in the comments).
        let shared = |split| OneRow {
            via: RowKernel::Shared,
            split,
        };
        // Qwen2.5-0.5B: all four shared (gate/up's 1,216 blocks of 16 KB fit 13 an SM).
        assert!(widens([shared(2), shared(2), shared(1), shared(4)]));
        // Llama-3.2-1B: qkv and o shared; gate/up (4,096 blocks) and down (1,024 blocks of
        // 32 KB) are not all resident and stay walks.
        assert!(!widens([
            shared(2),
            shared(2),
            OneRow::walk(2),
            OneRow::walk(4)
        ]));
        // Qwen2.5-1.5B: the down projection is pipelined.
        assert!(!widens([
            shared(2),
            shared(4),
            OneRow::walk(2),
            OneRow::pipe(4)
        ]));
        // Which plans the base rule gives those shapes (qkv, o, gate/up, down): walks but for
        // the long rows.
        let base = |n, k| LinearShape::one_row(n, k, -1).one_row_plan(H200, 1056);
        let layer = |shapes: [(usize, usize); 4]| shapes.map(|(n, k)| base(n, k));
        let walks = |splits: [usize; 4]| splits.map(OneRow::walk);
        let qwen05 = [(1152, 896), (896, 896), (9728, 896), (896, 4864)];
        assert_eq!(layer(qwen05), walks([2, 2, 1, 4]));
        let llama32 = [(3072, 2048), (2048, 2048), (16_384, 2048), (2048, 8192)];
        assert_eq!(layer(llama32), walks([2, 2, 2, 4]));
        assert_eq!(base(1536, 8960), OneRow::pipe(4));
        // No dense linear (an int4 model): nothing to widen.
        assert!(!widens([]));
    }

    #[test]
    fn a_qkv_of_several_waves_or_rounds_is_ragged() {
        let ragged_qkv = |n, k| {
            let s = LinearShape::one_row(n, k, -1);
            ragged(&s, s.one_row_plan(H200, 1056), H200)
        };
        // Qwen2.5-0.5B, Qwen2.5-1.5B and Llama-3.2-1B: held at once.
        assert!(!ragged_qkv(1152, 896) && !ragged_qkv(2048, 1536) && !ragged_qkv(3072, 2048));
        // Llama-3-8B: 3,072 blocks at split 4, past the 924 the H200 holds.
        assert!(ragged_qkv(6144, 4096));
        // Long rows go to the pipelined kernel: ragged.
        assert!(ragged_qkv(512, 14_336));
        // An unknown resident count, or the shared entry: not.
        let s = LinearShape::one_row(6144, 4096, -1);
        assert!(!ragged(&s, OneRow::walk(4), 0));
        let whole = OneRow {
            via: RowKernel::Shared,
            split: 4,
        };
        assert!(!ragged(&s, whole, H200));
    }

    #[test]
    fn rounds_count_a_warps_walk() {
        let s = LinearShape::one_row(4096, 14_336, -1);
        assert_eq!(
            (s.decode_rounds(4), s.decode_rounds(2), s.decode_rounds(1)),
            (4, 7, 14)
        );
        assert_eq!(LinearShape::one_row(6144, 4096, -1).decode_rounds(4), 1);
    }

    #[test]
    fn the_kernels_counted_are_the_one_row_dense_kernels() {
        let gemv = crate::cuda::compile::family("gemv").expect("the gemv family");
        let counted: Vec<&str> = kernels().collect();
        assert_eq!(counted.len(), 6);
        for name in counted {
            assert!(gemv.symbols.contains(&name), "{name}");
            assert!(name.starts_with("gemv_decode_"), "{name}");
        }
    }

    #[test]
    fn every_choice_is_a_split_the_kernel_takes() {
        for (n, k) in [
            (64, 200),
            (100, 100),
            (896, 4864),
            (128_256, 4096),
            (3, 20_000),
        ] {
            for resident in [1, 132, H200, 10_000] {
                let s = split(n, k, resident);
                assert!(
                    [1, 2, 4].contains(&s),
                    "n {n} k {k} resident {resident}: {s}"
                );
            }
        }
    }
}
