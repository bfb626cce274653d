//! The validated `search` section (generation settings) with the official defaults, the by-name
//! setters/getters behind `OgaGeneratorParamsSetSearchNumber` and friends, and the checks the
//! official generator makes before it runs.

use crate::check::{finite, non_negative};
use crate::de::Int;
use crate::raw::RawSearch;
use crate::{Error, Model};

/// Generation settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Search {
    /// Sample (top-k / top-p) instead of taking the best logit. Default false.
    pub do_sample: bool,
    /// Minimum TOTAL length (prompt + generated); EOS is suppressed until reached. Default 0.
    pub min_length: usize,
    /// Maximum TOTAL length (prompt + generated). Default `model.context_length`.
    pub max_length: usize,
    /// Number of sequences in a batch. Default 1.
    pub batch_size: usize,
    /// Beam count; 1 means no beam search. Default 1.
    pub num_beams: usize,
    /// Sequences returned per batch entry (at most `num_beams`). Default 1.
    pub num_return_sequences: usize,
    /// Top-k cut. Default 50.
    pub top_k: usize,
    /// Top-p cut, applied when 0 < p < 1. Default 0 (off).
    pub top_p: f32,
    /// Softmax temperature; 0 means greedy. Default 1.
    pub temperature: f32,
    /// Repetition penalty (HF rule); 1 means none. Default 1.
    pub repetition_penalty: f32,
    /// Beam length penalty. Default 1.
    pub length_penalty: f32,
    /// Size of n-grams that may not repeat; 0 disables. Default 0.
    pub no_repeat_ngram_size: usize,
    /// Diversity penalty (unused by the official runtime). Default 0.
    pub diversity_penalty: f32,
    /// Stop beam search once `num_beams` sequences are done. Default true.
    pub early_stopping: bool,
    /// One KV buffer of `max_length` per layer, past aliased to present. Default false.
    pub past_present_share_buffer: bool,
    /// RNG seed; -1 seeds from the system. Default -1.
    pub random_seed: i64,
    /// Prefill chunk size; `None` (the default, or any value <= 0) disables chunking.
    pub chunk_size: Option<usize>,
    /// CTC/RNNT blank penalty (speech models). Default 0.
    pub blank_penalty: f32,
}

impl Default for Search {
    /// The official defaults, with `max_length` 0 until a model fills it in.
    fn default() -> Self {
        Search {
            do_sample: false,
            min_length: 0,
            max_length: 0,
            batch_size: 1,
            num_beams: 1,
            num_return_sequences: 1,
            top_k: 50,
            top_p: 0.0,
            temperature: 1.0,
            repetition_penalty: 1.0,
            length_penalty: 1.0,
            no_repeat_ngram_size: 0,
            diversity_penalty: 0.0,
            early_stopping: true,
            past_present_share_buffer: false,
            random_seed: -1,
            chunk_size: None,
            blank_penalty: 0.0,
        }
    }
}

/// Names accepted by [`Search::set_number`].
pub const NUMBER_NAMES: &[&str] = &[
    "min_length",
    "max_length",
    "batch_size",
    "num_beams",
    "num_return_sequences",
    "top_k",
    "top_p",
    "temperature",
    "repetition_penalty",
    "length_penalty",
    "no_repeat_ngram_size",
    "diversity_penalty",
    "random_seed",
    "chunk_size",
    "blank_penalty",
];

/// Names accepted by [`Search::set_bool`] and [`Search::get_bool`].
pub const BOOL_NAMES: &[&str] = &["do_sample", "early_stopping", "past_present_share_buffer"];

