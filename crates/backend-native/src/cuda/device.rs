//! Finding a CUDA device: the driver library, a device, its architecture and NVRTC, each
//! missing piece reported as a reason (cudarc panics when it loads an absent library, so every
//! first call is guarded).

use crate::cuda::compile::nvrtc_available;
use crate::error::Error;
use cudarc::driver::{CudaContext, sys};
use std::sync::Arc;

/// An opened device.
pub(crate) struct Device {
    pub ctx: Arc<CudaContext>,
    /// NVRTC target, e.g. `sm_90`.
    pub arch: String,
    /// Compute capability major version (9 for Hopper).
    pub major: i32,
    pub name: String,
    pub total_mem: usize,
}

fn cuda_error(what: &'static str, message: impl std::fmt::Display) -> Error {
    Error::Cuda {
        what,
        message: message.to_string(),
    }
}

impl Device {
    /// Opens device `ordinal`, or says why it cannot.
    pub fn open(ordinal: usize) -> Result<Device, Error> {
        // SAFETY: only tries to dlopen the driver library names cudarc would use.
        if !unsafe { sys::is_culib_present() } {
            return Err(cuda_error(
                "driver",
                "no CUDA driver library (libcuda.so.1) was found: no NVIDIA driver on this machine",
            ));
        }
        let ctx = std::panic::catch_unwind(|| CudaContext::new(ordinal))
            .map_err(|_| cuda_error("driver", "the driver library failed to load"))?
            .map_err(|e| cuda_error("device", format!("device {ordinal}: {e:?}")))?;
        // One stream per generation orders all work; cudarc's cross-stream event tracking
        // would only add event records to every launch (and to captured graphs).
        // SAFETY: called before any allocation or launch on this context.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx
            .compute_capability()
            .map_err(|e| cuda_error("device attributes", format!("{e:?}")))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown device".into());
        let total_mem = ctx.total_mem().unwrap_or(0);
        nvrtc_available().map_err(|m| cuda_error("NVRTC", m))?;
        Ok(Device {
            ctx,
            arch: format!("sm_{major}{minor}"),
            major,
            name,
            total_mem,
        })
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}, {:.0} GiB)",
            self.name,
            self.arch,
            self.total_mem as f64 / (1u64 << 30) as f64
        )
    }
}

/// Whether the native CUDA decoder can run here: `Ok(description)` or the reason it cannot.
/// Never panics, also with no driver or no GPU.
pub fn probe() -> Result<String, String> {
    match Device::open(0) {
        Ok(device) => Ok(format!("native CUDA backend on {}", device.describe())),
        Err(e) => Err(e.to_string()),
    }
}
