//! CPU compute kernels of the native decoder: f32 activations, checked slice arguments.
//!
//! One file per kernel family. Every public kernel validates its lengths and returns
//! [`crate::Error`] on a mismatch instead of panicking, runs on [`Isa::best`], and gives results
//! that are bitwise independent of the instruction set and of the thread count.

mod aligned;
mod isa;
mod math;
#[cfg(test)]
mod testutil;
#[cfg(target_arch = "x86_64")]
mod x86;

pub mod activation;
pub mod attention;
pub mod embedding;
pub mod linear;
pub mod norm;
pub mod rotary;

pub use activation::{add_in_place, argmax, gelu, gelu_tanh, silu, silu_mul, softcap};
pub use attention::{
    AttentionHeads, AttentionParams, KvBlocks, SeqSpan, attention, attention_blocks,
};
pub use embedding::{Table, gather_rows};
pub use isa::Isa;
pub use linear::{DenseWeight, Int4Compute, Int4Weight, Scales, Weight, ZeroPoints, linear};
pub use norm::{layer_norm, rms_norm, skip_layer_norm, skip_rms_norm};
pub use rotary::rotary;
