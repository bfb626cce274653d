//! The one-row dense GEMV that copies every weight of a launch into shared memory before its
//! wait (`gemv_decode_shared_*` in kernels/gemv_shared.cu): its shared-memory size, its set-up
//! at load and the rule that takes it (the default, `GENAI_BRIDGE_DECODE_GEMV=shared`, widened
//! to `shared-walk` for a model whose layer linears can all take it: `Kernels::fit_gemv_rule`;
//! which rows each offers: `Kernels::one_row_plan`): a launch whose blocks are all resident at
//! once, each holding its weights in shared memory, runs there at the split the default rule
//! gave it, so its bits are the default's.
//!
//! Why (docs/cuda.md round 17): left out of the captured step one class at a time, the Qwen2.5-0.5B
//! gate/up GEMV costs 8.1 µs of the step for 17.4 MB (4.1 µs at the measured bandwidth), its
//! 1,216 blocks one wave and a third of the 924 `gemv_decode_f16` an H200 holds, each with one
//! round of loads in registers; the register file bounds what a launch has in flight before its
//! wait (~128 KB an SM) where shared memory holds 228 KB. Round 18 measured the default rule
//! (launches the walk cannot hold in flight) +2.9% on Qwen2.5-0.5B fp16, the same elsewhere;
//! every walk launch (`shared-walk`) +6.1% there but -8.6% on Qwen2.5-1.5B, where the entry
//! alone is slower than the walk on one-round launches (all its copies land before any
//! product) and its o projection loses ~5 µs a launch in the graph. Round 19: most of that
//! loss was the whole carveout these entries asked for (now left to the driver): `shared-walk`
//! then gains 4.7% on Qwen2.5-0.5B and loses 1.5% on Qwen2.5-1.5B.

use super::shape::{DEC_COLS, DEC_WARPS, LinearShape};
use crate::cuda::launch::opt_in_shared;
use cudarc::driver::{CudaContext, CudaFunction};
use std::collections::HashMap;

