//! The residency planner: given the weights a decode step reads (in the order it reads them),
//! the KV cache and workspace, and a byte budget, decide which weights stay on the device and
//! which are streamed from pinned host memory into a pool of equal device slots every step.
//!
//! Policy: the KV cache, workspace, lm_head and norms are always resident. When everything fits,
//! everything is resident. Otherwise the embedding table moves to mapped (page-locked) host
//! memory, where a step reads only its rows (a few KB) over the link instead of holding the whole
//! table on the device — the byte-aware choice, since every byte of device memory it frees keeps
//! a linear weight that would otherwise be copied in full every step. Then every candidate slot
//! size (each distinct linear size, largest first) is tried: weights larger than the slot must be
//! resident, the rest are kept resident largest-first while they fit beside the slot pool, and
//! the plan that streams the fewest bytes per step wins (ties: the smaller device footprint).
//! Deterministic for a given input.

use crate::{Error, Result};

/// What a weight is, for the always-resident rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightKind {
    /// A gathered table: resident when everything fits, else in mapped host memory.
    Embedding,
    LmHead,
    Norm,
    /// A linear layer's weight: may be streamed.
    Linear,
}

/// One weight a decode step reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightUse {
    pub name: String,
    pub bytes: u64,
    pub kind: WeightKind,
}

/// Everything the planner needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanInput {
    /// In the order a decode step reads them.
    pub weights: Vec<WeightUse>,
    pub kv_bytes: u64,
    pub workspace_bytes: u64,
}

/// Where one weight lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// In device memory for the session's life.
    Device,
    /// In page-locked host memory, copied into a device slot before every use.
    Streamed,
    /// In page-locked host memory mapped into the device's address space, read in place (only
    /// for gathered tables, whose step reads a few rows).
    HostMapped,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResidencyPlan {
    /// Per weight (same order as the input).
    pub placement: Vec<Placement>,
    /// Size of one streaming slot (0 when nothing is streamed).
    pub slot_bytes: u64,
    /// Number of slots (0 when nothing is streamed).
    pub slots: usize,
    /// KV cache and workspace.
    pub fixed_bytes: u64,
    /// Weights kept on the device.
    pub resident_bytes: u64,
    /// Weights read in place from mapped host memory (not device memory).
    pub mapped_bytes: u64,
    /// Weights copied from the host every step.
    pub streamed_bytes_per_step: u64,
}

impl ResidencyPlan {
    /// Device memory the plan uses: fixed buffers, resident weights and the slot pool.
    pub fn device_bytes(&self) -> u64 {
        self.fixed_bytes + self.resident_bytes + self.slot_bytes * self.slots as u64
    }

    /// Indexes of the streamed weights, in step order.
    pub fn streamed(&self) -> impl Iterator<Item = usize> + '_ {
        self.placement
            .iter()
            .enumerate()
            .filter(|(_, p)| **p == Placement::Streamed)
            .map(|(i, _)| i)
    }

    /// Whether weight `i` is copied from the host every step.
    pub fn is_streamed(&self, i: usize) -> bool {
        self.placement.get(i) == Some(&Placement::Streamed)
    }
}

fn always_resident(kind: WeightKind) -> bool {
    matches!(kind, WeightKind::LmHead | WeightKind::Norm)
}

/// Bytes of the weights that always stay on the device.
fn pinned_bytes(input: &PlanInput) -> u64 {
    input
        .weights
        .iter()
        .filter(|w| always_resident(w.kind))
        .map(|w| w.bytes)
        .sum()
}

/// Bytes of the gathered tables (in mapped host memory once anything streams).
fn table_bytes(input: &PlanInput) -> u64 {
    input
        .weights
        .iter()
        .filter(|w| w.kind == WeightKind::Embedding)
        .map(|w| w.bytes)
        .sum()
}

/// The smallest budget any plan with `slots` slots (at least 1) can run in: over every slot size, the fixed
/// buffers, the always-resident weights, the linear weights too large for the slot, and the pool.
pub fn minimum_budget(input: &PlanInput, slots: usize) -> u64 {
    let slots = slots.max(1) as u64;
    let fixed = input.kv_bytes + input.workspace_bytes;
    let pinned = pinned_bytes(input);
    let linear: Vec<u64> = input
        .weights
        .iter()
        .filter(|w| w.kind == WeightKind::Linear)
        .map(|w| w.bytes)
        .collect();
    let everything = fixed + pinned + table_bytes(input) + linear.iter().sum::<u64>();
    linear
        .iter()
        .map(|&slot| {
            let forced: u64 = linear.iter().filter(|&&b| b > slot).sum();
            fixed + pinned + forced + slot * slots
        })
        .fold(everything, u64::min)
}

