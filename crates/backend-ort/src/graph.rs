//! Planning CUDA graph capture by ONNX Runtime's CUDA execution provider: when it applies, the
//! fixed-shape I/O it needs, and the host-side values of each captured decode step.
//!
//! # Design
//!
//! With the CUDA provider option `enable_cuda_graph` = `1`, the EP records the kernels of a run
//! into a CUDA graph and replays it on later runs that carry the same graph id. A replay reuses
//! the device addresses and shapes of the captured run, so every input and output must be bound
//! (IoBinding) to a tensor allocated once on the device and only its *contents* may change:
//!
//! - `input_ids`: `[batch, 1]` on the device, rewritten each step (host staging + copy).
//! - `attention_mask`: `[batch, max_length]`, not `[batch, total]`: the GroupQueryAttention
//!   graphs the builder writes derive `seqlens_k = ReduceSum(mask) - 1` and the total length
//!   from the mask, so a static mask whose first `total` columns are the step's mask and whose
//!   rest are 0 gives the same attention while keeping its shape. Rewritten each step.
//! - `position_ids` (when the graph has it): `[batch, 1]`, rewritten each step.
//! - past/present KV: `past_present_share_buffer` (FACTS.md): one `[batch, kv_heads, max_length,
//!   head]` device buffer per tensor, bound as both the past input and the present output, so
//!   the model writes the new position in place. Only the split key/value layout qualifies.
//! - `logits`: a `[batch, 1, vocab]` device tensor; copied to the host after the run (outside
//!   the graph).
//!
//! The prompt run has a different shape (`[batch, prompt_len]` ids) and is never captured: it runs
//! with the run option `gpu_graph_id` = `-1` (no capture, no replay), with host inputs as today but
//! the same KV buffers. Every decode run (`new_len` = 1) carries `gpu_graph_id` = the id of this
//! buffer set (>= 1); the EP runs the first such runs normally (its warm-up), captures one, and
//! replays from then on. Because a graph bakes in addresses, an id belongs to one set of buffers:
//! each generation allocates its buffers and takes a fresh id (pooling buffer sets per batch and
//! `max_length` so a graph is captured once per set, as ORT GenAI does, is the next step; until
//! then every generation's graph stays in the EP's memory).
//!
//! When the option is on but a requirement fails, the generation takes today's path and every
//! run must say `gpu_graph_id` = `-1`; otherwise the EP would capture a run whose host-fed inputs
//! live at addresses that are not stable, and replay stale data.
//!
//! The device-bound step is in `graph_step.rs`. Its first GPU run gave other greedy tokens than
//! the uncaptured path from the fourth on, so it only runs when [`CAPTURE_ENV`] asks for it (the
//! crate README lists the suspects and what to check).

use crate::io::{IoSpec, KvLayout};
use crate::session::Device;
use genai_config::Provider;
use genai_engine::StepInput;
use ort::value::TensorElementType;

/// The CUDA provider option that turns capture on.
pub(crate) const ENABLE_OPTION: &str = "enable_cuda_graph";
/// The run option naming the graph a run captures or replays; `-1` means neither.
pub(crate) const GRAPH_ID_OPTION: &str = "gpu_graph_id";
/// `gpu_graph_id` for runs that must not be captured or replayed.
pub(crate) const NO_GRAPH: &str = "-1";

/// Whether the providers registered for the session ask the CUDA EP to capture graphs.
pub(crate) fn requested(providers: &[Provider]) -> bool {
    providers
        .iter()
        .filter(|p| p.name == "cuda")
        .filter_map(|p| p.option(ENABLE_OPTION))
        .any(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true"))
}

/// Environment variable: `1` lets a qualifying generation run its one-token steps captured.
/// Off by default: its first run on a GPU (Qwen2.5-0.5B shape, fp16) gave the same first three
/// greedy tokens as the uncaptured path and then other ones, so until that is found the EP's
/// graph stays unused (every run carries `gpu_graph_id` = -1) and the tokens stay right.
pub const CAPTURE_ENV: &str = "GENAI_BRIDGE_ORT_GRAPH";

/// Whether [`CAPTURE_ENV`] asks for the captured step.
pub(crate) fn capture_from_env() -> bool {
    std::env::var(CAPTURE_ENV).is_ok_and(|v| v == "1")
}

/// What decides whether one generation can use the graph path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    pub device: Device,
    pub enabled: bool,
    /// The captured step may run ([`CAPTURE_ENV`] = 1): off by default, see there.
    pub capture: bool,
    pub batch: usize,
    pub max_length: usize,
    pub past_present_share_buffer: bool,
    pub io: &'a IoSpec,
}

/// One tensor bound at a fixed device address for the whole generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fixed {
    pub name: String,
    pub dtype: TensorElementType,
    pub shape: Vec<i64>,
}

/// The fixed-shape I/O of the captured decode step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    pub batch: usize,
    pub max_length: usize,
    /// `input_ids`, `attention_mask`, then `position_ids` when the graph has it.
    pub inputs: Vec<Fixed>,
    /// One buffer per past input, bound to the past input and to its present output.
    pub kv: Vec<(String, String)>,
    pub kv_shape: Vec<i64>,
    pub kv_dtype: TensorElementType,
    pub logits: Fixed,
}

