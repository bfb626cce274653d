//! The generator: ONNX Runtime GenAI's token loop (append tokens, generate the next token,
//! rewind, logits access) over any [`DecodeBackend`].
//!
//! Semantics follow ORT GenAI: `append_tokens` runs the prompt through the model at once and the
//! first `generate_next_token` after it only chooses a token; later calls run one decode step for
//! the last chosen token first. A row that produced an EOS id is padded with `pad_token_id` from
//! then on; the step that finishes the last row appends nothing (the official runtime leaves that
//! EOS out of the sequences, while `next_tokens` still reports it). `max_length` counts prompt and
//! generated tokens together.

use crate::backend::{DecodeBackend, Decoder, StartOptions, StepInput};
use crate::choice::{Choice, SamplingSpec};
use crate::logits::{apply_min_length, apply_no_repeat_ngram, apply_repetition_penalty};
use crate::sampling::{Sampler, argmax};
use crate::{Error, Result};
use genai_config::{Model, Search};
use serde::Serialize;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Wall-clock time spent in the model, measured per call.
#[derive(Debug, Default, Clone, Serialize)]
pub struct GeneratorTimings {
    /// Forward passes over appended tokens (the prompt), in milliseconds.
    pub prefill_ms: Vec<f64>,
    /// One entry per decode step (forward pass of one token per row), in milliseconds.
    pub decode_ms: Vec<f64>,
}

/// One generation over a batch of rows. Thread safety: `Send`, used by one thread at a time;
/// [`Generator::cancel_handle`] gives a flag any thread may set to stop it at its next step.
pub struct Generator {
    backend: Box<dyn DecodeBackend>,
    search: Search,
    eos: Vec<i32>,
    pad: i32,
    vocab_size: usize,
    context_length: usize,
    /// Row-major `[batch, len]`.
    sequences: Vec<Vec<i32>>,
    /// Attention mask per row, the same length as the row.
    masks: Vec<Vec<i64>>,
    eos_seen: Vec<bool>,
    /// The tokens chosen by the last step (or the last appended ones), per row.
    next_tokens: Vec<i32>,
    /// After `rewind_to(n)`: the token each row had at position `n`. As in the official runtime,
    /// a step without new appended tokens feeds it back (and appends it) before choosing.
    rewound_next: Option<Vec<i32>>,
    /// Logits of the last position per row, `[batch, vocab]`, when the model has run for the
    /// current sequence and no token has been chosen from them yet.
    pending_logits: Option<Vec<f32>>,
    /// The logits most recently computed or set, for `logits()`.
    last_logits: Option<Vec<f32>>,
    /// New positions of the last forward pass (0 when there is none to report).
    last_run_len: usize,
    /// Every position's logits of the last forward pass, once asked for.
    last_run_logits: Option<Vec<f32>>,
    sampler: Sampler,
    cancel: Arc<AtomicBool>,
    timings: GeneratorTimings,
}

impl Generator {
    /// Starts a generation on `decoder` with the model's token ids and the search options.
    pub fn new(decoder: &dyn Decoder, model: &Model, search: &Search) -> Result<Self> {
        validate_search(search, model, decoder.vocab_size())?;
        let options = StartOptions {
            batch: search.batch_size,
            max_length: search.max_length,
            past_present_share_buffer: search.past_present_share_buffer && search.num_beams == 1,
        };
        let backend = decoder.start(&options)?;
        Ok(Generator {
            backend,
            search: search.clone(),
            eos: model.eos_token_ids.clone(),
            pad: model.pad_token_id,
            vocab_size: decoder.vocab_size(),
            context_length: model.context_length,
            sequences: vec![Vec::new(); search.batch_size],
            masks: vec![Vec::new(); search.batch_size],
            eos_seen: vec![false; search.batch_size],
            next_tokens: vec![0; search.batch_size],
            rewound_next: None,
            pending_logits: None,
            last_logits: None,
            last_run_len: 0,
            last_run_logits: None,
            sampler: Sampler::new(search.random_seed),
            cancel: Arc::new(AtomicBool::new(false)),
            timings: GeneratorTimings::default(),
        })
    }

    /// Rows in this generation.
    pub fn batch_size(&self) -> usize {
        self.sequences.len()
    }

    /// Tokens per row so far (prompt and generated).
    pub fn sequence_len(&self) -> usize {
        self.sequences.first().map_or(0, Vec::len)
    }