impl Search {
    /// Builds the section from the file; an absent or 0 `max_length` becomes `context_length`.
    pub(crate) fn from_raw(raw: &RawSearch, context_length: usize) -> Result<Search, Error> {
        let d = Search::default();
        let count = |v: Option<Int>, key: &str, default: usize| {
            non_negative(v, &format!("search.{key}"), default)
        };
        let real = |v: Option<f64>, key: &str, default: f32| match v {
            Some(v) => finite(v, &format!("search.{key}")),
            None => Ok(default),
        };
        let max_length = match count(raw.max_length, "max_length", 0)? {
            0 => context_length,
            n => n,
        };
        Ok(Search {
            do_sample: raw.do_sample.unwrap_or(d.do_sample),
            min_length: count(raw.min_length, "min_length", d.min_length)?,
            max_length,
            batch_size: count(raw.batch_size, "batch_size", d.batch_size)?,
            num_beams: count(raw.num_beams, "num_beams", d.num_beams)?,
            num_return_sequences: count(
                raw.num_return_sequences,
                "num_return_sequences",
                d.num_return_sequences,
            )?,
            top_k: count(raw.top_k, "top_k", d.top_k)?,
            top_p: real(raw.top_p, "top_p", d.top_p)?,
            temperature: real(raw.temperature, "temperature", d.temperature)?,
            repetition_penalty: real(raw.repetition_penalty, "repetition_penalty", 1.0)?,
            length_penalty: real(raw.length_penalty, "length_penalty", 1.0)?,
            no_repeat_ngram_size: count(raw.no_repeat_ngram_size, "no_repeat_ngram_size", 0)?,
            diversity_penalty: real(raw.diversity_penalty, "diversity_penalty", 0.0)?,
            early_stopping: raw.early_stopping.unwrap_or(d.early_stopping),
            past_present_share_buffer: raw
                .past_present_share_buffer
                .unwrap_or(d.past_present_share_buffer),
            random_seed: raw.random_seed.map_or(d.random_seed, |v| i64::from(v.0)),
            chunk_size: raw.chunk_size.and_then(chunk),
            blank_penalty: real(raw.blank_penalty, "blank_penalty", 0.0)?,
        })
    }

    /// True when generation picks the best logit: `!do_sample || top_k == 1 || temperature == 0`.
    pub fn is_greedy(&self) -> bool {
        !self.do_sample || self.top_k == 1 || self.temperature == 0.0
    }

    /// Checks the settings against the model, like the official generator does before running
    /// (plus range checks on `top_p`, `temperature` and `repetition_penalty`).
    pub fn validate(&self, model: &Model) -> Result<(), Error> {
        let bad = |key: &str, msg: String| Err(Error::invalid(format!("search.{key}"), msg));
        if self.max_length == 0 {
            return bad("max_length", "must be greater than 0".into());
        }
        if self.max_length > model.context_length {
            return bad(
                "max_length",
                format!(
                    "{} is above model.context_length ({}); lower search.max_length (it counts \
                     prompt and generated tokens together)",
                    self.max_length, model.context_length
                ),
            );
        }
        if self.batch_size == 0 {
            return bad("batch_size", "must be at least 1".into());
        }
        if self.num_beams == 0 {
            return bad(
                "num_beams",
                "must be at least 1 (1 means no beam search)".into(),
            );
        }
        if self.num_return_sequences == 0 || self.num_return_sequences > self.num_beams {
            return bad(
                "num_return_sequences",
                format!(
                    "{} must be between 1 and search.num_beams ({})",
                    self.num_return_sequences, self.num_beams
                ),
            );
        }
        if !(0.0..=1.0).contains(&self.top_p) {
            return bad("top_p", format!("{} must be between 0 and 1", self.top_p));
        }
        if self.temperature.is_nan() || self.temperature < 0.0 {
            return bad(
                "temperature",
                format!("{} must not be negative", self.temperature),
            );
        }
        if self.repetition_penalty.is_nan() || self.repetition_penalty <= 0.0 {
            return bad(
                "repetition_penalty",
                format!(
                    "{} must be greater than 0 (1 means no penalty)",
                    self.repetition_penalty
                ),
            );
        }
        if !self.is_greedy() {
            if self.num_beams > 1 {
                return bad(
                    "do_sample",
                    "sampling cannot be combined with beam search; set num_beams to 1 or \
                     do_sample to false"
                        .into(),
                );
            }
            if self.top_k > model.vocab_size {
                return bad(
                    "top_k",
                    format!(
                        "{} is above model.vocab_size ({}) while sampling",
                        self.top_k, model.vocab_size
                    ),
                );
            }
        }
        Ok(())
    }

