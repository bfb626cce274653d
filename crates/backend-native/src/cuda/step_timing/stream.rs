//! The streamed persistent step of the timing prototype (`benches/step_stream.cu`): its launch,
//! and the shared-memory ring it is launched with.

use super::{Proto, Step, cooperative, zero_words};
use crate::cuda::kernels::param;
use crate::error::Error;
use cudarc::driver::{CudaStream, LaunchConfig};
use std::sync::Arc;

/// Bytes of one `step_stream` ring slot (`SS_SLOT_HALVES` halves), and of its two mbarriers
/// and its count of uses consumed.
pub(super) const SLOT_BYTES: usize = 8 * 1024;
const SLOT_BARRIERS: usize = 20;
/// `step_stream`'s consumer warps (`SS_CONSUMERS`); its block adds the producer warp.
pub(super) const CONSUMERS: usize = 16;

/// `step_stream`'s dynamic shared memory: the slots, x as halves (rounded up to 4, so the
/// barriers after it are 8-byte aligned), the barriers.
fn ring_bytes(slots: usize, xmax: usize) -> usize {
    slots * (SLOT_BYTES + SLOT_BARRIERS) + xmax.next_multiple_of(4) * 2
}

/// The most ring slots (at most 64) that fit `dynamic` bytes beside x of `xmax` halves, or None
/// below two.
fn ring_slots(dynamic: usize, xmax: usize) -> Option<usize> {
    let left = dynamic.checked_sub(ring_bytes(0, xmax))?;
    Some((left / (SLOT_BYTES + SLOT_BARRIERS)).min(64)).filter(|&s| s >= 2)
}

impl Step {
    /// Every phase in one cooperative launch of `step_stream`, one block an SM, its weights
    /// streamed into a ring of shared-memory slots ahead of the chain (`fold`: every block
    /// computes the norms itself; `evict`: the weight copies are L2 evict-first).
    pub(super) fn streamed(
        &self,
        stream: &Arc<CudaStream>,
        proto: &Proto,
        fold: bool,
        evict: bool,
        diag: i32,
    ) -> Result<(), Error> {
        let (hidden, _, mlp, _) = self.shape;
        let xmax = mlp.max(hidden);
        let dynamic = proto.stream_dynamic.unwrap_or(0);
        let slots = ring_slots(dynamic, xmax)
            .filter(|_| proto.bulk_copies)
            .ok_or_else(|| {
                crate::error::invalid(
                    "step_stream",
                    format!("needs sm_90 and two 8 KiB slots beside x of {xmax} halves"),
                )
            })?;
        zero_words(stream, self.counters.ptr, self.phases.len())?;
        let count = self.phases.len() as i32;
        let (slots_i, xmax_i) = (slots as i32, xmax as i32);
        let (fold, evict) = (i32::from(fold), i32::from(evict));
        let mut params = [
            param(&self.table.ptr),
            param(&count),
            param(&self.counters.ptr),
            param(&slots_i),
            param(&xmax_i),
            param(&fold),
            param(&evict),
            param(&diag),
        ];
        let cfg = LaunchConfig {
            grid_dim: (proto.sms as u32, 1, 1),
            block_dim: ((CONSUMERS as u32 + 1) * 32, 1, 1),
            shared_mem_bytes: ring_bytes(slots, xmax) as u32,
        };
        // SAFETY: the parameters match `step_stream`; one block an SM, all resident at once (a
        // cooperative launch, refused otherwise), so no counter waits for a block that never
        // starts; the dynamic shared memory is the layout the kernel computes from (slots,
        // xmax) and within the opt-in; the counters buffer has a word per phase, zeroed above.
        unsafe { cooperative(stream, &proto.stream, cfg, &mut params) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_slots_fit_beside_x() {
        // The H200's 227 KiB opt-in less 256 bytes: 1.5B's x (8,960 halves) leaves 26 slots of
        // 8 KiB, 8B's (14,336) 24, 0.5B's (4,864) 27.
        let dynamic = 227 * 1024 - 256;
        assert_eq!(ring_slots(dynamic, 8960), Some(26));
        assert_eq!(ring_slots(dynamic, 14_336), Some(24));
        assert_eq!(ring_slots(dynamic, 4864), Some(27));
        for x in [8960, 14_336, 4864, 63] {
            let s = ring_slots(dynamic, x).expect("slots");
            assert!(ring_bytes(s, x) <= dynamic && ring_bytes(s + 1, x) > dynamic);
        }
        // At most 64; none below two; none when x alone does not fit.
        assert_eq!(ring_slots(1 << 30, 64), Some(64));
        assert_eq!(ring_slots(20 * 1024, 8960), None);
        assert_eq!(ring_slots(1000, 8960), None);
    }
}
