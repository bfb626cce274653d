//! The CPU side of the native backend.

mod batch;
mod decoder;
mod forward;
pub mod kernels;
mod kv;
mod model;
pub mod threads;
mod weights;

pub use decoder::{CpuDecoder, CpuOptions};
