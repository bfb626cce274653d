//! The state of one native CPU generation: a KV cache per row. Rows of a batch are independent
//! sequences, each cached without its padding: ONNX Runtime GenAI masks pad positions out of
//! attention and counts positions over attended tokens only, so running each row's real tokens
//! alone computes the same thing.

use crate::cpu::forward::{LayerCache, LogitsOf, forward};
use crate::cpu::model::NativeModel;
use crate::cpu::threads::ThreadPool;
use genai_engine::{DecodeBackend, Error, Result, StepInput};
use std::sync::Arc;

/// One row: its cache and how many real tokens it holds.
struct Row {
    caches: Vec<LayerCache>,
    len: usize,
}

/// One generation.
pub(crate) struct CpuState {
    model: Arc<NativeModel>,
    pool: Arc<ThreadPool>,
    rows: Vec<Row>,
    capacity: usize,
    /// Positions of the padded batch the caches cover (what the generator sees).
    len: usize,
}

fn native(message: impl std::fmt::Display) -> Error {
    Error::backend("native", message)
}

impl CpuState {
    /// Caches of `capacity` positions for `batch` rows, refused up front when they would not
    /// fit in memory (capped by `memory_limit` bytes when given).
    pub(crate) fn new(
        model: Arc<NativeModel>,
        pool: Arc<ThreadPool>,
        batch: usize,
        capacity: usize,
        memory_limit: Option<u64>,
    ) -> Result<Self> {
        let mut bytes = 0u64;
        for layer in &model.layers {
            let layer_bytes = genai_engine::memory::checked_bytes(
                "the KV cache",
                &[batch, 2, layer.kv_heads, capacity, layer.head_size],
                size_of::<f32>(),
                memory_limit,
            )?;
            bytes = bytes.saturating_add(layer_bytes);
        }
        genai_engine::memory::ensure_fits(
            &format!("the native KV cache for {batch} row(s) of max_length {capacity}"),
            bytes,
            memory_limit,
        )?;
        let rows = (0..batch)
            .map(|_| Row {
                caches: model
                    .layers
                    .iter()
                    .map(|layer| {
                        let len = layer.kv_heads * capacity * layer.head_size;
                        LayerCache {
                            k: vec![0.0; len],
                            v: vec![0.0; len],
                        }
                    })
                    .collect(),
                len: 0,
            })
            .collect();
        Ok(CpuState {
            model,
            pool,
            rows,
            capacity,
            len: 0,
        })
    }

    fn run(&mut self, input: &StepInput<'_>, logits_of: LogitsOf) -> Result<Vec<f32>> {
        let (new_len, total) = (input.new_len, input.total_len);
        if total.checked_sub(new_len) != Some(self.len) {
            return Err(Error::InvalidState(format!(
                "step starts at position {} but the KV cache holds {}",
                total.saturating_sub(new_len),
                self.len
            )));
        }
        let batch = self.rows.len();
        if new_len == 0
            || input.tokens.len() != batch * new_len
            || input.attention_mask.len() != batch * total
        {
            return Err(native(format!(
                "step input does not match the batch of {batch}: {} tokens of {new_len} per row, \
                 mask of {}",
                input.tokens.len(),
                input.attention_mask.len()
            )));
        }
        let mut logits = Vec::new();
        for (r, row) in self.rows.iter_mut().enumerate() {
            let tokens = &input.tokens[r * new_len..(r + 1) * new_len];
            let mask = &input.attention_mask[r * total + total - new_len..(r + 1) * total];
            let ids: Vec<i64> = tokens
                .iter()
                .zip(mask)
                .filter(|&(_, &m)| m != 0)
                .map(|(&t, _)| i64::from(t))
                .collect();
            if ids.is_empty() {
                return Err(native(format!(
                    "row {r} has no attended token in this step (an empty prompt in a batch)"
                )));
            }
            if logits_of == LogitsOf::Every && ids.len() != new_len {
                return Err(native(
                    "the logits of padding positions are not computed by the native decoder",
                ));
            }
            let row_logits = forward(
                &self.model,
                &mut row.caches,
                self.capacity,
                row.len,
                &ids,
                logits_of,
                &self.pool,
            )
            .map_err(native)?;
            row.len += ids.len();
            logits.extend_from_slice(&row_logits);
        }
        self.len = total;
        Ok(logits)
    }
}

impl DecodeBackend for CpuState {
    fn forward(&mut self, input: &StepInput<'_>) -> Result<Vec<f32>> {
        self.run(input, LogitsOf::Last)
    }

    fn forward_all(&mut self, input: &StepInput<'_>) -> Result<Vec<f32>> {
        self.run(input, LogitsOf::Every)
    }

    fn rewind_to(&mut self, len: usize) -> Result<()> {
        let len = len.min(self.len);
        if len == 0 {
            self.rows.iter_mut().for_each(|row| row.len = 0);
        } else if let [row] = self.rows.as_mut_slice() {
            row.len = len;
        } else if len != self.len {
            return Err(Error::InvalidState(
                "a batch of several rows can only be rewound to 0".into(),
            ));
        }
        self.len = len;
        Ok(())
    }

    fn cached_len(&self) -> usize {
        self.len
    }
}
