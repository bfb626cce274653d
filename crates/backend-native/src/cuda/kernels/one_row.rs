//! The one-row (decode-step) dense linear layers: which entry of a dense linear kernel a launch
//! takes (`gemv_decode_*`, `gemv_decode_pipe_*` or `gemv_decode_shared_*`) and at which split,
//! the plans behind that choice (`CudaTuning::decode_gemv`; the rules that pick them are
//! `plans.rs`, the launch `gemv_one_row.rs`). Every
//! entry gives the same bits at the same split; the rules only move time.

use super::shape::{DEC_COLS, DEC_WARPS, LinearShape, TARGET_WARPS, weight_bytes};
use super::shared;
use crate::cuda::launch::grid_dim;
use crate::error::Error;
use crate::settings::RowPlan;
use std::collections::HashMap;

/// The plans the tuning's `GENAI_BRIDGE_ROW_PLAN` names, by (n, k).
pub(super) fn row_plans(named: &[RowPlan]) -> HashMap<(usize, usize), OneRow> {
    let plan = |p: &RowPlan| {
        let one_row = OneRow {
            via: p.entry,
            split: p.split,
        };
        ((p.n, p.k), one_row)
    };
    named.iter().map(plan).collect()
}

/// The one-row linear layers' rule (`CudaTuning::decode_gemv`; unset: `Shared`, widened to
/// `SharedWalk` for a model whose layers' dense linears can all run on the shared entry,
/// `Kernels::fit_gemv_rule`): `Pipe` is the rule `Shared` builds on, `Shared` the narrow
/// default (docs/cuda.md rounds 18-19).
pub(crate) use crate::settings::DecodeGemvRule as DecodeGemv;

/// Whether the default rule widens to [`DecodeGemv::SharedWalk`] for a model whose layers'
/// one-row dense launches would get `plans` under it: when every one of them runs on the shared
/// entry (and there is one), that is, every launch walks under [`DecodeGemv::Shared`]'s base
/// rule and has all its blocks resident with their weights in shared memory. A layer that mixes
/// shared launches with walks or pipelined ones loses. H200, fp16, the shared entries' carveout
/// left to the driver: Qwen2.5-0.5B, every layer GEMV shared, 1,443 → 1,511 tok/s (docs/cuda.md
/// round 19); Qwen2.5-1.5B, qkv and o shared between the MLP's walk and pipelined launches,
/// 782.6 → 771 (round 19); Llama-3.2-1B, qkv and o shared, gate/up (4,096 blocks) and down
/// (1,024) too many blocks to be resident, 980 → 926 (round 21). The cause is the layer's mix,
/// not a launch's own time: alone, the shared entry loses every one-round launch to the walk
/// (round 18).
pub(super) fn widens(plans: impl IntoIterator<Item = OneRow>) -> bool {
    let mut any = false;
    for plan in plans {
        if plan.via != RowKernel::Shared {
            return false;
        }
        any = true;
    }
    any
}

/// Whether a one-row launch with `plan` over `s` leaves the SMs free one by one rather than
/// all at once: the walk kernel with more blocks than the `walk` it holds at once or more
/// than one load round a warp, or the pipelined kernel (three or more rounds); not the shared
/// entry (every block resident with all its weights) or an unknown resident count (0).
/// H200, docs/cuda.md round 19: behind such a qkv projection (Llama-3-8B's 3,072 walk blocks)
/// the decode attention's clusters lost 1.8%; behind a qkv held at once (Qwen2.5-0.5B, 1.5B,
/// Llama-3.2-1B) global merges lost 3.5-6%.
pub(super) fn ragged(s: &LinearShape, plan: OneRow, walk: usize) -> bool {
    match plan.via {
        RowKernel::Walk => walk > 0 && !s.walk_in_flight(plan.split, walk),
        RowKernel::Pipe => true,
        RowKernel::Shared => false,
    }
}

/// Values of a row one warp of `gemv_decode_*` covers in two load rounds (4 units of 8 values
/// per lane per round).
const ROUND_VALUES: usize = 2 * 4 * 8 * 32;