/// The graph path with its plan, or today's path and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// `enable_cuda_graph` is off: today's path, no run option needed.
    Off,
    /// Requested but not possible: today's path with `gpu_graph_id` = -1 on every run.
    Fallback(String),
    Capture(Plan),
}

impl Decision {
    /// Decides for one generation.
    pub(crate) fn new(request: &Request<'_>) -> Decision {
        if !request.enabled {
            return Decision::Off;
        }
        match plan(request) {
            Ok(plan) if request.capture => Decision::Capture(plan),
            Ok(_) => Decision::Fallback(format!(
                "CUDA graph not used: the captured step is off by default ({CAPTURE_ENV}=1 runs \
                 it; on the H200 its greedy tokens left the uncaptured ones from the fourth on)"
            )),
            Err(reason) => Decision::Fallback(format!("CUDA graph not used: {reason}")),
        }
    }

    /// The `gpu_graph_id` every run of today's path must carry, if any.
    pub(crate) fn uncaptured_run_option(&self) -> Option<&'static str> {
        match self {
            Decision::Off => None,
            Decision::Fallback(_) | Decision::Capture(_) => Some(NO_GRAPH),
        }
    }
}

fn plan(r: &Request<'_>) -> Result<Plan, String> {
    let io = r.io;
    if r.device != Device::Cuda {
        return Err("the session does not run on the CUDA execution provider".into());
    }
    if !r.past_present_share_buffer {
        return Err("search.past_present_share_buffer is off (or beams > 1)".into());
    }
    if io.kv_layout != KvLayout::Split {
        return Err("the model's KV inputs are combined (past_%d); split key/value needed".into());
    }
    if r.batch == 0 || r.max_length == 0 {
        return Err("batch and max_length must be positive".into());
    }
    let Some((mask_name, mask_type)) = &io.attention_mask else {
        return Err("the model has no attention_mask input to carry the sequence length".into());
    };
    let dims = |d: &[usize]| d.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let mut inputs = vec![
        Fixed {
            name: io.input_ids.0.clone(),
            dtype: io.input_ids.1,
            shape: dims(&[r.batch, 1]),
        },
        Fixed {
            name: mask_name.clone(),
            dtype: *mask_type,
            shape: dims(&[r.batch, r.max_length]),
        },
    ];
    if let Some((name, ty)) = &io.position_ids {
        inputs.push(Fixed {
            name: name.clone(),
            dtype: *ty,
            shape: dims(&[r.batch, 1]),
        });
    }
    let kv = io
        .past_inputs
        .iter()
        .cloned()
        .zip(io.present_outputs.iter().cloned())
        .collect();
    Ok(Plan {
        batch: r.batch,
        max_length: r.max_length,
        inputs,
        kv,
        kv_shape: io
            .kv_layout
            .shape(r.batch, io.kv_heads, r.max_length, io.head_size),
        kv_dtype: io.kv_dtype,
        logits: Fixed {
            name: io.logits.clone(),
            dtype: io.logits_dtype,
            shape: dims(&[r.batch, 1, io.vocab_size]),
        },
    })
}

/// How one run of a graph-path generation is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunKind {
    /// More than one new token (the prompt, or tokens appended later): host inputs, not captured.
    Uncaptured,
    /// One new token per row: the fixed buffers, captured then replayed.
    Captured,
}

impl RunKind {
    pub(crate) fn of(input: &StepInput<'_>) -> RunKind {
        if input.new_len == 1 {
            RunKind::Captured
        } else {
            RunKind::Uncaptured
        }
    }
}

/// The host values to copy into the fixed inputs before a captured run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepValues {
    /// `[batch]`
    pub ids: Vec<i64>,
    /// `[batch, max_length]`: the step's mask then zeros.
    pub mask: Vec<i64>,
    /// `[batch]`: the number of attended positions before the new one (0 when it is masked).
    pub positions: Vec<i64>,
}

impl StepValues {
    /// Fills the staging values from a one-token step, checking it fits the plan.
    pub(crate) fn fill(&mut self, plan: &Plan, input: &StepInput<'_>) -> Result<(), String> {
        let (batch, max) = (plan.batch, plan.max_length);
        let total = input.total_len;
        if input.new_len != 1 || input.tokens.len() != batch {
            return Err(format!(
                "a captured step takes one token per row; got {} tokens for batch {batch}",
                input.tokens.len()
            ));
        }
        if total == 0 || total > max || input.attention_mask.len() != batch * total {
            return Err(format!(
                "step length {total} does not fit the {max}-position buffers"
            ));
        }
        self.ids.clear();
        self.ids.extend(input.tokens.iter().map(|&t| i64::from(t)));
        self.mask.clear();
        self.mask.resize(batch * max, 0);
        self.positions.clear();
        for row in 0..batch {
            let mask = &input.attention_mask[row * total..(row + 1) * total];
            self.mask[row * max..row * max + total].copy_from_slice(mask);
            let before: i64 = mask[..total - 1].iter().sum();
            self.positions
                .push(if mask[total - 1] == 0 { 0 } else { before });
        }
        Ok(())
    }

    pub(crate) fn new() -> StepValues {
        StepValues {
            ids: Vec::new(),
            mask: Vec::new(),
            positions: Vec::new(),
        }
    }
}

#[cfg(test)]
#[path = "graph_tests.rs"]
mod tests;
