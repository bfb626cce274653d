//! genai-bridge's native decoder backend: CPU compute kernels (SIMD, threaded) for the plan executor.

mod error;

pub mod cpu;

pub use cpu::{CpuDecoder, CpuOptions};
pub use error::Error;

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
