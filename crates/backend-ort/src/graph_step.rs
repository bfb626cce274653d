//! The captured decode step: inputs and logits bound once to fixed device tensors allocated by
//! ONNX Runtime's CUDA allocator, values copied into them in place, and the `gpu_graph_id` run
//! option that lets the CUDA execution provider capture and replay the step (see `graph.rs`).

use crate::Error;
use crate::graph::{GRAPH_ID_OPTION, NO_GRAPH, Plan, StepValues};
use crate::tensors::logits_f32;
use genai_engine::StepInput;
use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{RunOptions, Session};
use ort::value::{DynTensor, TensorElementType};

/// A run option set carrying `gpu_graph_id`.
pub(crate) fn graph_run_options(id: &str) -> Result<RunOptions, Error> {
    let mut options = RunOptions::new().map_err(|e| Error::ort("run options", e))?;
    options
        .set(GRAPH_ID_OPTION, id)
        .map_err(|e| Error::ort(format!("run option {GRAPH_ID_OPTION}={id}"), e))?;
    Ok(options)
}

/// Run options for runs that must not be captured or replayed.
pub(crate) fn uncaptured_run_options() -> Result<RunOptions, Error> {
    graph_run_options(NO_GRAPH)
}

/// One fixed input: a host staging tensor and its device twin, both allocated once.
struct Slot {
    name: String,
    host: DynTensor,
    device: DynTensor,
}

/// The fixed device I/O of one generation's captured step (the KV buffers live in `KvCache`).
pub(crate) struct GraphStep {
    plan: Plan,
    values: StepValues,
    /// `input_ids`, `attention_mask`, then `position_ids` when present, as in `plan.inputs`.
    slots: Vec<Slot>,
    logits: DynTensor,
    options: RunOptions,
}

impl GraphStep {
    /// Allocates the fixed inputs and the logits on CUDA device 0 through the session's allocator.
    pub(crate) fn new(session: &Session, plan: Plan, graph_id: usize) -> Result<Self, Error> {
        let info = MemoryInfo::new(
            AllocationDevice::CUDA,
            0,
            AllocatorType::Device,
            MemoryType::Default,
        )
        .map_err(|e| Error::ort("CUDA memory info", e))?;
        let device = Allocator::new(session, info).map_err(|e| Error::ort("CUDA allocator", e))?;
        let host = Allocator::default();
        let alloc = |allocator: &Allocator, ty: TensorElementType, shape: &[i64], what: &str| {
            DynTensor::new(allocator, ty, shape.to_vec())
                .map_err(|e| Error::ort(format!("allocating the fixed {what}"), e))
        };
        let slots = plan
            .inputs
            .iter()
            .map(|f| {
                Ok(Slot {
                    name: f.name.clone(),
                    host: alloc(&host, f.dtype, &f.shape, &f.name)?,
                    device: alloc(&device, f.dtype, &f.shape, &f.name)?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let logits = alloc(&device, plan.logits.dtype, &plan.logits.shape, "logits")?;
        Ok(GraphStep {
            values: StepValues::new(),
            slots,
            logits,
            options: graph_run_options(&graph_id.to_string())?,
            plan,
        })
    }

    /// Runs one captured step: `kv` holds the shared past/present buffers in `plan.kv` order.
    /// Returns the logits `[batch, 1, vocab]` as f32 on the host.
    pub(crate) fn run(
        &mut self,
        session: &mut Session,
        kv: &mut [DynTensor],
        input: &StepInput<'_>,
    ) -> Result<(Vec<i64>, Vec<f32>), Error> {
        let bad = |message: String| Error::Io {
            model: "captured step".into(),
            message,
        };
        self.values.fill(&self.plan, input).map_err(bad)?;
        let sources = [
            Some(&self.values.ids),
            Some(&self.values.mask),
            Some(&self.values.positions),
        ];
        for (slot, values) in self.slots.iter_mut().zip(sources.into_iter().flatten()) {
            write_ints(&mut slot.host, values)?;
            slot.host
                .copy_into(&mut slot.device)
                .map_err(|e| Error::ort(format!("copying {} to the device", slot.name), e))?;
        }
        if kv.len() != self.plan.kv.len() {
            return Err(bad(format!(
                "{} KV buffers for {} past inputs",
                kv.len(),
                self.plan.kv.len()
            )));
        }
        let mut binding = session
            .create_binding()
            .map_err(|e| Error::ort("IO binding", e))?;
        for slot in &self.slots {
            binding
                .bind_input(slot.name.as_str(), &slot.device)
                .map_err(|e| Error::ort(format!("binding {}", slot.name), e))?;
        }
        let pairs = self.plan.kv.iter().map(|(past, present)| (past, present));
        crate::kv::bind_shared(&mut binding, pairs, kv)?;
        binding
            .bind_output(self.plan.logits.name.as_str(), &mut self.logits)
            .map_err(|e| Error::ort("binding logits", e))?;
        session
            .run_binding_with_options(&binding, &self.options)
            .map_err(|e| Error::ort("captured run", e))?;
        let host = self
            .logits
            .to(AllocationDevice::CPU, 0)
            .map_err(|e| Error::ort("copying logits to the host", e))?;
        logits_f32(&host.into_dyn())
    }
}

/// Writes i64 values into a host tensor of the graph's integer type.
fn write_ints(tensor: &mut DynTensor, values: &[i64]) -> Result<(), Error> {
    let context = "writing a fixed input";
    let short = || Error::Io {
        model: "captured step".into(),
        message: format!("{} values for a smaller fixed input", values.len()),
    };
    match tensor.dtype().tensor_type() {
        Some(TensorElementType::Int32) => {
            let (_, data) = tensor
                .try_extract_tensor_mut::<i32>()
                .map_err(|e| Error::ort(context, e))?;
            let data = data.get_mut(..values.len()).ok_or_else(short)?;
            for (d, &v) in data.iter_mut().zip(values) {
                *d = i32::try_from(v).unwrap_or(i32::MAX);
            }
        }
        _ => {
            let (_, data) = tensor
                .try_extract_tensor_mut::<i64>()
                .map_err(|e| Error::ort(context, e))?;
            data.get_mut(..values.len())
                .ok_or_else(short)?
                .copy_from_slice(values);
        }
    }
    Ok(())
}