    /// Every token of one row.
    pub fn sequence(&self, row: usize) -> Option<&[i32]> {
        self.sequences.get(row).map(Vec::as_slice)
    }

    /// The tokens the last step chose (an EOS that ended the generation included), or the last
    /// appended tokens, one per row.
    pub fn next_tokens(&self) -> &[i32] {
        &self.next_tokens
    }

    /// True when every row has produced an EOS id.
    pub fn finished_by_eos(&self) -> bool {
        self.eos_seen.iter().all(|&seen| seen)
    }

    /// Time spent in forward passes so far.
    pub fn timings(&self) -> &GeneratorTimings {
        &self.timings
    }

    /// A flag that another thread may set to stop this generation at its next step.
    pub fn cancel_handle(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.cancel)
    }

    /// The search options in force.
    pub fn search(&self) -> &Search {
        &self.search
    }

    /// True once every row produced an EOS id or the sequence reached `max_length`, and no
    /// computed logits are waiting to be used.
    pub fn is_done(&self) -> bool {
        if self.pending_logits.is_some() {
            return false;
        }
        self.sequence_len() >= self.search.max_length || self.finished_by_eos()
    }

    /// Appends tokens (row-major `[batch, n]`) and runs them through the model at once.
    /// Rows of a batch are padded on the right with `pad_token_id`.
    pub fn append_tokens(&mut self, tokens: &[i32]) -> Result<()> {
        self.check_cancelled()?;
        let batch = self.batch_size();
        if tokens.is_empty() {
            return Err(Error::InvalidState("append_tokens: no tokens given".into()));
        }
        if !tokens.len().is_multiple_of(batch) {
            return Err(Error::BatchShape {
                what: "append_tokens",
                got: tokens.len(),
                batch,
            });
        }
        if batch > 1 && self.sequence_len() != 0 {
            return Err(Error::InvalidState(
                "append_tokens can be called only once when batch_size > 1; rewind to 0 first"
                    .into(),
            ));
        }
        for (position, &id) in tokens.iter().enumerate() {
            if usize::try_from(id).map_or(true, |id| id >= self.vocab_size) {
                return Err(Error::TokenOutOfRange {
                    id: id.into(),
                    position,
                    vocab_size: self.vocab_size,
                });
            }
        }
        let new_len = tokens.len() / batch;
        let requested = self.sequence_len() + new_len;
        if requested > self.search.max_length {
            return Err(Error::TooLong {
                requested,
                max_length: self.search.max_length,
                context_length: self.context_length,
            });
        }
        self.rewound_next = None;
        for (row, chunk) in tokens.chunks(new_len).enumerate() {
            let mask = row_mask(chunk, self.pad, batch);
            self.sequences[row].extend_from_slice(chunk);
            self.masks[row].extend(mask);
        }
        self.eos_seen.iter_mut().for_each(|seen| *seen = false);
        self.next_tokens = self
            .sequences
            .iter()
            .map(|s| s.last().copied().unwrap_or(0))
            .collect();
        let start = Instant::now();
        self.run_unprocessed()?;
        self.timings.prefill_ms.push(millis(start.elapsed()));
        Ok(())
    }

    /// Chooses the next token of every row, running a decode step first when needed.
    pub fn generate_next_token(&mut self) -> Result<()> {
        self.check_cancelled()?;
        if self.sequence_len() == 0 {
            return Err(Error::InvalidState(
                "generate_next_token: call append_tokens first".into(),
            ));
        }
        if self.sequence_len() >= self.search.max_length {
            return Err(Error::InvalidState(format!(
                "generate_next_token: the sequence is already at max_length ({})",
                self.search.max_length
            )));
        }
        if self.finished_by_eos() {
            // As in the official runtime: nothing is run or appended, every row reports the pad.
            self.next_tokens.iter_mut().for_each(|t| *t = self.pad);
            return Ok(());
        }
        // A batch-1 step may run and choose on the backend's device (only the id comes back);
        // the uniform is drawn first either way, so a seed gives one stream on both paths.
        let mut drawn = None;
        let mut logits = match self.pending_logits.take() {
            Some(logits) => logits,
            None => {
                self.restore_rewound()?;
                let start = Instant::now();
                if self.batch_size() == 1 && self.search.no_repeat_ngram_size == 0 {
                    drawn = (!self.search.is_greedy()).then(|| self.sampler.draw());
                    if let Some(token) = self.run_and_choose(drawn)? {
                        self.timings.decode_ms.push(millis(start.elapsed()));
                        self.accept(&[token]);
                        return Ok(());
                    }
                }
                self.run_unprocessed()?;
                self.timings.decode_ms.push(millis(start.elapsed()));
                self.pending_logits.take().unwrap_or_default()
            }
        };
        let vocab = self.vocab_size;
        let mut tokens = Vec::with_capacity(self.batch_size());
        for row in 0..self.batch_size() {
            let token = if self.eos_seen[row] {
                self.pad
            } else {
                let row_logits = &mut logits[row * vocab..(row + 1) * vocab];
                self.choose(row, row_logits, drawn.take())
            };
            tokens.push(token);
        }
        self.accept(&tokens);
        Ok(())
    }

    /// Records the chosen tokens: EOS bookkeeping, and appends them unless every row is done.
    fn accept(&mut self, tokens: &[i32]) {
        for (row, &token) in tokens.iter().enumerate() {
            if self.eos.contains(&token) {
                self.eos_seen[row] = true;
            }
            self.next_tokens[row] = token;
        }
        if !self.finished_by_eos() {
            for ((sequence, mask), &token) in self
                .sequences
                .iter_mut()
                .zip(&mut self.masks)
                .zip(&self.next_tokens)
            {
                sequence.push(token);
                mask.push(1);
            }
        }
    }

    /// Offers the decode step of a batch-1 generation to the backend's device choice; `None`:
    /// the backend declined and nothing ran.
    fn run_and_choose(&mut self, uniform: Option<f32>) -> Result<Option<i32>> {
        let (tokens, mask, new_len, total_len) = self.unprocessed()?;
        let search = &self.search;
        let sequence = &self.sequences[0];
        let suppressed: &[i32] = if sequence.len() < search.min_length {
            &self.eos
        } else {
            &[]
        };
        let penalty = search.repetition_penalty;
        let penalized = if penalty == 1.0 || penalty <= 0.0 {
            Vec::new()
        } else {
            distinct(sequence)
        };
        let choice = match uniform {
            None => Choice::Greedy,
            Some(uniform) => Choice::Sample {
                top_k: search.top_k,
                top_p: search.top_p,
                temperature: search.temperature,
                uniform,
            },
        };
        let spec = SamplingSpec {
            choice,
            penalty,
            penalized: &penalized,
            suppressed,
            no_repeat_ngram: search.no_repeat_ngram_size,
        };
        let input = StepInput {
            tokens: &tokens,
            new_len,
            attention_mask: &mask,
            total_len,
        };
        let Some(token) = self.backend.forward_choose(&input, &spec)? else {
            return Ok(None);
        };
        if usize::try_from(token).map_or(true, |t| t >= self.vocab_size) {
            return Err(Error::InvalidState(format!(
                "the backend chose token {token} outside the vocabulary ({})",
                self.vocab_size
            )));
        }
        // The logits stayed on the device: `output_logits` recomputes them when asked.
        self.pending_logits = None;
        self.last_logits = None;
        self.last_run_len = new_len;
        self.last_run_logits = None;
        Ok(Some(token))
    }

    /// Logits of the last position of every row, `[batch, vocab]`, computing them if the model
    /// has not yet run for the current sequence.
    pub fn logits(&mut self) -> Result<&[f32]> {
        if self.pending_logits.is_none() {
            if self.sequence_len() == 0 {
                return Err(Error::InvalidState(
                    "logits: call append_tokens first".into(),
                ));
            }
            self.run_unprocessed()?;
        }
        Ok(self.last_logits.as_deref().unwrap_or_default())
    }

    /// Replaces the logits the next `generate_next_token` chooses from; they must have been
    /// computed (and not yet used) first.
    pub fn set_logits(&mut self, logits: &[f32]) -> Result<()> {
        let expected = self.batch_size() * self.vocab_size;
        if logits.len() != expected {
            return Err(Error::LogitsShape {
                expected,
                got: logits.len(),
            });
        }
        if self.pending_logits.is_none() {
            // The official rule: logits can be replaced only once they are computed (after
            // append_tokens, or after get_logits ran the next step).
            return Err(Error::InvalidState(
                "set_logits: the logits are not computed yet; call append_tokens, or get_logits \
                 for the next step, before set_logits"
                    .into(),
            ));
        }
        self.pending_logits = Some(logits.to_vec());
        self.last_logits = Some(logits.to_vec());
        Ok(())
    }

    /// Keeps the first `len` tokens of every row (and their cache). `0` starts over. As in the
    /// official runtime, a following step without appended tokens continues from the token that
    /// was at position `len`, appending it first.
    pub fn rewind_to(&mut self, len: usize) -> Result<()> {
        let current = self.sequence_len();
        if len > current {
            return Err(Error::InvalidState(format!(
                "rewind_to({len}): the sequence has only {current} tokens"
            )));
        }
        if len == current {
            return Ok(());
        }
        if self.batch_size() > 1 && len != 0 {
            return Err(Error::InvalidState(
                "rewind_to must be called with 0 when batch_size > 1".into(),
            ));
        }
        self.rewound_next = (len > 0).then(|| self.sequences.iter().map(|s| s[len]).collect());
        for (sequence, mask) in self.sequences.iter_mut().zip(&mut self.masks) {
            sequence.truncate(len);
            mask.truncate(len);
        }
        let keep = len.min(self.backend.cached_len());
        self.backend.rewind_to(keep)?;
        self.eos_seen.iter_mut().for_each(|seen| *seen = false);
        self.next_tokens = self
            .sequences
            .iter()
            .map(|s| s.last().copied().unwrap_or(0))
            .collect();
        self.pending_logits = None;
        self.last_logits = None;
        self.last_run_len = 0;
        self.last_run_logits = None;
        Ok(())
    }

    /// Appends the tokens a rewind dropped at the cut, when nothing else was appended since.
    fn restore_rewound(&mut self) -> Result<()> {
        let Some(tokens) = self.rewound_next.take() else {
            return Ok(());
        };
        let requested = self.sequence_len() + 1;
        if requested > self.search.max_length {
            return Err(Error::TooLong {
                requested,
                max_length: self.search.max_length,
                context_length: self.context_length,
            });
        }
        for ((sequence, mask), token) in self.sequences.iter_mut().zip(&mut self.masks).zip(tokens)
        {
            sequence.push(token);
            mask.push(1);
        }
        Ok(())
    }

    fn check_cancelled(&self) -> Result<()> {
        if self.cancel.load(Ordering::Relaxed) {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }

    /// The tokens the cache has not seen (row-major), the mask, their count per row and the
    /// total length.
    #[allow(clippy::type_complexity)]
    fn unprocessed(&self) -> Result<(Vec<i32>, Vec<i64>, usize, usize)> {
        let total_len = self.sequence_len();
        let cached = self.backend.cached_len();
        if cached >= total_len {
            return Err(Error::InvalidState(
                "no new tokens to run through the model".into(),
            ));
        }
        let new_len = total_len - cached;
        let tokens: Vec<i32> = self
            .sequences
            .iter()
            .flat_map(|s| s[cached..].iter().copied())
            .collect();
        let mask: Vec<i64> = self.masks.iter().flat_map(|m| m.iter().copied()).collect();
        Ok((tokens, mask, new_len, total_len))
    }

    /// Runs every token the cache has not seen and stores the logits of the last position.
    fn run_unprocessed(&mut self) -> Result<()> {
        let (tokens, mask, new_len, total_len) = self.unprocessed()?;
        let input = StepInput {
            tokens: &tokens,
            new_len,
            attention_mask: &mask,
            total_len,
        };
        let logits = self.backend.forward(&input)?;
        let expected = self.batch_size() * self.vocab_size;
        if logits.len() != expected {
            return Err(Error::LogitsShape {
                expected,
                got: logits.len(),
            });
        }
        self.last_logits = Some(logits.clone());
        self.pending_logits = Some(logits);
        self.last_run_len = new_len;
        self.last_run_logits = None;
        Ok(())
    }

    /// The model's `logits` output of the last forward pass: `(positions, values)` with values
    /// row-major `[batch, positions, vocab]` — every prompt position after `append_tokens`, one
    /// after a decode step. Positions beyond the last are recomputed on demand (the backends keep
    /// only the last), which leaves the cache as it was.
    pub fn output_logits(&mut self) -> Result<(usize, Vec<f32>)> {
        let n = self.last_run_len;
        if n == 0 {
            return Err(Error::InvalidState(
                "the model has not run since the generator was created or rewound".into(),
            ));
        }
        if n == 1
            && let Some(logits) = &self.last_logits
        {
            return Ok((1, logits.clone()));
        }
        if let Some(all) = &self.last_run_logits {
            return Ok((n, all.clone()));
        }
        let end = self.backend.cached_len();
        let start = end.checked_sub(n).ok_or_else(|| {
            Error::InvalidState("the last forward pass is no longer in the cache".into())
        })?;
        let tokens: Vec<i32> = self
            .sequences
            .iter()
            .flat_map(|s| s[start..end].iter().copied())
            .collect();
        let mask: Vec<i64> = self
            .masks
            .iter()
            .flat_map(|m| m[..end].iter().copied())
            .collect();
        self.backend.rewind_to(start)?;
        let input = StepInput {
            tokens: &tokens,
            new_len: n,
            attention_mask: &mask,
            total_len: end,
        };
        // One position (a step chosen on the device): the plain forward pass gives it.
        let all = match if n == 1 {
            self.backend.forward(&input)
        } else {
            self.backend.forward_all(&input)
        } {
            Ok(all) => all,
            Err(e) => {
                // Put the cache back as it was before reporting the failure.
                self.backend.forward(&input)?;
                return Err(e);
            }
        };
        let expected = self.batch_size() * n * self.vocab_size;
        if all.len() != expected {
            return Err(Error::LogitsShape {
                expected,
                got: all.len(),
            });
        }
        if n == 1 {
            self.last_logits = Some(all.clone());
        } else {
            self.last_run_logits = Some(all.clone());
        }
        Ok((n, all))
    }

    /// Applies the logits processors and picks a token for one row, with `uniform` when one
    /// was drawn for it already.
    fn choose(&mut self, row: usize, logits: &mut [f32], uniform: Option<f32>) -> i32 {
        let search = &self.search;
        let sequence = &self.sequences[row];
        apply_min_length(logits, sequence.len(), search.min_length, &self.eos);
        apply_repetition_penalty(logits, sequence, search.repetition_penalty);
        apply_no_repeat_ngram(logits, sequence, search.no_repeat_ngram_size);
        let index = if search.is_greedy() {
            argmax(logits)
        } else {
            let u = uniform.unwrap_or_else(|| self.sampler.draw());
            let (k, p, t) = (search.top_k, search.top_p, search.temperature);
            self.sampler.select(logits, k, p, t, u)
        };
        i32::try_from(index).unwrap_or(i32::MAX)
    }
}

