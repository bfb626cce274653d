//! The one-row (decode-step) dense linear layers: which entry of a dense linear kernel a launch
//! takes (`gemv_decode_*`, `gemv_decode_pipe_*` or `gemv_decode_shared_*`) and at which split,
//! the rules behind that choice (`CudaTuning::decode_gemv`), and the launch itself. Every
//! entry gives the same bits at the same split; the rules only move time.

use super::{
    DEC_COLS, DEC_WARPS, DevPtr, Error, Kernels, LinearShape, Ops, TARGET_WARPS, cfg, grid_dim,
    int, launch, shared,
};
use crate::settings::{self, RowPlan};
use cudarc::driver::CudaFunction;
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
/// [`Kernels::fit_gemv_rule`]): `Pipe` is the rule `Shared` builds on, `Shared` the narrow
/// default (CUDA_NOTES rounds 18-19).
pub(crate) use crate::settings::DecodeGemvRule as DecodeGemv;

/// Whether the default rule widens to [`DecodeGemv::SharedWalk`] for a model whose layers'
/// one-row dense launches would get `plans` under it: when every one of them runs on the shared
/// entry (and there is one), that is, every launch walks under [`DecodeGemv::Shared`]'s base
/// rule and has all its blocks resident with their weights in shared memory. A layer that mixes
/// shared launches with walks or pipelined ones loses. H200, fp16, the shared entries' carveout
/// left to the driver: Qwen2.5-0.5B, every layer GEMV shared, 1,443 → 1,511 tok/s (CUDA_NOTES
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
/// H200, CUDA_NOTES round 19: behind such a qkv projection (Llama-3-8B's 3,072 walk blocks)
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

