//! Running one decode step ahead of the host. After a step whose token was chosen on the device,
//! the next single-token step is enqueued at once, its token id copied on the device from the
//! choice, before the host waits for that id; the host's turn between two steps (the generator's
//! bookkeeping, the caller's streaming) then overlaps the device's work instead of leaving the
//! device idle. The next call takes the step when it asks for exactly it (that token at that
//! position); any other call leaves it unused, which is harmless: it wrote only the KV cache at
//! positions past the cache's length (overwritten by the next steps, as after a rewind), the
//! logits and the step's own inputs, and everything after it on the stream runs after it.

use super::CudaState;
use crate::cuda::launch::launch_error;
use crate::cuda::memory::DevPtr;
use crate::error::Error;
use cudarc::driver::{CudaEvent, sys};

/// The single-token step enqueued ahead: it runs at `position` on the id the step before it
/// chose, which the host learns (`token`) once it has read that id.
pub(super) struct Ahead {
    position: usize,
    token: Option<i32>,
}

impl CudaState {
    /// Whether the step enqueued ahead is the one `tokens` asks for at the cache's length (it
    /// then needs no passes). Every call forgets the step ahead: only the call right after it
    /// may take it.
    pub(super) fn take_ahead(&mut self, tokens: &[i32]) -> bool {
        match self.ahead.take() {
            Some(Ahead {
                position,
                token: Some(token),
            }) => position == self.len && tokens == [token],
            _ => false,
        }
    }

    /// Records that the step ahead runs on `token` (the id the host has just read).
    pub(super) fn ahead_runs_on(&mut self, token: i32) {
        if let Some(ahead) = self.ahead.as_mut() {
            ahead.token = Some(token);
        }
    }

    /// Enqueues the single-token step at `position` on the id at `chosen` (4 bytes on the
    /// device, written by the choice before it on the stream) when running ahead is on and the
    /// step fits; returns the event recorded before it (the host waits for that one, not for the
    /// stream), or None when nothing was enqueued.
    pub(super) fn enqueue_ahead(
        &mut self,
        position: usize,
        chosen: DevPtr,
    ) -> Result<Option<&CudaEvent>, Error> {
        let s = std::sync::Arc::clone(&self.shared);
        // Timed steps are taken one after another (their events are per step), and the pager's
        // accounting is per synchronized pass.
        let limit = self.buffers.capacity.min(s.model.max_positions);
        if !s.run_ahead || s.residency.pager.is_some() || self.clock.is_some() || position >= limit
        {
            return Ok(None);
        }
        if self.ready_event.is_none() {
            let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
            let event = s.device.ctx.new_event(Some(flags));
            self.ready_event = Some(event.map_err(launch_error("choice event"))?);
        }
        // Captured here when the generation has had no single-token step yet (after a prompt):
        // capturing records the step without running it or waiting for the stream.
        self.capture_step();
        let (Some(graph), Some(ready)) = (&self.graph, &self.ready_event) else {
            return Ok(None);
        };
        ready
            .record(&self.stream)
            .map_err(launch_error("choice event"))?;
        // SAFETY: `chosen` and the ids buffer are live device allocations of at least 4 bytes
        // (the ids buffer holds a chunk of ids); the copy is ordered on this stream after the
        // choice that writes `chosen` and before the graph that reads the ids.
        unsafe {
            sys::cuMemcpyDtoDAsync_v2(self.buffers.ids.ptr, chosen, 4, self.stream.cu_stream())
        }
        .result()
        .map_err(launch_error("token id copy"))?;
        self.buffers.write_step(&self.stream, position, 1)?;
        graph.launch()?;
        s.counters.replayed();
        s.counters.ran_ahead();
        self.ahead = Some(Ahead {
            position,
            token: None,
        });
        Ok(self.ready_event.as_ref())
    }
}

impl Drop for CudaState {
    fn drop(&mut self) {
        // A step run ahead may still run, taken or not (a rewind forgets it without waiting):
        // let it finish before the budget's share is returned and the generation's memory is
        // given back (the frees are stream-ordered, but the budget's accounting is not). An idle
        // stream returns at once; an error here has nowhere to go: the generation is over.
        let _ = self.stream.synchronize();
    }
}
