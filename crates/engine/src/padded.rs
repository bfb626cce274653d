//! A padded batch (ONNX Runtime GenAI's generator: `[batch, len]` tokens and an attention mask)
//! run on a [`BatchBackend`], one sequence per row.
//!
//! ONNX Runtime GenAI masks pad positions out of attention and counts positions over attended
//! tokens only, so each row's real tokens, run as a sequence of their own, compute what the
//! padded row does. The rows of a step share one forward pass.

use crate::batch::{BatchBackend, Chunk, LogitsWanted, SeqId};
use crate::{DecodeBackend, Error, Result, StepInput};

/// One generation of `batch` rows over a batch state.
pub struct PaddedBatch {
    inner: Box<dyn BatchBackend>,
    rows: Vec<SeqId>,
    /// Positions of the padded batch the caches cover (what the generator sees).
    len: usize,
}

impl PaddedBatch {
    /// `batch` empty rows on `inner`.
    pub fn new(mut inner: Box<dyn BatchBackend>, batch: usize) -> Self {
        let rows = (0..batch).map(|_| inner.add_sequence()).collect();
        PaddedBatch {
            inner,
            rows,
            len: 0,
        }
    }

    fn run(&mut self, input: &StepInput<'_>, logits: LogitsWanted) -> Result<Vec<f32>> {
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
            return Err(Error::InvalidState(format!(
                "step input does not match the batch of {batch}: {} tokens of {new_len} per row, \
                 mask of {}",
                input.tokens.len(),
                input.attention_mask.len()
            )));
        }
        let mut ids: Vec<Vec<i32>> = Vec::with_capacity(batch);
        for r in 0..batch {
            let tokens = &input.tokens[r * new_len..(r + 1) * new_len];
            let mask = &input.attention_mask[r * total + total - new_len..(r + 1) * total];
            let row: Vec<i32> = tokens
                .iter()
                .zip(mask)
                .filter(|&(_, &m)| m != 0)
                .map(|(&t, _)| t)
                .collect();
            if row.is_empty() {
                return Err(Error::InvalidState(format!(
                    "row {r} has no attended token in this step (an empty prompt in a batch)"
                )));
            }
            if logits == LogitsWanted::Every && row.len() != new_len {
                return Err(Error::InvalidState(
                    "the logits of padding positions are not computed by the native decoder".into(),
                ));
            }
            ids.push(row);
        }
        let chunks: Vec<Chunk<'_>> = self
            .rows
            .iter()
            .zip(&ids)
            .map(|(&seq, tokens)| Chunk {
                seq,
                tokens,
                logits,
            })
            .collect();
        let out = self.inner.step(&chunks)?;
        self.len = total;
        Ok(out)
    }
}

impl DecodeBackend for PaddedBatch {
    fn forward(&mut self, input: &StepInput<'_>) -> Result<Vec<f32>> {
        self.run(input, LogitsWanted::Last)
    }

    fn forward_all(&mut self, input: &StepInput<'_>) -> Result<Vec<f32>> {
        self.run(input, LogitsWanted::Every)
    }

    fn rewind_to(&mut self, len: usize) -> Result<()> {
        let len = len.min(self.len);
        if len == 0 {
            for &seq in &self.rows {
                self.inner.truncate_sequence(seq, 0)?;
            }
        } else if let [seq] = self.rows.as_slice() {
            self.inner.truncate_sequence(*seq, len)?;
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

#[cfg(test)]
#[path = "padded_tests.rs"]
mod tests;
