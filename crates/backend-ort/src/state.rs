//! One generation on the ONNX Runtime backend: builds each step's inputs (ids, mask, position
//! ids, past KV), runs the session and keeps the presents.

use crate::Error;
use crate::cuda_graph;
use crate::io::KvLayout;
use crate::kv::{self, KvCache};
use crate::shared::Shared;
use crate::tensors::{int_tensor, logits_f32};
use genai_engine::{DecodeBackend, StartOptions, StepInput};
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::RunOptions;
use ort::value::DynValue;
use std::sync::Arc;

/// Per-generation state.
pub(crate) struct OrtState {
    shared: Arc<Shared>,
    kv: KvCache,
    batch: usize,
    cached_len: usize,
    /// `gpu_graph_id` = -1 for every run while `enable_cuda_graph` is on.
    uncaptured: Option<RunOptions>,
}

impl OrtState {
    pub(crate) fn new(shared: Arc<Shared>, options: &StartOptions) -> Result<Self, Error> {
        let io = &shared.io;
        let use_static = options.past_present_share_buffer && io.kv_layout == KvLayout::Split;
        let uncaptured = match shared.graph_id {
            Some(id) => Some(cuda_graph::run_options(id)?),
            None => None,
        };
        let session = shared.session.lock().map_err(|_| poisoned())?;
        let kv = if use_static {
            KvCache::shared(
                &session,
                io,
                shared.device,
                options.batch,
                options.max_length,
            )?
        } else {
            KvCache::ping_pong(io, options.batch)?
        };
        drop(session);
        Ok(OrtState {
            shared: Arc::clone(&shared),
            kv,
            batch: options.batch,
            cached_len: 0,
            uncaptured,
        })
    }

