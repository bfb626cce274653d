//! Many sequences per forward pass: the [`BatchBackend`] a decoder gives for ragged batches over
//! a paged KV cache, and what one step of it takes and returns.
//!
//! A batch state holds any number of sequences, each with its own KV blocks
//! ([`crate::kv_blocks`]). One [`BatchBackend::step`] runs a chunk of new tokens for each of
//! several sequences at once: decode rows (one token) and prompt chunks (many) of different
//! sequences, at different positions, share the pass, so each weight is read once for all of
//! them. Each sequence is computed as it would be alone.

use crate::choice::{Choice, SamplingSpec};
use crate::sampling::{argmax, select};
use crate::{Error, Result};

/// A sequence of one batch state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeqId(pub u64);

/// Which logits a chunk wants back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitsWanted {
    /// None (a prompt chunk that is not the prompt's last).
    None,
    /// The last new position's.
    Last,
    /// Every new position's, in order.
    Every,
}

impl LogitsWanted {
    /// Rows of logits this chunk gets for `tokens` new tokens.
    pub fn rows(self, tokens: usize) -> usize {
        match self {
            LogitsWanted::None => 0,
            LogitsWanted::Last => usize::from(tokens > 0),
            LogitsWanted::Every => tokens,
        }
    }
}

/// New tokens of one sequence in one step, appended at the end of its KV cache.
#[derive(Debug, Clone, Copy)]
pub struct Chunk<'a> {
    pub seq: SeqId,
    pub tokens: &'a [i32],
    pub logits: LogitsWanted,
}

/// How a batch state is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Positions of KV cache the state holds over all its sequences (rounded up to whole
    /// blocks).
    pub kv_positions: usize,
    /// Longest sequence the state must accept (prompt and generated); at most the model's
    /// context.
    pub max_sequence: usize,
}

/// The KV cache's occupancy, for schedulers and reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvUsage {
    pub block_size: usize,
    pub total_blocks: usize,
    pub free_blocks: usize,
}

