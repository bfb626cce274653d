//! The streamed persistent step of the timing prototype (`benches/step_stream.cu`): its launch,
//! and the shared-memory ring it is launched with.

use super::proto::{CONSUMERS, Proto, SUMS_MAX, Step, cooperative, zero_words};
use crate::cuda::launch::param;
use crate::error::Error;
use cudarc::driver::{CudaStream, LaunchConfig};
use std::sync::Arc;

/// Bytes of a `step_stream` ring slot's two mbarriers and its count of uses consumed.
const SLOT_BARRIERS: usize = 20;

/// How `step_stream` runs: the norms computed by every block (`fold`), L2 evict-first weight
/// copies (`evict`), `diag` bits (`SS_NO_*`: a part left out, to time the others), slots of
/// `slot_kib` KiB, `planes` producer lanes (at most 32 and the ring's slots), and whether it
/// writes its trace (`trace.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StreamOpts {
    pub fold: bool,
    pub evict: bool,
    pub diag: i32,
    pub slot_kib: usize,
    pub planes: usize,
    /// Each consumer warp publishes its own writes (not one release a block).
    pub per_warp: bool,
    pub trace: bool,
}

impl StreamOpts {
    /// The prototype's best form so far (round 26): fold and evict, 8 KiB slots, four producer
    /// lanes, one release a block, no trace.
    pub(super) const BEST: StreamOpts = StreamOpts {
        fold: true,
        evict: true,
        diag: 0,
        slot_kib: 8,
        planes: 4,
        per_warp: false,
        trace: false,
    };
}

/// `step_stream`'s dynamic shared memory: `slots` slots of `slot_bytes`, x as halves (rounded
/// up to 4, so the barriers after it are 8-byte aligned), the barriers.
fn ring_bytes(slots: usize, slot_bytes: usize, xmax: usize) -> usize {
    slots * (slot_bytes + SLOT_BARRIERS) + xmax.next_multiple_of(4) * 2
}

/// The most ring slots of `slot_bytes` (at most 64) that fit `dynamic` bytes beside x of `xmax`
/// halves, or None below two.
fn ring_slots(dynamic: usize, slot_bytes: usize, xmax: usize) -> Option<usize> {
    let left = dynamic.checked_sub(ring_bytes(0, slot_bytes, xmax))?;
    Some((left / (slot_bytes + SLOT_BARRIERS)).min(64)).filter(|&s| s >= 2)
}

impl Step {
    /// Every phase in one cooperative launch of `step_stream`, one block an SM, its weights
    /// streamed into a ring of shared-memory slots ahead of the chain.
    pub(super) fn streamed(
        &self,
        stream: &Arc<CudaStream>,
        proto: &Proto,
        opts: StreamOpts,
    ) -> Result<(), Error> {
        let (hidden, _, mlp, _) = self.shape;
        let xmax = mlp.max(hidden);
        let dynamic = proto.stream_dynamic.unwrap_or(0);
        let slot_bytes = opts.slot_kib * 1024;
        let slots = ring_slots(dynamic, slot_bytes, xmax)
            .filter(|_| proto.bulk_copies && opts.slot_kib > 0)
            .ok_or_else(|| {
                crate::error::invalid(
                    "step_stream",
                    format!(
                        "needs sm_90 and two {} KiB slots beside x of {xmax} halves",
                        opts.slot_kib
                    ),
                )
            })?;
        // A block's share of a GLU phase: pairs split evenly over the blocks.
        let sums = self.phases.iter().filter(|p| p.glu);
        if let Some(n) = sums
            .map(|p| (p.n / 2).div_ceil(proto.sms) * 2)
            .find(|&r| r > SUMS_MAX)
        {
            return Err(crate::error::invalid(
                "step_stream",
                format!("{n} GLU rows a block exceed {SUMS_MAX}"),
            ));
        }
        zero_words(stream, self.counters.ptr, self.phases.len())?;
        let trace = if opts.trace {
            zero_words(stream, self.trace.ptr, self.trace.len * 2)?;
            self.trace.ptr
        } else {
            0u64
        };
        let count = self.phases.len() as i32;
        let (slots_i, halves, xmax_i) = (slots as i32, (slot_bytes / 2) as i32, xmax as i32);
        let (fold, evict) = (i32::from(opts.fold), i32::from(opts.evict));
        // Each producer lane fills its own slot of a batch: no more lanes than slots.
        let planes = opts.planes.clamp(1, 32).min(slots) as i32;
        let per_warp = i32::from(opts.per_warp);
        let mut params = [
            param(&self.table.ptr),
            param(&count),
            param(&self.counters.ptr),
            param(&slots_i),
            param(&halves),
            param(&xmax_i),
            param(&fold),
            param(&evict),
            param(&opts.diag),
            param(&planes),
            param(&per_warp),
            param(&trace),
        ];
        let cfg = LaunchConfig {
            grid_dim: (proto.sms as u32, 1, 1),
            block_dim: ((CONSUMERS as u32 + 1) * 32, 1, 1),
            shared_mem_bytes: ring_bytes(slots, slot_bytes, xmax) as u32,
        };
        // SAFETY: the parameters match `step_stream`; one block an SM, all resident at once (a
        // cooperative launch, refused otherwise), so no counter waits for a block that never
        // starts; the dynamic shared memory is the layout the kernel computes from (slots,
        // slot_halves, xmax: a slot is a multiple of 1 KiB, so of 256 halves) and within the
        // opt-in; the counters buffer has a word per phase, zeroed above; the trace is null or
        // phases * sms * SS_EVENTS words (`Step::trace`).
        unsafe { cooperative(stream, &proto.stream, cfg, &mut params) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_slots_fit_beside_x() {
        // The H200's 227 KiB opt-in less 256 bytes: 1.5B's x (8,960 halves) leaves 26 slots of
        // 8 KiB, 8B's (14,336) 24, 0.5B's (4,864) 27; 13 of 16 KiB and 6 of 32 KiB beside 1.5B's.
        let dynamic = 227 * 1024 - 256;
        let kib8 = 8 * 1024;
        assert_eq!(ring_slots(dynamic, kib8, 8960), Some(26));
        assert_eq!(ring_slots(dynamic, kib8, 14_336), Some(24));
        assert_eq!(ring_slots(dynamic, kib8, 4864), Some(27));
        assert_eq!(ring_slots(dynamic, 2 * kib8, 8960), Some(13));
        assert_eq!(ring_slots(dynamic, 4 * kib8, 8960), Some(6));
        for slot in [kib8, 2 * kib8, 4 * kib8] {
            for x in [8960, 14_336, 4864, 63] {
                let s = ring_slots(dynamic, slot, x).expect("slots");
                assert!(ring_bytes(s, slot, x) <= dynamic && ring_bytes(s + 1, slot, x) > dynamic);
            }
        }
        // At most 64; none below two; none when x alone does not fit.
        assert_eq!(ring_slots(1 << 30, kib8, 64), Some(64));
        assert_eq!(ring_slots(20 * 1024, kib8, 8960), None);
        assert_eq!(ring_slots(1000, kib8, 8960), None);
    }
}
