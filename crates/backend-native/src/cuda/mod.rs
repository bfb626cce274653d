//! The native CUDA decoder (feature `cuda`): kernels from `kernels/*.cu` compiled at run time
//! with NVRTC and cached on disk, weights and KV cache in device memory, and the decode step
//! captured as one CUDA graph. cudarc loads the driver and NVRTC at run time, so this builds
//! on machines with no CUDA; a missing driver or GPU is an error, never a panic.

mod blas;
mod choose;
pub mod compile;
mod decoder;
mod device;
mod forward;
#[cfg(feature = "lab")]
pub mod gemv_timing;
mod graph;
mod host;
mod kernels;
mod launch;
mod memory;
mod model;
mod pager;
mod pass;
mod pinned;
mod residency;
#[cfg(feature = "lab")]
pub mod selftest;
mod span;
mod state;
mod step_clock;
#[cfg(feature = "lab")]
pub mod step_timing;
mod support;
mod weights;

pub use blas::cublas_available;
pub use decoder::{CudaDecoder, CudaOptions};
pub use device::probe;
pub use graph::GraphCounters;
pub use support::check_plan;
