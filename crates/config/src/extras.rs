//! The validated `speculative` (n-gram / draft speculative decoding) and `engine` (request
//! batching) sections, with the official defaults and range checks.

use crate::Error;
use crate::check::positive;
use crate::de::Int;
use crate::raw::{RawEngine, RawSpeculative};

/// Largest speculative proposal width the official runtime allows.
const MAX_K: i32 = 16;

/// `speculative`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Speculative {
    /// Tokens proposed per round, 1..=16. Default 4.
    pub max_draft_tokens: usize,
    /// N-gram size for prompt-lookup decoding: 0 (off) or 2..=16. Default 0.
    pub ngram_size: usize,
    /// Refill proposals by chained n-gram lookups (needs `ngram_size`). Default false.
    pub ngram_chained_lookup: bool,
    /// Adaptive width floor: 0 (off) or 1..=16. Default 0.
    pub min_adaptive_k: usize,
    /// Skip one round after three zero-accept rounds. Default false.
    pub cooldown: bool,
}

impl Default for Speculative {
    fn default() -> Self {
        Speculative {
            max_draft_tokens: 4,
            ngram_size: 0,
            ngram_chained_lookup: false,
            min_adaptive_k: 0,
            cooldown: false,
        }
    }
}

impl Speculative {
    pub(crate) fn from_raw(raw: &RawSpeculative) -> Result<Self, Error> {
        let range =
            |v: Option<Int>, key: &str, default: usize, ok: &dyn Fn(i32) -> bool, rule: &str| {
                match v {
                    None => Ok(default),
                    Some(Int(v)) if ok(v) => Ok(v as usize),
                    Some(Int(v)) => Err(Error::invalid(
                        format!("speculative.{key}"),
                        format!("must be {rule} (it is {v})"),
                    )),
                }
            };
        let s = Speculative {
            max_draft_tokens: range(
                raw.max_draft_tokens,
                "max_draft_tokens",
                4,
                &|v| (1..=MAX_K).contains(&v),
                "between 1 and 16",
            )?,
            ngram_size: range(
                raw.ngram_size,
                "ngram_size",
                0,
                &|v| v == 0 || (2..=MAX_K).contains(&v),
                "0 or between 2 and 16",
            )?,
            ngram_chained_lookup: raw.ngram_chained_lookup.unwrap_or(false),
            min_adaptive_k: range(
                raw.min_adaptive_k,
                "min_adaptive_k",
                0,
                &|v| (0..=MAX_K).contains(&v),
                "0 or between 1 and 16",
            )?,
            cooldown: raw.cooldown.unwrap_or(false),
        };
        if s.ngram_chained_lookup && s.ngram_size == 0 {
            return Err(Error::invalid(
                "speculative.ngram_chained_lookup",
                "needs speculative.ngram_size (2 to 16) to enable n-gram decoding",
            ));
        }
        Ok(s)
    }
}

/// `engine`: how the serving engine batches requests.
#[derive(Debug, Clone, PartialEq)]
pub enum Engine {
    /// `engine.dynamic_batching`
    Dynamic(DynamicBatching),
    /// `engine.static_batching`
    Static {
        /// Largest batch. Default 4.
        max_batch_size: usize,
    },
    /// `engine: {}`: no batching mode chosen.
    Unset,
}

/// `engine.dynamic_batching` (paged KV cache).
#[derive(Debug, Clone, PartialEq)]
pub struct DynamicBatching {
    /// Slots per KV block. Default 256.
    pub block_size: usize,
    /// Blocks per layer, if fixed.
    pub num_blocks: Option<usize>,
    /// Fraction of free device memory for the KV cache, in (0, 1].
    pub gpu_utilization_factor: Option<f32>,
    /// Largest batch. Default 16.
    pub max_batch_size: usize,
    /// Most tokens in one batched run. Default 2048.
    pub max_scheduled_tokens: usize,
    /// `prefix_caching`, if set.
    pub prefix_caching: Option<bool>,
    /// `dflash2_max_snapshots`, if set.
    pub dflash2_max_snapshots: Option<usize>,
}

