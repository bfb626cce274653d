//! Where a CUDA decoder's weights live: the residency plan (`paging::choose_plan`) made from
//! the model's step weights, the budget (given, or the free device memory when the model does
//! not fit) and the link and device bandwidth measured here; then the placement it says, and
//! the budget each device's decoders share.

use crate::cuda::device::Device;
use crate::cuda::model::{DevModel, StepItem};
use crate::cuda::pager::{Pager, measure_link};
use crate::error::Error;
use crate::paging::{
    Costs, Placement, PlanInput, Reservation, SharedBudget, VramBudget, WeightKind,
};
use cudarc::driver::CudaStream;
use std::sync::{Arc, Mutex, PoisonError};

/// Largest number of slots considered (the prefetch depth is chosen among 1..=this).
const MAX_SLOTS: usize = 4;
/// Bytes per measuring copy (the link reaches its full speed from 64 MiB chunks).
const LINK_PROBE_BYTES: usize = 64 << 20;
/// Fixed time per streamed weight's kernels, seconds (launch and tail), for the simulation.
const PER_WEIGHT_S: f64 = 5e-6;
/// Device memory left unplanned when the budget is the free memory (driver, NVRTC modules,
/// fragmentation): this much, or a sixteenth of the free memory when that is less.
const FREE_MEMORY_MARGIN: u64 = 512 << 20;

/// The plan in effect, for counters and reports.
#[derive(Debug, Clone)]
pub(crate) struct Summary {
    pub budget_bytes: u64,
    pub resident_weight_bytes: u64,
    pub streamed_weight_bytes: u64,
    pub mapped_bytes: u64,
    pub slots: usize,
    pub slot_bytes: usize,
    pub h2d_bytes_per_s: f64,
}

/// The decoder's side of residency: the pager (when anything streams), the plan summary (when
/// a budget was given or the model did not fit), and its share of the device budget.
pub(crate) struct Residency {
    pub pager: Option<Pager>,
    pub summary: Option<Summary>,
    pub budget: Option<SharedBudget>,
    pub reason: Option<String>,
    _reservation: Option<Reservation>,
}

impl Residency {
    /// Everything uploaded as it was read; no budget.
    pub fn resident() -> Self {
        Residency {
            pager: None,
            summary: None,
            budget: None,
            reason: None,
            _reservation: None,
        }
    }
}

/// Budgets by device ordinal: the decoders given `--vram-budget` on one device share it.
static BUDGETS: Mutex<Vec<(usize, SharedBudget)>> = Mutex::new(Vec::new());

/// The shared budget of `ordinal`, set to `total` (a new total applies to the decoders and
/// generations planned from now on, never to running ones).
fn shared_budget(ordinal: usize, total: u64) -> SharedBudget {
    let mut budgets = BUDGETS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, b)) = budgets.iter().find(|(o, _)| *o == ordinal) {
        b.set_total(total);
        return b.clone();
    }
    let b = SharedBudget::new(total);
    budgets.push((ordinal, b.clone()));
    b
}

fn gb(bytes: u64) -> String {
    format!("{:.2} GB", bytes as f64 / 1e9)
}

/// Plans and places the weights of `model` (read with nothing but the lm_head and norms
/// uploaded) within `budget`, or, when `budget` is `None`, within `free`: the device memory
/// that was free before the model was read (capped by the caller's limit).
/// `state_bytes` (a generation's KV cache and workspace at the planned length,
/// `Buffers::bytes`) are reserved in the plan.
pub(crate) fn place(
    device: &Device,
    ordinal: usize,
    stream: &Arc<CudaStream>,
    model: &mut DevModel,
    budget: Option<VramBudget>,
    state_bytes: u64,
    free: u64,
) -> Result<Residency, Error> {
    let (weights, items) = model.step_weights();
    let input = PlanInput {
        weights,
        kv_bytes: state_bytes,
        workspace_bytes: 0,
    };
    let (shared, budget_bytes, why) = match budget {
        Some(b) => {
            let weights: u64 = input
                .weights
                .iter()
                .filter(|w| w.kind != WeightKind::Embedding)
                .map(|w| w.bytes)
                .sum();
            let total = b.resolve(device.total_mem as u64, weights, state_bytes);
            let shared = shared_budget(ordinal, total);
            let available = shared.available();
            let why = format!(
                "VRAM budget {} ({} not held by other sessions on this device)",
                gb(total),
                gb(available)
            );
            (Some(shared), available, why)
        }
        None => {
            let everything: u64 = input.weights.iter().map(|w| w.bytes).sum::<u64>() + state_bytes;
            let why = format!(
                "weights, KV cache and workspace ({}) exceed the free device memory ({}): \
                 streaming the rest from host memory",
                gb(everything),
                gb(free)
            );
            let margin = FREE_MEMORY_MARGIN.min(free / 16);
            (None, free.saturating_sub(margin), why)
        }
    };
    let (h2d, d2d) = measure_link(stream, LINK_PROBE_BYTES)?;
    let costs = Costs {
        h2d_bytes_per_s: h2d,
        device_bytes_per_s: d2d,
        per_weight_s: PER_WEIGHT_S,
    };
    let (plan, report) = crate::paging::choose_plan(&input, budget_bytes, &costs, MAX_SLOTS)?;
    let mut pager = (plan.slots > 0)
        .then(|| Pager::new(stream, plan.slots, plan.slot_bytes as usize))
        .transpose()?;
    let mut linears = model.linears_mut();
    for (item, placement) in items.iter().zip(&plan.placement) {
        match (*item, *placement, pager.as_mut()) {
            (StepItem::Linear(i), Placement::Streamed, Some(p)) => linears[i].stream_into(p)?,
            (StepItem::Linear(i), _, _) => linears[i].upload(stream)?,
            _ => {}
        }
    }
    let table_on_device = plan.placement.first() == Some(&Placement::Device);
    model.embedding.place(stream, table_on_device)?;
    stream.synchronize().map_err(|e| Error::Cuda {
        what: "weight placement",
        message: format!("{e:?}"),
    })?;
    let reservation = shared
        .as_ref()
        .map(|s| s.reserve(plan.device_bytes() - plan.fixed_bytes))
        .transpose()?;
    if shared.is_none() && plan.streamed_bytes_per_step == 0 && plan.mapped_bytes == 0 {
        // No budget and, after all, everything fits: a plain resident decoder.
        return Ok(Residency::resident());
    }
    let summary = Summary {
        budget_bytes,
        resident_weight_bytes: plan.resident_bytes,
        streamed_weight_bytes: plan.streamed_bytes_per_step,
        mapped_bytes: plan.mapped_bytes,
        slots: plan.slots,
        slot_bytes: plan.slot_bytes as usize,
        h2d_bytes_per_s: h2d,
    };
    let streamed = pager.as_ref().map_or(0, Pager::streamed);
    let reason = format!(
        "{why}: {} of weights resident, {} streamed per pass ({streamed} weights through {} \
         slots of {}), {} of tables in mapped host memory; link {:.1} GB/s measured, predicted \
         {:.1} tokens/s",
        gb(plan.resident_bytes),
        gb(plan.streamed_bytes_per_step),
        plan.slots,
        gb(plan.slot_bytes),
        gb(plan.mapped_bytes),
        h2d / 1e9,
        report.tokens_per_s
    );
    Ok(Residency {
        pager,
        summary: Some(summary),
        budget: shared,
        reason: Some(reason),
        _reservation: reservation,
    })
}
