//! Running one decode step ahead of the host. After a step whose token was chosen on the device,
//! the next single-token step is enqueued at once on that id, before the host waits for it; the
//! host's turn between two steps (the generator's bookkeeping, the caller's streaming) then
//! overlaps the device's work instead of leaving the device idle. While the choice is the plain
//! greedy one, the step enqueued is a graph that ends with that choice and with the next step's
//! inputs (`argmax_final_next_f32`), so a steady greedy decode is one graph launch a step and
//! nothing else on the stream; otherwise the id is copied on the device into the step's input.
//! The next call takes the step when it asks for exactly it (that token at that position); any
//! other call leaves it unused, which is harmless: it wrote only the KV cache at positions past
//! the cache's length (overwritten by the next steps, as after a rewind), the logits, the
//! step's own inputs and a result slot that no read waits for, and everything after it on the
//! stream runs after it.

use super::CudaState;
use crate::cuda::choose::Chooser;
use crate::cuda::graph::StepGraph;
use crate::cuda::kernels::{Ops, launch_error};
use crate::error::Error;
use cudarc::driver::{CudaEvent, sys};
use std::sync::Arc;

/// Environment variable: `0` turns running ahead off.
pub const RUN_AHEAD_ENV: &str = "GENAI_BRIDGE_RUN_AHEAD";

/// Whether running ahead is on by default (`GENAI_BRIDGE_RUN_AHEAD` is not `0`).
pub(super) fn run_ahead_default() -> bool {
    std::env::var(RUN_AHEAD_ENV).map_or(true, |v| v != "0")
}

/// The single-token step enqueued ahead: it runs at `position` on the id the step before it
/// chose, which the host learns (`token`) once it has read that id; `greedy`: its graph ends
/// with the plain greedy choice.
pub(super) struct Ahead {
    position: usize,
    token: Option<i32>,
    greedy: bool,
}

impl CudaState {
    /// Whether the step enqueued ahead is the one `tokens` asks for at the cache's length (it
    /// then needs no passes), and if so whether its graph also chose greedily. Every call
    /// forgets the step ahead: only the call right after it may take it.
    pub(super) fn take_ahead(&mut self, tokens: &[i32]) -> Option<bool> {
        match self.ahead.take() {
            Some(Ahead {
                position,
                token: Some(token),
                greedy,
            }) if position == self.len && tokens == [token] => Some(greedy),
            _ => None,
        }
    }

    /// Records that the step ahead runs on `token` (the id the host has just read).
    pub(super) fn ahead_runs_on(&mut self, token: i32) {
        if let Some(ahead) = self.ahead.as_mut() {
            ahead.token = Some(token);
        }
    }

    /// Enqueues the single-token step at `position` on the id `chooser` left on the device
    /// when running ahead is on and the step fits; returns the event recorded before it (the
    /// host waits for that one, not for the stream), or None when nothing was enqueued.
    /// `inputs_ready`: the step's inputs are in place already (the graph before ended with the
    /// greedy choice); `greedy`: the step may end with the plain greedy choice.
    pub(super) fn enqueue_ahead(
        &mut self,
        position: usize,
        chooser: &mut Chooser,
        inputs_ready: bool,
        greedy: bool,
    ) -> Result<Option<&CudaEvent>, Error> {
        let s = Arc::clone(&self.shared);
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
        // Captured here when the generation has had no such step yet: capturing records the
        // step without running it or waiting for the stream.
        let greedy = greedy && self.capture_greedy(chooser);
        if !greedy {
            self.capture_step();
        }
        let graph = if greedy {
            self.greedy_graph.as_ref()
        } else {
            self.graph.as_ref()
        };
        let (Some(graph), Some(ready)) = (graph, &self.ready_event) else {
            return Ok(None);
        };
        ready
            .record(&self.stream)
            .map_err(launch_error("choice event"))?;
        if !inputs_ready {
            // SAFETY: the chosen id and the ids buffer are live device allocations of at least
            // 4 bytes; the copy is ordered on this stream after the choice that writes the id
            // and before the graph that reads the ids.
            unsafe {
                sys::cuMemcpyDtoDAsync_v2(
                    self.buffers.ids.ptr,
                    chooser.chosen_ptr(),
                    4,
                    self.stream.cu_stream(),
                )
            }
            .result()
            .map_err(launch_error("token id copy"))?;
            self.buffers
                .step
                .write(&self.stream, &[position as i32, 1, 0, 0])?;
        }
        if greedy {
            chooser.arm(position & 1);
        }
        graph.launch()?;
        s.counters.replayed();
        s.counters.ran_ahead();
        self.ahead = Some(Ahead {
            position,
            token: None,
            greedy,
        });
        Ok(self.ready_event.as_ref())
    }

    /// Whether the generation has the step graph that ends with the greedy choice, capturing
    /// it at the first ask. A capture that fails is counted with its reason; the steps run
    /// ahead then take the plain graph and the choice after it.
    fn capture_greedy(&mut self, chooser: &Chooser) -> bool {
        let s = Arc::clone(&self.shared);
        if self.greedy_graph.is_some() {
            return true;
        }
        if !s.graph || self.greedy_failed {
            return false;
        }
        let captured = chooser.greedy_targets().and_then(|t| {
            StepGraph::capture(&self.stream, || {
                self.pass(1, true)?;
                let ops = Ops {
                    k: &s.kernels,
                    stream: &self.stream,
                    pager: None,
                    pdl: s.kernels.pdl,
                    blas: None,
                };
                let b = &self.buffers;
                let logits = (b.logits.ptr, s.model.vocab);
                ops.argmax_next(logits, t.parts, t.out, (b.ids.ptr, b.step.ptr, t.slots))
            })
        });
        match captured {
            Ok(graph) => {
                s.counters.captured();
                self.greedy_graph = Some(graph);
                s.sample_memory();
                true
            }
            Err(e) => {
                s.counters
                    .fallback(format!("greedy decode-step capture failed: {e}"));
                self.greedy_failed = true;
                false
            }
        }
    }
}

impl Drop for CudaState {
    fn drop(&mut self) {
        // A step run ahead may still run (taken or not): let it finish before the generation's
        // memory is freed (its result slots are page-locked host memory the device writes) and
        // its share of the budget returned. An error here has nowhere to go.
        let _ = self.stream.synchronize();
    }
}