pub(super) fn decode_kernel(kind: &'static str) -> &'static str {
    match kind {
        "gemv_f32" => "gemv_decode_f32",
        "gemv_f16" => "gemv_decode_f16",
        "gemv_bf16" => "gemv_decode_bf16",
        other => other,
    }
}

/// The pipelined one-row entry of a dense linear kernel.
pub(super) fn decode_pipe_kernel(kind: &'static str) -> &'static str {
    match kind {
        "gemv_f32" => "gemv_decode_pipe_f32",
        "gemv_f16" => "gemv_decode_pipe_f16",
        "gemv_bf16" => "gemv_decode_pipe_bf16",
        other => other,
    }
}

/// Load rounds of `gemv_decode_*` from which the pipelined kernel takes a row. Measured on the
/// H200 (round 10): Llama-3-8B down (4 rounds at split 4) 43.6 → 27.8 µs alone, Qwen2.5-1.5B
/// down (3) 9.8 → 8.9 µs; Qwen2.5-0.5B down (2) equal alone (4.6 µs) and its step ~2% slower.
pub(super) const PIPE_ROUNDS: usize = 3;

/// Which one-row entry of a dense linear kernel a launch takes (`walk`: rounds of loads into
/// registers, the first before the wait; `pipe`: the next round in flight during the current
/// one; `shared`: every weight copied into shared memory before the wait). All three give the
/// same bits at the same split (the same products in the same order).
pub(crate) use crate::settings::RowEntry as RowKernel;

/// How a one-row dense linear runs: its entry and its split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OneRow {
    pub via: RowKernel,
    pub split: usize,
}

impl OneRow {
    pub(crate) fn walk(split: usize) -> OneRow {
        OneRow {
            via: RowKernel::Walk,
            split,
        }
    }

    pub(crate) fn pipe(split: usize) -> OneRow {
        OneRow {
            via: RowKernel::Pipe,
            split,
        }
    }

    /// The entry this plan launches for a dense linear kernel `kind`.
    pub(crate) fn kernel(&self, kind: &'static str) -> &'static str {
        match self.via {
            RowKernel::Walk => decode_kernel(kind),
            RowKernel::Pipe => decode_pipe_kernel(kind),
            RowKernel::Shared => shared::shared_kernel(kind),
        }
    }

    /// Bytes of dynamic shared memory a launch of this plan for `kind` over `s` takes.
    pub(crate) fn shared_bytes(&self, kind: &'static str, s: &LinearShape) -> usize {
        match self.via {
            RowKernel::Shared => shared::slots_bytes(s.k, self.split, weight_bytes(kind)),
            RowKernel::Walk | RowKernel::Pipe => 0,
        }
    }
}

impl LinearShape {
    /// One row of x, `k` inputs, `n` outputs, rows packed.
    pub(crate) fn one_row(n: usize, k: usize, glu: i32) -> LinearShape {
        LinearShape {
            m: 1,
            k,
            n,
            ldx: k,
            ldy: n,
            glu,
        }
    }

    /// Warps sharing a column pair in the one-row kernels (`gemv_decode_*`): doubled (up to
    /// [`DEC_WARPS`]) while the launch has fewer than [`TARGET_WARPS`] warps and each warp
    /// keeps at least 256 values of a row, then further while a warp would walk more than
    /// [`ROUND_VALUES`] values (two load rounds: long rows, 8B-class k of 4096 and 14336,
    /// measured 8% faster on Llama-3-8B than the warp target alone). Depends on (k, n) only.
    pub(super) fn decode_split(&self) -> usize {
        let pairs = self.n.div_ceil(DEC_COLS);
        let mut split = 1;
        while split < DEC_WARPS && pairs * split < TARGET_WARPS && self.k / (split * 2) >= 256 {
            split *= 2;
        }
        while split < DEC_WARPS && self.k.div_ceil(split) > ROUND_VALUES {
            split *= 2;
        }
        split
    }

    /// The grid of a one-row launch with `split` warps per column pair.
    pub(crate) fn decode_grid(&self, split: usize) -> Result<(u32, u32, u32), Error> {
        Ok((grid_dim("gemv columns", self.decode_blocks(split))?, 1, 1))
    }
}

#[cfg(test)]
mod tests {
    use super::LinearShape;

    #[test]
    fn one_row_splits_reach_the_warp_target_then_bound_the_rounds() {
        let split = |n, k| LinearShape::one_row(n, k, -1).decode_split();
        // Qwen2.5-1.5B: narrow layers double to 4 warps per pair (fewer than 3072 warps);
        // gate/up (8960 pairs) is wide enough with one warp and its rows are short.
        assert_eq!(split(2048, 1536), 4);
        assert_eq!(split(1536, 1536), 4);
        assert_eq!(split(17920, 1536), 1);
        assert_eq!(split(1536, 8960), 4);
        // Llama-3-8B: qkv and gate/up are wide enough for the warp target but a warp would walk
        // 4096 values: 2 warps; o-proj reaches 2 by the target, down (14336) is capped at 4.
        assert_eq!(split(6144, 4096), 2);
        assert_eq!(split(28672, 4096), 2);
        assert_eq!(split(4096, 4096), 2);
        assert_eq!(split(4096, 14336), 4);
        // Short rows: one warp whatever the width.
        assert_eq!(split(64, 200), 1);
    }
}
