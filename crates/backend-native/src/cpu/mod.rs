//! The CPU side of the native backend.

mod decoder;
mod forward;
pub mod kernels;
mod model;
mod state;
pub mod threads;
mod weights;

pub use decoder::{CpuDecoder, CpuOptions};
