//! The engine: the backend trait every decoder implements, the generator with ONNX Runtime GenAI's
//! semantics, and the logits processing (penalties, greedy and sampled token choice).

mod backend;
pub mod batch;
mod choice;
mod error;
mod generator;
pub mod kv_blocks;
mod logits;
pub mod memory;
mod padded;
pub mod router;
mod sampling;

pub use backend::{
    BackendCounters, BackendInfo, DecodeBackend, Decoder, PagingCounters, StartOptions, StepClock,
    StepInput,
};
pub use choice::{Choice, SamplingSpec};
pub use error::Error;
pub use generator::{Generator, GeneratorTimings};
pub use logits::{apply_min_length, apply_no_repeat_ngram, apply_repetition_penalty};
pub use padded::PaddedBatch;
pub use router::{BackendKind, BackendRequest, DeviceKind, NoRoute, Route, RouteFacts, route};
pub use sampling::{Sampler, argmax, exp_weight, order_key, select, weight};

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
