//! How a row's next token is chosen by a backend that chooses it where the logits are: the
//! [`Choice`] and the logits processing around it ([`SamplingSpec`]).

/// How a row's next token is chosen from its logits (see `sampling.rs` for the exact
/// definition both the host and a device follow).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Choice {
    /// The argmax: lowest index on ties, NaN never wins, 0 when no logit is above -inf.
    Greedy,
    /// `select(logits, top_k, top_p, temperature, uniform)`.
    Sample {
        top_k: usize,
        top_p: f32,
        temperature: f32,
        /// This step's number in `[0, 1)` from the generator's seeded stream.
        uniform: f32,
    },
}

/// Everything the generator's choice of one row needs, for a backend that chooses on
/// the device ([`DecodeBackend::forward_choose`]). Logits are processed in the host's order:
/// `suppressed` ids set to -inf (min_length), then the repetition penalty on `penalized`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplingSpec<'a> {
    pub choice: Choice,
    /// Divides positive and multiplies negative logits of `penalized`; 1 (or not positive):
    /// none.
    pub penalty: f32,
    /// Distinct token ids to penalise (the sequence's tokens, each once).
    pub penalized: &'a [i32],
    /// Ids whose logits become -inf (the EOS ids while the sequence is below min_length).
    pub suppressed: &'a [i32],
    /// no_repeat_ngram_size; a backend must decline (`Ok(None)`) when it is not 0.
    pub no_repeat_ngram: usize,
}