/// Many sequences over one paged KV cache. Thread safety: may move between threads (`Send`),
/// used by one at a time (`&mut self`).
pub trait BatchBackend: Send {
    /// A new, empty sequence (it takes blocks only as it grows).
    fn add_sequence(&mut self) -> SeqId;
    /// A new sequence holding `from`'s first `len` positions (at most its length) in the same
    /// blocks; the first write into a shared block copies it.
    fn fork_sequence(&mut self, from: SeqId, len: usize) -> Result<SeqId>;
    /// Ends a sequence and frees the blocks only it held.
    fn remove_sequence(&mut self, seq: SeqId) -> Result<()>;
    /// Keeps a sequence's first `len` positions.
    fn truncate_sequence(&mut self, seq: SeqId, len: usize) -> Result<()>;
    /// Positions a sequence holds.
    fn sequence_len(&self, seq: SeqId) -> Result<usize>;
    /// The KV cache's blocks.
    fn kv_usage(&self) -> KvUsage;
    /// One forward pass over `chunks` (each sequence at most once, each with at least one
    /// token), extending their caches. Returns the logits the chunks asked for, in chunk order,
    /// row-major `[rows, vocab]`. All or nothing: when the cache cannot hold the new tokens
    /// (`Error::OutOfKvBlocks`) or an input is bad, no sequence changes.
    fn step(&mut self, chunks: &[Chunk<'_>]) -> Result<Vec<f32>>;
    /// [`step`](Self::step), choosing the next token of every chunk with a spec (it must want
    /// the last logits row, and `no_repeat_ngram` must be 0): returns the logits rows of the
    /// chunks without a spec, in chunk order, and a token per chunk with one. Each row has its
    /// own spec. The default runs [`step`](Self::step) and chooses on the host
    /// ([`choose_on_host`]); a device backend chooses where the logits are.
    fn step_choose(
        &mut self,
        chunks: &[Chunk<'_>],
        specs: &[Option<SamplingSpec<'_>>],
    ) -> Result<(Vec<f32>, Vec<i32>)> {
        check_specs(chunks, specs)?;
        let mut logits = self.step(chunks)?;
        let rows: usize = chunks.iter().map(|c| c.logits.rows(c.tokens.len())).sum();
        let vocab = logits.len().checked_div(rows).unwrap_or(0);
        let (mut kept, mut tokens) = (Vec::new(), Vec::new());
        let mut scratch = Vec::new();
        let mut at = 0;
        for (chunk, spec) in chunks.iter().zip(specs) {
            let mine = &mut logits[at..at + chunk.logits.rows(chunk.tokens.len()) * vocab];
            at += mine.len();
            match spec {
                Some(spec) => tokens.push(choose_on_host(mine, spec, &mut scratch)?),
                None => kept.extend_from_slice(mine),
            }
        }
        Ok((kept, tokens))
    }
}

/// One spec slot per chunk; a chunk with a spec wants its last row and no n-gram ban.
fn check_specs(chunks: &[Chunk<'_>], specs: &[Option<SamplingSpec<'_>>]) -> Result<()> {
    if chunks.len() != specs.len() {
        return Err(Error::InvalidState(format!(
            "{} chunks but {} sampling specs",
            chunks.len(),
            specs.len()
        )));
    }
    for (chunk, spec) in chunks.iter().zip(specs) {
        if let Some(spec) = spec {
            if chunk.logits != LogitsWanted::Last {
                return Err(Error::InvalidState(format!(
                    "sequence {}: a token is chosen from the last position's logits only",
                    chunk.seq.0
                )));
            }
            if spec.no_repeat_ngram != 0 {
                return Err(Error::InvalidState(format!(
                    "sequence {}: no_repeat_ngram needs the whole sequence; choose from its \
                     logits instead",
                    chunk.seq.0
                )));
            }
        }
    }
    Ok(())
}

/// The generator's host choice for one row, from a spec: `suppressed` ids to -inf, the
/// repetition penalty on `penalized`, then the argmax or [`select`] with the spec's uniform.
pub fn choose_on_host(
    logits: &mut [f32],
    spec: &SamplingSpec<'_>,
    scratch: &mut Vec<(usize, u64)>,
) -> Result<i32> {
    if spec.no_repeat_ngram != 0 {
        return Err(Error::InvalidState(
            "no_repeat_ngram needs the whole sequence".into(),
        ));
    }
    crate::logits::apply_min_length(logits, 0, 1, spec.suppressed);
    crate::logits::apply_repetition_penalty(logits, spec.penalized, spec.penalty);
    let index = match spec.choice {
        Choice::Greedy => argmax(logits),
        Choice::Sample {
            top_k,
            top_p,
            temperature,
            uniform,
        } => select(logits, top_k, top_p, temperature, uniform, scratch),
    };
    Ok(i32::try_from(index).unwrap_or(i32::MAX))
}

/// The checks every backend makes on a step's chunks before it runs them: at least one token
/// each, no sequence twice, every sequence known (`known`), and token ids in the vocabulary.
pub fn check_chunks(
    chunks: &[Chunk<'_>],
    vocab_size: usize,
    known: impl Fn(SeqId) -> bool,
) -> Result<()> {
    let mut seen = std::collections::HashSet::with_capacity(chunks.len());
    for chunk in chunks {
        if !known(chunk.seq) {
            return Err(Error::InvalidState(format!(
                "sequence {} is not in this batch (removed, or never added)",
                chunk.seq.0
            )));
        }
        if !seen.insert(chunk.seq) {
            return Err(Error::InvalidState(format!(
                "sequence {} appears twice in one step",
                chunk.seq.0
            )));
        }
        if chunk.tokens.is_empty() {
            return Err(Error::InvalidState(format!(
                "sequence {} has no new token in this step",
                chunk.seq.0
            )));
        }
        if let Some((position, &id)) = chunk
            .tokens
            .iter()
            .enumerate()
            .find(|&(_, &id)| usize::try_from(id).map_or(true, |id| id >= vocab_size))
        {
            return Err(Error::TokenOutOfRange {
                id: i64::from(id),
                position,
                vocab_size,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "batch_tests.rs"]
mod tests;