/// Plans residency within `budget` bytes with `slots` streaming slots (at least 1; with 2 or
/// more one slot fills while another is read, with 1 each copy waits for the previous weight's
/// kernels: the fallback for budgets too small for two).
pub fn plan(input: &PlanInput, budget: u64, slots: usize) -> Result<ResidencyPlan> {
    let slots = slots.max(1);
    let fixed_bytes = input.kv_bytes + input.workspace_bytes;
    let total: u64 = input.weights.iter().map(|w| w.bytes).sum();
    let everything = ResidencyPlan {
        placement: vec![Placement::Device; input.weights.len()],
        slot_bytes: 0,
        slots: 0,
        fixed_bytes,
        resident_bytes: total,
        mapped_bytes: 0,
        streamed_bytes_per_step: 0,
    };
    if fixed_bytes + total <= budget {
        return Ok(everything);
    }
    let floor = minimum_budget(input, slots);
    if budget < floor {
        return Err(Error::BudgetTooSmall {
            minimum: floor,
            budget,
        });
    }
    let pinned = pinned_bytes(input);
    let mapped_bytes = table_bytes(input);
    let mut sizes: Vec<u64> = input
        .weights
        .iter()
        .filter(|w| w.kind == WeightKind::Linear)
        .map(|w| w.bytes)
        .collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    // Linear weights, largest first (ties in step order), for the greedy fill.
    let mut order: Vec<usize> = (0..input.weights.len())
        .filter(|&i| input.weights[i].kind == WeightKind::Linear)
        .collect();
    order.sort_by(|&a, &b| input.weights[b].bytes.cmp(&input.weights[a].bytes));

    // Every linear on the device with only the table moved out, when that fits.
    let linear_bytes = total - pinned - mapped_bytes;
    let mut best = (fixed_bytes + pinned + linear_bytes <= budget).then(|| ResidencyPlan {
        placement: input
            .weights
            .iter()
            .map(|w| match w.kind {
                WeightKind::Embedding => Placement::HostMapped,
                _ => Placement::Device,
            })
            .collect(),
        slot_bytes: 0,
        slots: 0,
        fixed_bytes,
        resident_bytes: pinned + linear_bytes,
        mapped_bytes,
        streamed_bytes_per_step: 0,
    });
    for slot in sizes {
        let pool = slot * slots as u64;
        let Some(mut room) = budget.checked_sub(fixed_bytes + pinned + pool) else {
            continue;
        };
        let mut resident: Vec<bool> = input
            .weights
            .iter()
            .map(|w| always_resident(w.kind))
            .collect();
        let is_table = |i: usize| input.weights[i].kind == WeightKind::Embedding;
        let mut feasible = true;
        // Weights that do not fit a slot must stay resident.
        for &i in &order {
            let bytes = input.weights[i].bytes;
            if bytes > slot {
                match room.checked_sub(bytes) {
                    Some(left) => {
                        room = left;
                        resident[i] = true;
                    }
                    None => feasible = false,
                }
            }
        }
        if !feasible {
            continue;
        }
        for &i in &order {
            let bytes = input.weights[i].bytes;
            if !resident[i] && bytes <= room {
                room -= bytes;
                resident[i] = true;
            }
        }
        let resident_bytes: u64 = input
            .weights
            .iter()
            .zip(&resident)
            .filter(|(_, r)| **r)
            .map(|(w, _)| w.bytes)
            .sum();
        let streamed = total - resident_bytes - mapped_bytes;
        let placement = (0..input.weights.len())
            .map(|i| match (resident[i], is_table(i)) {
                (true, _) => Placement::Device,
                (false, true) => Placement::HostMapped,
                (false, false) => Placement::Streamed,
            })
            .collect();
        let candidate = ResidencyPlan {
            placement,
            slot_bytes: if streamed > 0 { slot } else { 0 },
            slots: if streamed > 0 { slots } else { 0 },
            fixed_bytes,
            resident_bytes,
            mapped_bytes,
            streamed_bytes_per_step: streamed,
        };
        let better = match &best {
            None => true,
            Some(b) => {
                (candidate.streamed_bytes_per_step, candidate.device_bytes())
                    < (b.streamed_bytes_per_step, b.device_bytes())
            }
        };
        if better {
            best = Some(candidate);
        }
    }
    best.ok_or(Error::BudgetTooSmall {
        minimum: floor,
        budget,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A llama-like step: embedding, then per layer norm, qkv, o, norm, gate/up, down; head.
    pub(crate) fn model(layers: usize) -> PlanInput {
        let w = |name: String, bytes: u64, kind| WeightUse { name, bytes, kind };
        let mut weights = vec![w("embed".into(), 500, WeightKind::Embedding)];
        for l in 0..layers {
            weights.push(w(format!("{l}.norm1"), 1, WeightKind::Norm));
            weights.push(w(format!("{l}.qkv"), 60, WeightKind::Linear));
            weights.push(w(format!("{l}.o"), 40, WeightKind::Linear));
            weights.push(w(format!("{l}.norm2"), 1, WeightKind::Norm));
            weights.push(w(format!("{l}.gate_up"), 200, WeightKind::Linear));
            weights.push(w(format!("{l}.down"), 100, WeightKind::Linear));
        }
        weights.push(w("norm".into(), 1, WeightKind::Norm));
        weights.push(w("lm_head".into(), 500, WeightKind::LmHead));
        PlanInput {
            weights,
            kv_bytes: 64,
            workspace_bytes: 16,
        }
    }

    #[test]
    fn everything_resident_when_it_fits() {
        let input = model(4);
        let plan = plan(&input, 1_000_000, 2).unwrap();
        assert_eq!(plan.streamed_bytes_per_step, 0);
        assert_eq!((plan.slots, plan.slot_bytes), (0, 0));
        assert!(plan.placement.iter().all(|p| *p == Placement::Device));
        assert_eq!(plan.mapped_bytes, 0);
    }

    #[test]
    fn the_table_leaves_the_device_before_any_linear_streams() {
        let input = model(4);
        let total: u64 = input.weights.iter().map(|w| w.bytes).sum();
        // One byte short of everything: the 500-byte table moves to mapped host memory and no
        // linear is streamed.
        let plan = plan(&input, total + 80 - 1, 2).unwrap();
        assert_eq!(plan.placement[0], Placement::HostMapped);
        assert_eq!(plan.mapped_bytes, 500);
        assert_eq!(plan.streamed_bytes_per_step, 0);
        assert_eq!(plan.slots, 0);
        assert!(plan.device_bytes() < total + 80 - 1);
    }

    #[test]
    fn too_small_budgets_name_the_minimum_and_the_minimum_runs() {
        let input = model(4);
        // fixed 80 + lm_head 500 + 9 norms + two slots of the largest linear (200); the table
        // lives in mapped host memory.
        let minimum = 80 + 509 + 2 * 200;
        let err = plan(&input, minimum - 1, 2).unwrap_err();
        assert_eq!(
            err,
            Error::BudgetTooSmall {
                minimum,
                budget: minimum - 1
            }
        );
        assert!(err.to_string().contains(&minimum.to_string()));
        let plan = plan(&input, minimum, 2).unwrap();
        assert!(plan.device_bytes() <= minimum);
        assert_eq!(plan.streamed_bytes_per_step, 4 * 400);
    }

    #[test]
    fn more_budget_never_streams_more_and_the_plan_fits_its_budget() {
        let input = model(6);
        let total: u64 = input.weights.iter().map(|w| w.bytes).sum();
        let mut last = u64::MAX;
        let floor = minimum_budget(&input, 2);
        assert!(plan(&input, floor - 1, 2).is_err());
        for budget in (floor..=(total + 80)).step_by(37).chain([total + 80]) {
            let plan = plan(&input, budget, 2).unwrap();
            assert!(plan.device_bytes() <= budget, "budget {budget}: {plan:?}");
            assert!(plan.streamed_bytes_per_step <= last, "budget {budget}");
            assert_eq!(
                plan.resident_bytes + plan.mapped_bytes + plan.streamed_bytes_per_step,
                total,
                "budget {budget}"
            );
            for (w, p) in input.weights.iter().zip(&plan.placement) {
                match w.kind {
                    WeightKind::LmHead | WeightKind::Norm => {
                        assert_eq!(*p, Placement::Device, "{} must stay resident", w.name)
                    }
                    WeightKind::Embedding => assert_ne!(*p, Placement::Streamed),
                    WeightKind::Linear => assert_ne!(*p, Placement::HostMapped),
                }
                if *p == Placement::Streamed {
                    assert!(w.bytes <= plan.slot_bytes, "{} larger than a slot", w.name);
                }
            }
            last = plan.streamed_bytes_per_step;
        }
        assert_eq!(last, 0);
    }

    #[test]
    fn a_smaller_slot_is_chosen_when_it_streams_less() {
        // One huge linear and many small ones: streaming only small ones (slot 100) beats a
        // pool sized for the huge one.
        let mut input = model(2);
        input.weights[2].bytes = 2000;
        // fixed 80, lm_head + 5 norms 505, the huge weight, two 200-byte slots.
        let budget = 80 + 505 + 2000 + 2 * 200 + 100;
        assert!(minimum_budget(&input, 2) <= budget);
        let plan = plan(&input, budget, 2).unwrap();
        assert_eq!(
            plan.placement[2],
            Placement::Device,
            "the huge weight stays"
        );
        assert!(plan.slot_bytes <= 200);
        assert!(plan.device_bytes() <= budget);
    }
}