    /// Sets a number by its official name (`OgaGeneratorParamsSetSearchNumber`). Integer options
    /// take whole values only; cross-field limits are checked by [`Search::validate`].
    pub fn set_number(&mut self, name: &str, value: f64) -> Result<(), Error> {
        let err = |message: String| Error::SearchOption {
            name: name.to_string(),
            message,
        };
        let int = |v: f64| -> Result<i32, Error> {
            if !v.is_finite() || v.trunc() != v {
                return Err(err(format!("{v} is not a whole number")));
            }
            if v < f64::from(i32::MIN) || v > f64::from(i32::MAX) {
                return Err(err(format!("{v} is out of int32 range")));
            }
            Ok(v as i32)
        };
        let count = |v: f64| -> Result<usize, Error> {
            let i = int(v)?;
            usize::try_from(i).map_err(|_| err(format!("{v} must not be negative")))
        };
        let real = |v: f64| -> Result<f32, Error> {
            if v.is_finite() {
                Ok(v as f32)
            } else {
                Err(err(format!("{v} is not finite")))
            }
        };
        match name {
            "min_length" => self.min_length = count(value)?,
            "max_length" => self.max_length = count(value)?,
            "batch_size" => self.batch_size = count(value)?,
            "num_beams" => self.num_beams = count(value)?,
            "num_return_sequences" => self.num_return_sequences = count(value)?,
            "top_k" => self.top_k = count(value)?,
            "no_repeat_ngram_size" => self.no_repeat_ngram_size = count(value)?,
            "random_seed" => self.random_seed = i64::from(int(value)?),
            "top_p" => self.top_p = real(value)?,
            "temperature" => self.temperature = real(value)?,
            "repetition_penalty" => self.repetition_penalty = real(value)?,
            "length_penalty" => self.length_penalty = real(value)?,
            "diversity_penalty" => self.diversity_penalty = real(value)?,
            "blank_penalty" => self.blank_penalty = real(value)?,
            "chunk_size" => self.chunk_size = chunk(value),
            _ if BOOL_NAMES.contains(&name) => {
                return Err(err("is a boolean option; set it with set_bool".into()));
            }
            _ => {
                return Err(err(format!(
                    "unknown; known names: {}",
                    NUMBER_NAMES.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// Sets a boolean by its official name (`OgaGeneratorParamsSetSearchBool`).
    pub fn set_bool(&mut self, name: &str, value: bool) -> Result<(), Error> {
        match name {
            "do_sample" => self.do_sample = value,
            "early_stopping" => self.early_stopping = value,
            "past_present_share_buffer" => self.past_present_share_buffer = value,
            _ => return Err(self.bool_name_error(name)),
        }
        Ok(())
    }

    /// Reads a number by its official name (`OgaGeneratorParamsGetSearchNumber`); `chunk_size`
    /// reads 0 when chunking is off.
    pub fn get_number(&self, name: &str) -> Result<f64, Error> {
        Ok(match name {
            "min_length" => self.min_length as f64,
            "max_length" => self.max_length as f64,
            "batch_size" => self.batch_size as f64,
            "num_beams" => self.num_beams as f64,
            "num_return_sequences" => self.num_return_sequences as f64,
            "top_k" => self.top_k as f64,
            "no_repeat_ngram_size" => self.no_repeat_ngram_size as f64,
            "random_seed" => self.random_seed as f64,
            "top_p" => f64::from(self.top_p),
            "temperature" => f64::from(self.temperature),
            "repetition_penalty" => f64::from(self.repetition_penalty),
            "length_penalty" => f64::from(self.length_penalty),
            "diversity_penalty" => f64::from(self.diversity_penalty),
            "blank_penalty" => f64::from(self.blank_penalty),
            "chunk_size" => self.chunk_size.unwrap_or(0) as f64,
            _ => {
                return Err(Error::SearchOption {
                    name: name.to_string(),
                    message: format!("unknown; known names: {}", NUMBER_NAMES.join(", ")),
                });
            }
        })
    }

    /// Reads a boolean by its official name (`OgaGeneratorParamsGetSearchBool`).
    pub fn get_bool(&self, name: &str) -> Result<bool, Error> {
        match name {
            "do_sample" => Ok(self.do_sample),
            "early_stopping" => Ok(self.early_stopping),
            "past_present_share_buffer" => Ok(self.past_present_share_buffer),
            _ => Err(self.bool_name_error(name)),
        }
    }

    fn bool_name_error(&self, name: &str) -> Error {
        let message = if NUMBER_NAMES.contains(&name) {
            "is a number option; use set_number/get_number".to_string()
        } else {
            format!("unknown; known names: {}", BOOL_NAMES.join(", "))
        };
        Error::SearchOption {
            name: name.to_string(),
            message,
        }
    }
}

/// `chunk_size`: a value of 1 or more enables chunking (fractions truncated); anything else,
/// including the official "disabled" values 0 and below, turns it off.
fn chunk(value: f64) -> Option<usize> {
    (value >= 1.0 && value.is_finite()).then_some(value as usize)
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