impl Engine {
    pub(crate) fn from_raw(raw: &RawEngine) -> Result<Self, Error> {
        let p = |key: &str| format!("engine.dynamic_batching.{key}");
        let opt_positive = |v: Option<Int>, key: &str, what: &str| match v {
            None => Ok(None),
            v => positive(v, &p(key), what).map(Some),
        };
        match (&raw.dynamic_batching, &raw.static_batching) {
            (Some(_), Some(_)) => Err(Error::invalid(
                "engine",
                "give either dynamic_batching or static_batching, not both",
            )),
            (Some(d), None) => {
                let factor = match d.gpu_utilization_factor {
                    None => None,
                    Some(f) if f.is_finite() && f > 0.0 && f <= 1.0 => Some(f as f32),
                    Some(f) => {
                        return Err(Error::invalid(
                            p("gpu_utilization_factor"),
                            format!("{f} must be above 0 and at most 1"),
                        ));
                    }
                };
                Ok(Engine::Dynamic(DynamicBatching {
                    block_size: opt_positive(d.block_size, "block_size", "the KV block size")?
                        .unwrap_or(256),
                    num_blocks: opt_positive(d.num_blocks, "num_blocks", "the block count")?,
                    gpu_utilization_factor: factor,
                    max_batch_size: opt_positive(
                        d.max_batch_size,
                        "max_batch_size",
                        "the batch limit",
                    )?
                    .unwrap_or(16),
                    max_scheduled_tokens: opt_positive(
                        d.max_scheduled_tokens,
                        "max_scheduled_tokens",
                        "the token limit per run",
                    )?
                    .unwrap_or(2048),
                    prefix_caching: d.prefix_caching,
                    dflash2_max_snapshots: opt_positive(
                        d.dflash2_max_snapshots,
                        "dflash2_max_snapshots",
                        "the snapshot limit",
                    )?,
                }))
            }
            (None, Some(s)) => Ok(Engine::Static {
                max_batch_size: match s.max_batch_size {
                    None => 4,
                    v => positive(
                        v,
                        "engine.static_batching.max_batch_size",
                        "the batch limit",
                    )?,
                },
            }),
            (None, None) => Ok(Engine::Unset),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(json: &str) -> Result<Speculative, Error> {
        Speculative::from_raw(&serde_json::from_str(json).unwrap())
    }

    fn engine(json: &str) -> Result<Engine, Error> {
        Engine::from_raw(&serde_json::from_str(json).unwrap())
    }

    #[test]
    fn speculative_defaults_and_ranges() {
        assert_eq!(spec("{}").unwrap(), Speculative::default());
        assert_eq!(
            spec(r#"{"ngram_size": 3, "ngram_chained_lookup": true}"#)
                .unwrap()
                .ngram_size,
            3
        );
        assert_eq!(
            spec(r#"{"max_draft_tokens": 40}"#).unwrap_err().to_string(),
            "speculative.max_draft_tokens: must be between 1 and 16 (it is 40)"
        );
        assert!(spec(r#"{"ngram_size": 1}"#).is_err());
        assert!(
            spec(r#"{"ngram_chained_lookup": true}"#)
                .unwrap_err()
                .to_string()
                .starts_with("speculative.ngram_chained_lookup: needs")
        );
    }

    #[test]
    fn engine_modes() {
        assert_eq!(engine("{}").unwrap(), Engine::Unset);
        assert_eq!(
            engine(r#"{"static_batching": {}}"#).unwrap(),
            Engine::Static { max_batch_size: 4 }
        );
        let Engine::Dynamic(d) = engine(r#"{"dynamic_batching": {"num_blocks": 8}}"#).unwrap()
        else {
            panic!("expected dynamic batching");
        };
        assert_eq!(
            (d.block_size, d.num_blocks, d.max_batch_size),
            (256, Some(8), 16)
        );
        assert_eq!(d.max_scheduled_tokens, 2048);
        assert!(
            engine(r#"{"dynamic_batching": {"gpu_utilization_factor": 1.5}}"#)
                .unwrap_err()
                .to_string()
                .starts_with("engine.dynamic_batching.gpu_utilization_factor: 1.5")
        );
        assert!(engine(r#"{"dynamic_batching": {}, "static_batching": {}}"#).is_err());
    }
}