    fn run(&mut self, input: &StepInput<'_>) -> Result<(Vec<i64>, Vec<f32>), Error> {
        let io = &self.shared.io;
        let batch = self.batch;
        let new_len = input.new_len;
        let total = input.total_len;
        if input.tokens.len() != batch * new_len
            || input.attention_mask.len() != batch * total
            || total < new_len
        {
            return Err(Error::Io {
                model: "step".into(),
                message: "inconsistent step input sizes".into(),
            });
        }
        if let KvCache::Shared { capacity, .. } = &self.kv
            && total > *capacity
        {
            return Err(Error::Io {
                model: "step".into(),
                message: format!(
                    "sequence length {total} exceeds the KV buffer's {capacity} positions"
                ),
            });
        }
        let past_len = total - new_len;
        let mut inputs: Vec<(String, DynValue)> = Vec::with_capacity(3 + io.past_inputs.len());
        let ids = input.tokens.iter().map(|&t| i64::from(t)).collect();
        inputs.push((
            io.input_ids.0.clone(),
            int_tensor(io.input_ids.1, [batch, new_len], ids)?,
        ));
        if let Some((name, ty)) = &io.attention_mask {
            inputs.push((
                name.clone(),
                int_tensor(*ty, [batch, total], input.attention_mask.to_vec())?,
            ));
        }
        if let Some((name, ty)) = &io.position_ids {
            inputs.push((
                name.clone(),
                int_tensor(*ty, [batch, new_len], position_ids(input, batch, past_len))?,
            ));
        }

        let mut session = self.shared.session.lock().map_err(|_| poisoned())?;
        let logits = match &mut self.kv {
            KvCache::PingPong { values } => {
                let mut feed: Vec<(String, ort::session::SessionInputValue<'_>)> =
                    inputs.into_iter().map(|(n, v)| (n, v.into())).collect();
                for (name, value) in io.past_inputs.iter().zip(values.iter()) {
                    feed.push((name.clone(), value.into()));
                }
                let outputs = match &self.uncaptured {
                    Some(options) => session.run_with_options(feed, options),
                    None => session.run(feed),
                };
                let mut outputs = outputs.map_err(|e| Error::ort("run", e))?;
                let mut presents = Vec::with_capacity(io.present_outputs.len());
                for name in &io.present_outputs {
                    presents.push(outputs.remove(name.as_str()).ok_or_else(|| missing(name))?);
                }
                let logits = outputs
                    .remove(io.logits.as_str())
                    .ok_or_else(|| missing(&io.logits))?;
                drop(outputs);
                *values = presents;
                logits_f32(&logits)?
            }
            KvCache::Shared { buffers, .. } => {
                let mut binding = session
                    .create_binding()
                    .map_err(|e| Error::ort("IO binding", e))?;
                for (name, value) in &inputs {
                    binding
                        .bind_input(name.as_str(), value)
                        .map_err(|e| Error::ort(format!("binding {name}"), e))?;
                }
                let pairs = io.past_inputs.iter().zip(&io.present_outputs);
                kv::bind_shared(&mut binding, pairs, buffers)?;
                let cpu = MemoryInfo::new(
                    AllocationDevice::CPU,
                    0,
                    AllocatorType::Device,
                    MemoryType::CPUOutput,
                )
                .map_err(|e| Error::ort("CPU memory info", e))?;
                binding
                    .bind_output_to_device(io.logits.as_str(), &cpu)
                    .map_err(|e| Error::ort("binding logits", e))?;
                let outputs = match &self.uncaptured {
                    Some(options) => session.run_binding_with_options(&binding, options),
                    None => session.run_binding(&binding),
                };
                let mut outputs = outputs.map_err(|e| Error::ort("run", e))?;
                let logits = outputs
                    .remove(io.logits.as_str())
                    .ok_or_else(|| missing(&io.logits))?;
                logits_f32(&logits)?
            }
        };
        drop(session);
        self.cached_len = total;
        Ok(logits)
    }
}

/// ORT GenAI's position ids: masked positions get 0, others the count of attended positions
/// before them (so trailing pads of a batch row do not shift the row's positions).
fn position_ids(input: &StepInput<'_>, batch: usize, past_len: usize) -> Vec<i64> {
    let total = input.total_len;
    let mut positions = Vec::with_capacity(batch * input.new_len);
    for row in 0..batch {
        let mask = &input.attention_mask[row * total..(row + 1) * total];
        let mut attended_before: i64 = mask[..past_len].iter().sum();
        for &m in &mask[past_len..] {
            positions.push(if m == 0 { 0 } else { attended_before });
            attended_before += m;
        }
    }
    positions
}

/// Picks each row's logits at its last attended new position from `[batch, seq, vocab]`.
fn last_positions(
    (shape, data): (Vec<i64>, Vec<f32>),
    input: &StepInput<'_>,
    batch: usize,
    vocab: usize,
) -> Result<Vec<f32>, Error> {
    let bad = || Error::Io {
        model: "step".into(),
        message: format!("logits have shape {shape:?}; [batch, seq, vocab] expected"),
    };
    let (seq, vocab_out) = match shape.as_slice() {
        [b, s, v] if *b as usize == batch => (*s as usize, *v as usize),
        _ => return Err(bad()),
    };
    if vocab_out != vocab || data.len() != batch * seq * vocab {
        return Err(bad());
    }
    let total = input.total_len;
    let mut rows = Vec::with_capacity(batch * vocab);
    for row in 0..batch {
        let new_mask =
            &input.attention_mask[row * total + total - input.new_len..(row + 1) * total];
        let last = new_mask
            .iter()
            .rposition(|&m| m != 0)
            .unwrap_or(input.new_len - 1);
        // Models patched to output only the last position have seq == 1.
        let position = if seq == input.new_len { last } else { seq - 1 };
        let start = (row * seq + position) * vocab;
        rows.extend_from_slice(&data[start..start + vocab]);
    }
    Ok(rows)
}

fn poisoned() -> Error {
    Error::Io {
        model: "session".into(),
        message: "a previous run panicked while holding the session".into(),
    }
}

fn missing(name: &str) -> Error {
    Error::Io {
        model: "run".into(),
        message: format!("the session produced no output {name:?}"),
    }
}

impl OrtState {
    /// A step must start where the KV cache ends.
    fn check_start(&self, input: &StepInput<'_>) -> genai_engine::Result<()> {
        let start = input.total_len.saturating_sub(input.new_len);
        if start != self.cached_len {
            return Err(genai_engine::Error::InvalidState(format!(
                "step starts at position {start} but the KV cache holds {}",
                self.cached_len
            )));
        }
        Ok(())
    }
}

impl DecodeBackend for OrtState {
    fn forward(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
        self.check_start(input)?;
        let batch = self.batch;
        let logits = self.run(input)?;
        Ok(last_positions(
            logits,
            input,
            batch,
            self.shared.io.vocab_size,
        )?)
    }

    fn forward_all(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
        self.check_start(input)?;
        let batch = self.batch;
        let (shape, data) = self.run(input)?;
        let want = [
            batch as i64,
            input.new_len as i64,
            self.shared.io.vocab_size as i64,
        ];
        if shape != want {
            return Err(genai_engine::Error::backend(
                "ort",
                format!(
                    "logits have shape {shape:?}; {want:?} expected (a model patched to output \
                     the last position only cannot report every position)"
                ),
            ));
        }
        Ok(data)
    }

    fn rewind_to(&mut self, len: usize) -> genai_engine::Result<()> {
        let keep = len.min(self.cached_len);
        self.kv.truncate(&self.shared.io, keep)?;
        self.cached_len = keep;
        Ok(())
    }

    fn cached_len(&self) -> usize {
        self.cached_len
    }
}
