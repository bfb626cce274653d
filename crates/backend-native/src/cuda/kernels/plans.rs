//! The rules that plan a one-row dense launch on this device (`CudaTuning::decode_gemv`):
//! the wave-aware walk or pipelined base plan (`waves.rs`), the plans the tuning names, and the
//! shared entry where every block of a launch is resident with its weights (`shared.rs`); and
//! the rules fitted to a model at load.

use super::one_row::{
    DecodeGemv, OneRow, RowKernel, decode_kernel, decode_pipe_kernel, ragged, widens,
};
use super::registry::Kernels;
use super::shape::{DEC_WARPS, LinearShape};
use super::shared::{dynamic_limit, one_wave, shared_kernel};
use crate::settings;

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

impl Kernels {
    /// Dynamic shared memory a block of a shared entry may take here: what `prepare` opted
    /// them into, at least what fits beside the static bytes in the 48 KB every block may take.
    pub(super) fn shared_limit(&self) -> usize {
        dynamic_limit(self.shared_max)
    }

    /// Whether a block of `plan` for `kind` over `s` gets the shared memory it takes here.
    #[cfg(feature = "lab")]
    pub(crate) fn one_row_fits(&self, kind: &'static str, s: &LinearShape, plan: OneRow) -> bool {
        plan.shared_bytes(kind, s) <= self.shared_limit()
    }

    /// Whether `blocks` blocks of `entry`, `bytes` of dynamic shared memory each, get that
    /// memory and are all resident on the device at once (the occupancy query's answer).
    fn all_resident(&self, entry: &'static str, bytes: usize, blocks: usize) -> bool {
        let Some(f) = self
            .functions
            .get(entry)
            .filter(|_| bytes <= self.shared_limit())
        else {
            return false;
        };
        let memo = &self.shared_per_sm;
        let known = memo
            .lock()
            .ok()
            .and_then(|m| m.get(&(entry, bytes)).copied());
        let per_sm = known.unwrap_or_else(|| {
            let n = f
                .occupancy_max_active_blocks_per_multiprocessor(32 * DEC_WARPS as u32, bytes, None)
                .map_or(0, |n| n as usize);
            if let Ok(mut m) = memo.lock() {
                m.insert((entry, bytes), n);
            }
            n
        });
        one_wave(blocks, per_sm, self.sms)
    }

    /// `plan` (the default rule's) moved to `gemv_decode_shared_*` at its split when every
    /// block of the launch fits on the device at once with its slots; `plan` otherwise.
    pub(super) fn shared_plan(&self, kind: &'static str, s: &LinearShape, plan: OneRow) -> OneRow {
        let shared = OneRow {
            via: RowKernel::Shared,
            split: plan.split,
        };
        let bytes = shared.shared_bytes(kind, s);
        if self.all_resident(shared_kernel(kind), bytes, s.decode_blocks(plan.split)) {
            shared
        } else {
            plan
        }
    }
}