/// Bytes a weight value of a dense linear kernel `kind` takes.
fn weight_bytes(kind: &'static str) -> usize {
    if kind == "gemv_f32" { 4 } else { 2 }
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

impl Kernels {
    /// The walk or pipelined plan of a one-row dense launch of `kind` over `s` before any
    /// shared entry, and the walk kernel's resident block count.
    fn base_plan(&self, kind: &'static str, s: &LinearShape) -> (OneRow, usize) {
        let resident = |name| self.resident.get(name).copied().unwrap_or(0);
        let walk = resident(decode_kernel(kind));
        let plan = s.one_row_plan(walk, resident(decode_pipe_kernel(kind)));
        (plan, walk)
    }

    /// The plan `rule` gives a one-row dense launch of `kind` over `s`, and the walk kernel's
    /// resident block count.
    fn plan_under(&self, rule: DecodeGemv, kind: &'static str, s: &LinearShape) -> (OneRow, usize) {
        let (plan, walk) = self.base_plan(kind, s);
        if let Some(&named) = self.row_plans.get(&(s.n, s.k)) {
            return (named, walk);
        }
        let walked = plan.via == RowKernel::Walk;
        let plan = match rule {
            DecodeGemv::SharedWalk if walked => self.shared_plan(kind, s, plan),
            DecodeGemv::Shared if walked && !s.walk_in_flight(plan.split, walk) => {
                self.shared_plan(kind, s, plan)
            }
            _ => plan,
        };
        (plan, walk)
    }

    /// The kernel and split (warps per column pair) the decode rule gives a one-row dense
    /// launch of `kind`.
    pub(crate) fn one_row_plan(&self, kind: &'static str, s: &LinearShape) -> OneRow {
        self.plan_under(self.decode_gemv, kind, s).0
    }

    /// The route's line for the one-row dense linears: the rule, and the plans
    /// `GENAI_BRIDGE_ROW_PLAN` names over it (with any pairs it ignored).
    pub(crate) fn describe_one_row(&self) -> String {
        let mut line = format!("one-row dense linears: the {:?} rule", self.decode_gemv);
        if !self.row_plans.is_empty() {
            let mut named: Vec<String> = self
                .row_plans
                .iter()
                .map(|(&(n, k), p)| format!("{n}x{k}={}:{}", p.via.name(), p.split))
                .collect();
            named.sort();
            line += &format!(", {} over it: {}", settings::ROW_PLAN, named.join(","));
        }
        line
    }

    /// Sets the decode attention's rule for a model (after [`Kernels::fit_gemv_rule`]) from
    /// the qkv launch before each attention (`qkv`: kernel and shape of each layer's last qkv
    /// part): merges through global memory and a trigger after the wait where any is
    /// [`ragged`] (`DecodeDevice::mode`). An int4 qkv counts as not ragged (not measured).
    pub(crate) fn fit_attention_rule(
        &mut self,
        qkv: impl IntoIterator<Item = (&'static str, LinearShape)>,
    ) {
        let ragged_qkv = qkv.into_iter().any(|(kind, s)| {
            let (plan, walk) = self.plan_under(self.decode_gemv, kind, &s);
            ragged(&s, plan, walk)
        });
        self.decode.ragged_qkv = ragged_qkv;
    }

    /// Fits the default rule (no `CudaTuning::decode_gemv`) to a model: [`DecodeGemv::SharedWalk`]
    /// where [`widens`] says so of the plans it would give its layers' one-row dense launches
    /// (`linears`: each kernel and shape), else it stays [`DecodeGemv::Shared`].
    pub(crate) fn fit_gemv_rule(
        &mut self,
        linears: impl IntoIterator<Item = (&'static str, LinearShape)>,
    ) {
        if self.decode_gemv_named || self.decode_gemv != DecodeGemv::Shared {
            return;
        }
        let plans = linears
            .into_iter()
            .map(|(kind, s)| self.plan_under(DecodeGemv::SharedWalk, kind, &s).0);
        if widens(plans) {
            self.decode_gemv = DecodeGemv::SharedWalk;
        }
    }
}

impl Ops<'_> {
    /// One row of a dense linear through the entry `plan.via` names (`gemv_decode_*`,
    /// `gemv_decode_pipe_*` or `gemv_decode_shared_*`) with `plan.split` warps per column pair
    /// (1, 2 or 4; [`Kernels::one_row_plan`] gives the rule's).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemv_one_row(
        &self,
        kind: &'static str,
        w: DevPtr,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
        plan: OneRow,
    ) -> Result<(), Error> {
        let at = self.one_row_frame("one-row linear", Some(plan.kernel(kind)), &s, plan)?;
        let shared = plan.shared_bytes(kind, &s);
        if shared > self.k.shared_limit() {
            return Err(Error::Invalid {
                what: "one-row linear",
                why: format!("{s:?} with {plan:?} takes {shared} bytes of shared memory"),
            });
        }
        launch!(
            self,
            at.f,
            cfg(at.grid, 32 * DEC_WARPS as u32, shared as u32),
            &w,
            &x,
            &bias,
            &y,
            &at.n,
            &at.k,
            &at.split,
            &s.glu,
            &act
        )
    }
}

/// What every one-row dense launch passes besides its buffers: the entry, the grid, and
/// (n, k, split) as kernel ints.
pub(crate) struct OneRowFrame<'a> {
    pub f: &'a CudaFunction,
    pub grid: (u32, u32, u32),
    pub n: i32,
    pub k: i32,
    pub split: i32,
}

impl<'a> Ops<'a> {
    /// The frame of one row of `s` through `entry` with `plan`: an error naming `what` when
    /// there is no entry (the family has none for this plan or shape), the shape is not one
    /// valid row, or the split does not divide a block's warps.
    pub(crate) fn one_row_frame(
        &self,
        what: &'static str,
        entry: Option<&'static str>,
        s: &LinearShape,
        plan: OneRow,
    ) -> Result<OneRowFrame<'a>, Error> {
        let (_, k, n, _, _, _) = s.check()?;
        let entry = entry.filter(|_| s.m == 1 && DEC_WARPS.is_multiple_of(plan.split));
        let Some(entry) = entry else {
            return Err(Error::Invalid {
                what,
                why: format!("{s:?} with {plan:?}"),
            });
        };
        Ok(OneRowFrame {
            f: self.k.get(entry)?,
            grid: s.decode_grid(plan.split)?,
            n,
            k,
            split: int("split", plan.split)?,
        })
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