/// The shared-memory entry of a dense linear kernel.
pub(super) fn shared_kernel(kind: &'static str) -> &'static str {
    match kind {
        "gemv_f32" => "gemv_decode_shared_f32",
        "gemv_f16" => "gemv_decode_shared_f16",
        "gemv_bf16" => "gemv_decode_shared_bf16",
        other => other,
    }
}

/// Bytes of dynamic shared memory a block of `gemv_decode_shared_*` takes for rows of `k`
/// values of `weight_bytes` bytes at `split`: every lane's slots (16 bytes per piece, a piece
/// per 8 values of f16/bf16, two of f32) for each column of each warp.
pub(super) fn slots_bytes(k: usize, split: usize, weight_bytes: usize) -> usize {
    let slots = k.div_ceil(8).div_ceil(32 * split.max(1));
    let pieces = (8 * weight_bytes).div_ceil(16);
    DEC_WARPS * DEC_COLS * slots * pieces * 32 * 16
}

/// Opts each shared entry into the device's largest dynamic shared memory per block, leaving
/// the carveout (how an SM splits its L1 and shared memory) to the driver: the bytes a block
/// may take, or 0 when the driver refuses (launches then stay within the 48 KB every block
/// may take). docs/cuda.md round 19: asking these entries for the whole carveout cost 2% of
/// Qwen2.5-0.5B's step with every GEMV on them, and 8% of Qwen2.5-1.5B's with only the qkv and
/// o projections on them (an SM whose kernels in flight ask for different splits drains
/// between them, the likely cause); asking every kernel for it cost 8% there too.
pub(super) fn prepare(ctx: &CudaContext, functions: &HashMap<&'static str, CudaFunction>) -> usize {
    if ctx.bind_to_thread().is_err() {
        return 0;
    }
    let mut most = usize::MAX;
    for kind in ["gemv_f32", "gemv_f16", "gemv_bf16"] {
        let Some(f) = functions.get(shared_kernel(kind)) else {
            return 0;
        };
        most = most.min(opt_in_shared(ctx, f, STATIC_BYTES, 0).unwrap_or(0));
    }
    if most == usize::MAX { 0 } else { most }
}

/// Static shared memory of a shared entry: the epilogue's partials.
pub(super) const STATIC_BYTES: usize = 32;

/// Shared memory every block may take without opting in (static and dynamic together).
pub(super) const DEFAULT_BLOCK_BYTES: usize = 48 * 1024;

/// Dynamic shared memory a block of a shared entry may take when `prepare` opted the entries
/// into `opted` bytes (0: the driver refused, so the default less the static bytes).
pub(super) fn dynamic_limit(opted: usize) -> usize {
    opted.max(DEFAULT_BLOCK_BYTES - STATIC_BYTES)
}

/// Whether a launch of `blocks` blocks is all resident at once with `per_sm` of them an SM on
/// `sms` SMs (false when either count is unknown).
pub(super) fn one_wave(blocks: usize, per_sm: usize, sms: usize) -> bool {
    per_sm > 0 && sms > 0 && blocks <= per_sm * sms
}

impl LinearShape {
    /// Whether `gemv_decode_*` at `split` has every weight of this launch in flight before its
    /// wait on a device holding `resident` of its blocks: one load round a warp, every block
    /// resident (an unknown count, 0: not). The shared entry then only adds its copies.
    pub(super) fn walk_in_flight(&self, split: usize, resident: usize) -> bool {
        self.decode_rounds(split) == 1 && resident > 0 && self.decode_blocks(split) <= resident
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_the_opt_in_a_block_keeps_to_the_default_with_its_static_bytes() {
        // The driver refused: 48 KB less the epilogue's 32 bytes, so a 48 KB plan (f32, k 1536,
        // split 1) is refused rather than failing at launch.
        assert_eq!(dynamic_limit(0), 48 * 1024 - 32);
        assert!(slots_bytes(1536, 1, 4) > dynamic_limit(0));
        assert!(slots_bytes(1536, 2, 4) <= dynamic_limit(0));
        // Opted in (an H200: 227 KB a block less the static bytes).
        assert_eq!(dynamic_limit(227 * 1024 - 32), 227 * 1024 - 32);
    }

    #[test]
    fn slots_cover_every_unit_a_lane_walks() {
        // Qwen2.5-0.5B gate/up (k 896, split 1): 112 units, 4 a lane; 4 warps x 2 columns.
        assert_eq!(slots_bytes(896, 1, 2), 4 * 2 * 4 * 512);
        // Its down projection (k 4864, split 4): 608 units over 128 lanes, 5 a lane.
        assert_eq!(slots_bytes(4864, 4, 2), 4 * 2 * 5 * 512);
        // f32 weights take two 16-byte pieces a unit.
        assert_eq!(slots_bytes(896, 1, 4), 2 * slots_bytes(896, 1, 2));
        // A row shorter than a unit still takes one slot a lane.
        assert_eq!(slots_bytes(3, 1, 2), 4 * 2 * 512);
    }

    #[test]
    fn the_walk_keeps_one_round_single_wave_launches() {
        // 924 blocks of `gemv_decode_f16` an H200 holds at 68 registers (132 SMs × 7).
        let in_flight = |n, k, split| LinearShape::one_row(n, k, -1).walk_in_flight(split, 924);
        // Qwen2.5-1.5B qkv (split 2: 512 blocks, one round) and o: the walk has them in flight.
        assert!(in_flight(2048, 1536, 2));
        assert!(in_flight(1536, 1536, 2));
        // Qwen2.5-0.5B gate/up at split 1: 1,216 blocks, a second wave.
        assert!(!in_flight(9728, 896, 1));
        // Its down projection at split 4: 1,216 values a warp, two rounds.
        assert!(!in_flight(896, 4864, 4));
        // An unknown resident count: not known to be in flight.
        assert!(!LinearShape::one_row(1152, 896, -1).walk_in_flight(2, 0));
    }

    #[test]
    fn one_wave_needs_every_block_resident() {
        assert!(one_wave(1216, 12, 132));
        assert!(!one_wave(1216, 9, 132));
        assert!(!one_wave(10, 0, 132));
        assert!(!one_wave(10, 4, 0));
    }

    #[test]
    fn every_dense_kind_has_a_shared_entry_in_its_family() {
        let gemv = crate::cuda::compile::family("gemv_shared").expect("the gemv_shared family");
        for kind in ["gemv_f32", "gemv_f16", "gemv_bf16"] {
            let entry = shared_kernel(kind);
            assert!(entry.starts_with("gemv_decode_shared_"), "{entry}");
            assert!(gemv.symbols.contains(&entry), "{entry}");
        }
    }
}