/// The distinct ids of a sequence, in order of first appearance.
fn distinct(sequence: &[i32]) -> Vec<i32> {
    let mut seen = std::collections::HashSet::with_capacity(sequence.len());
    sequence
        .iter()
        .copied()
        .filter(|id| seen.insert(*id))
        .collect()
}

/// ORT GenAI's mask for appended tokens: all ones for one row; with several rows, trailing
/// pad tokens are masked out.
fn row_mask(tokens: &[i32], pad: i32, batch: usize) -> Vec<i64> {
    if batch == 1 {
        return vec![1; tokens.len()];
    }
    let last_real = tokens.iter().rposition(|&t| t != pad).map_or(0, |i| i + 1);
    (0..tokens.len())
        .map(|i| i64::from(i < last_real))
        .collect()
}

fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The checks ORT GenAI makes when a generator is created.
fn validate_search(search: &Search, model: &Model, vocab_size: usize) -> Result<()> {
    let bad = |message: String| Err(Error::InvalidOption(message));
    if search.max_length == 0 {
        return bad("max_length is 0".into());
    }
    if search.max_length > model.context_length {
        return bad(format!(
            "max_length ({}) cannot be greater than the model's context_length ({})",
            search.max_length, model.context_length
        ));
    }
    if search.batch_size == 0 {
        return bad("batch_size must be at least 1".into());
    }
    if search.num_beams != 1 {
        return bad(format!(
            "num_beams {} is not supported: only greedy search and sampling (num_beams 1) are",
            search.num_beams
        ));
    }
    if !(0.0..=1.0).contains(&search.top_p) {
        return bad(format!(
            "top_p ({}) must be between 0.0 and 1.0",
            search.top_p
        ));
    }
    if search.do_sample && search.top_k > vocab_size {
        return bad(format!(
            "top_k ({}) must be less than or equal to vocab_size ({vocab_size})",
            search.top_k
        ));
    }
    if search.temperature < 0.0 || search.temperature.is_nan() {
        return bad(format!(
            "temperature ({}) must not be negative",
            search.temperature
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "generator_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "generator_choose_tests.rs"]
mod choose_tests;
