//! genai-bridge's native decoder backend: CPU compute kernels (SIMD, threaded) for the plan executor,
//! and with the `cuda` feature the native CUDA decoder.

mod error;
mod estimate;

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
pub mod paging;
pub mod settings;

pub use cpu::{CpuDecoder, CpuOptions};
#[cfg(feature = "cuda")]
pub use cuda::{CudaDecoder, CudaOptions};
pub use error::Error;
pub use settings::{CpuTuning, CudaTuning, NativeTuning};

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
