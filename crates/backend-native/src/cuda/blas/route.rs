//! Whether a generation's prompts run their linear layers as cuBLAS GEMMs, and the route's
//! reason saying so.

use super::handle::Handle;
use super::int4::route_note;
use crate::settings::CudaTuning;
use cudarc::driver::CudaStream;

/// Whether prompts use the GEMMs (`tuning.prefill_gemm`, and cuBLAS works: a handle is made
/// and dropped on `stream`), and the route reason saying so.
pub(crate) fn choose(tuning: &CudaTuning, stream: &CudaStream) -> (bool, String) {
    if !tuning.prefill_gemm {
        return (
            false,
            format!(
                "prompt linear layers: GEMV kernels, cuBLAS GEMMs turned off ({}=0)",
                crate::settings::PREFILL_GEMM
            ),
        );
    }
    match Handle::new(stream) {
        Ok(_) => (
            true,
            format!(
                "prompt linear layers: cuBLAS GEMMs for dense weights; {}",
                route_note(tuning.int4_skinny_rows)
            ),
        ),
        Err(why) => (
            false,
            format!("prompt linear layers: GEMV kernels, cuBLAS unavailable: {why}"),
        ),
    }
}
