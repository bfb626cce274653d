//! The kernels: the registry (every family of `kernels/` loaded as a module for the device,
//! `kernels/registry.rs`) and one typed launch wrapper per kernel, each a method of [`Ops`]
//! (the kernels bound to a stream). This file only declares the layer's files and re-exports
//! what the layers above use. Within the layer, from the bottom: the shapes and limits
//! (`shape`, `chunk`, `halves`, `kv`), what the device offers (`decode_device`,
//! `prompt_device`, `int4_mma`, `one_row`, `shared`, `waves`), the registry and its plans
//! (`registry`, `plans`), then `ops` and the launches (`decode`, `prompt`, `gemv_one_row`,
//! `int4`, `rows`).

mod chunk;
mod decode;
mod decode_device;
mod gemv_one_row;
mod halves;
mod int4;
mod int4_mma;
mod kv;
mod one_row;
mod ops;
mod plans;
mod prompt;
mod prompt_device;
mod registry;
mod rows;
mod shape;
mod shared;
mod waves;

pub(crate) use chunk::{ATTN_CHUNK, CHUNK};
pub(crate) use decode::DecodeCall;
pub(crate) use decode_device::DecodeHeads;
#[cfg(feature = "lab")]
pub(crate) use decode_device::{DecodeMode, Trigger, decode_splits};
pub(crate) use halves::{GemmType, HalfCopy, Halves, common_half};
pub(crate) use int4::{Int4Fp32, Int4Linear};
pub(crate) use int4_mma::int4_mma_form;
pub(crate) use kv::{KvCache, KvKind};
#[cfg(feature = "lab")]
pub(crate) use one_row::{OneRow, RowKernel};
pub(crate) use ops::{DenseLinear, Ops};
pub(crate) use prompt::PromptAttention;
#[cfg(feature = "lab")]
pub(crate) use prompt_device::{PromptKernel, mma_spans};
pub(crate) use registry::Kernels;
pub(crate) use rows::{ARGMAX_PARTS, Embedding, NormRows, RotaryAppend, SkipNorm};
pub(crate) use shape::LinearShape;
