//! One generation on a CUDA decoder ([`CudaState`], the engine's [`DecodeBackend`]): its
//! buffers, KV cache, graph and position; its passes, eager or replayed from the captured step,
//! the device choice, and the step enqueued ahead of the host (`ahead.rs`).

use super::ahead::Ahead;
use super::shared::{Shared, engine_error};
use crate::cuda::choose::{Chooser, process_ids};
use crate::cuda::forward::enqueue;
use crate::cuda::graph::StepGraph;
use crate::cuda::kernels::{CHUNK, Ops};
use crate::cuda::launch::launch_error;
use crate::cuda::memory::DevPtr;
use crate::cuda::pager::PagerPass;
use crate::cuda::pass::Pass;
use crate::cuda::state::Buffers;
use crate::cuda::step_clock::{Point, StepEvents};
use crate::error::Error;
use crate::paging::Reservation;
use cudarc::driver::{CudaEvent, CudaStream, sys};
use genai_engine::{DecodeBackend, SamplingSpec, StartOptions, StepInput};
use std::sync::Arc;

/// One generation: its device buffers, KV cache, graph and position.
pub(super) struct CudaState {
    shared: Arc<Shared>,
    stream: Arc<CudaStream>,
    buffers: Buffers,
    /// Its share of the VRAM budget, returned when the generation ends.
    _reservation: Option<Reservation>,
    graph: Option<StepGraph>,
    graph_failed: bool,
    len: usize,
    /// The device choice's buffers, made at its first use.
    chooser: Option<Chooser>,
    /// Timing events of single-token steps, when asked for (`step_clock.rs`).
    clock: Option<StepEvents>,
    /// The step enqueued ahead of the host, if any (`decoder/ahead.rs`).
    ahead: Option<Ahead>,
    /// Recorded after a choice's copy when a step is enqueued behind it: what the host waits
    /// for then.
    ready_event: Option<CudaEvent>,
}

impl CudaState {
    /// A generation on the decoder that `shared` describes, with room for `options.max_length`
    /// positions.
    pub(super) fn start(shared: &Arc<Shared>, options: &StartOptions) -> Result<CudaState, Error> {
        if options.batch != 1 {
            return Err(Error::Invalid {
                what: "batch",
                why: format!(
                    "batch size {} is not supported yet: the native CUDA decoder runs one sequence",
                    options.batch
                ),
            });
        }
        let stream = shared.device.ctx.new_stream().map_err(|e| Error::Cuda {
            what: "stream",
            message: format!("{e:?}"),
        })?;
        let model = &shared.model;
        let reservation = match &shared.residency.budget {
            Some(budget) => {
                let gemm = shared.prefill_gemm;
                let tuning = &shared.kernels.tuning;
                let bytes = Buffers::bytes(model, options.max_length, gemm, tuning) as u64;
                Some(budget.reserve(bytes).map_err(|_| Error::Invalid {
                    what: "VRAM budget",
                    why: format!(
                        "this generation's KV cache and workspace ({:.2} GB for max_length {}) do \
                         not fit in what is left of the VRAM budget ({:.2} GB); lower max_length \
                         or raise the budget",
                        bytes as f64 / 1e9,
                        options.max_length,
                        budget.available() as f64 / 1e9
                    ),
                })?)
            }
            None => None,
        };
        let (gemm, tuning) = (shared.prefill_gemm, &shared.kernels.tuning);
        let buffers = Buffers::new(&stream, model, options.max_length, gemm, tuning)?;
        shared.sample_memory();
        let clock = if shared.time_steps {
            Some(StepEvents::new(&shared.device.ctx)?)
        } else {
            None
        };
        Ok(CudaState {
            shared: Arc::clone(shared),
            stream,
            buffers,
            _reservation: reservation,
            graph: None,
            graph_failed: false,
            len: 0,
            chooser: None,
            clock,
            ahead: None,
            ready_event: None,
        })
    }

    /// Enqueues one forward pass over `m` tokens, with the pager's copies when weights stream.
    fn pass(&self, m: usize, capturing: bool) -> Result<(), Error> {
        let s = &self.shared;
        let pass = s
            .residency
            .pager
            .as_ref()
            .map(|pager| PagerPass::begin(pager, &self.stream, capturing))
            .transpose()?;
        let ops = Pass {
            ops: Ops {
                k: &s.kernels,
                stream: &self.stream,
                // The pager's copies and event waits sit between kernels: plain launches then.
                pdl: s.kernels.pdl && pass.is_none(),
            },
            pager: pass.as_ref(),
            blas: self.buffers.blas.as_ref(),
        };
        enqueue(&ops, &s.model, &self.buffers, m)?;
        pass.map_or(Ok(()), PagerPass::end)
    }

    fn run(&mut self, tokens: &[i32]) -> Result<Vec<f32>, Error> {
        let shared = Arc::clone(&self.shared);
        let s = &shared;
        // Generations on this decoder share the streaming slots: one pass sequence at a time.
        let _slots = s.residency.pager.as_ref().map(|p| p.lock());
        self.mark(tokens.len(), Point::Start);
        self.passes(tokens)?;
        self.mark(tokens.len(), Point::KernelsEnd);
        // The logits' copy waits for the host, so the choice (on the host) falls in the gap.
        self.mark(tokens.len(), Point::End);
        let mut logits = vec![0.0f32; s.model.vocab];
        self.buffers.logits.read(&self.stream, &mut logits)?;
        self.finish(tokens.len())?;
        Ok(logits)
    }

    /// Runs the passes, then chooses on the device with the processing ids `ids` (from
    /// `process_ids`): only the id comes back.
    fn run_choose(
        &mut self,
        tokens: &[i32],
        spec: &SamplingSpec<'_>,
        ids: (&[i32], usize),
    ) -> Result<i32, Error> {
        let shared = Arc::clone(&self.shared);
        let s = &shared;
        let _slots = s.residency.pager.as_ref().map(|p| p.lock());
        self.mark(tokens.len(), Point::Start);
        self.passes(tokens)?;
        self.mark(tokens.len(), Point::KernelsEnd);
        // After the step (a graph launch or eager kernels): plain launches.
        let ops = Ops {
            k: &s.kernels,
            stream: &self.stream,
            pdl: false,
        };
        let logits = (self.buffers.logits.span(), s.model.vocab);
        let mut chooser = self.chooser.take().ok_or(Error::Invalid {
            what: "device choice",
            why: "no buffers".into(),
        })?;
        let chosen = chooser
            .enqueue(&self.stream, &ops, logits, spec, ids)
            .and_then(|()| {
                self.mark(tokens.len(), Point::End);
                self.wait_for_choice(tokens.len(), chooser.chosen_ptr())
            })
            .and_then(|()| chooser.read());
        self.chooser = Some(chooser);
        let token = chosen?;
        Ahead::runs_on(&mut self.ahead, token);
        Ok(token)
    }

    /// Waits until the chosen id has been copied to the host: after enqueueing the next step
    /// on it when that step may run ahead (then for the event before that step), else for the
    /// whole stream.
    fn wait_for_choice(&mut self, tokens: usize, chosen: DevPtr) -> Result<(), Error> {
        match self.enqueue_ahead(self.len + tokens, chosen)? {
            Some(ready) => ready.synchronize().map_err(launch_error("token choice")),
            None => self.finish(tokens),
        }
    }

    /// Waits for the step (an explicit synchronize: what the host reads next was copied on
    /// this stream) and does its accounting.
    fn finish(&mut self, tokens: usize) -> Result<(), Error> {
        let s = &self.shared;
        self.stream
            .synchronize()
            .map_err(launch_error("forward pass"))?;
        if let Some(clock) = &mut self.clock {
            if tokens != 1 {
                clock.break_chain();
            } else if let Some(split) = clock.take() {
                s.step_samples.push(split);
            }
        }
        if tokens == 1
            && let Some(pager) = &s.residency.pager
        {
            pager.account_pass();
        }
        Ok(())
    }

    /// Records `point` of a single-token step when steps are timed.
    fn mark(&mut self, tokens: usize, point: Point) {
        if let Some(clock) = self.clock.as_mut().filter(|_| tokens == 1) {
            clock.mark(point, &self.stream);
        }
    }

    /// Captures the single-token step's graph if the generation has none yet (and may have
    /// one). A capture that fails is counted with its reason and leaves the generation eager.
    fn capture_step(&mut self) {
        let s = Arc::clone(&self.shared);
        if s.graph && !self.graph_failed && self.graph.is_none() {
            match StepGraph::capture(&self.stream, || self.pass(1, true)) {
                Ok(graph) => {
                    s.counters.captured();
                    self.graph = Some(graph);
                    // Instantiating the graph takes device memory; steps take none.
                    s.sample_memory();
                }
                Err(e) => {
                    s.counters
                        .fallback(format!("decode-step capture failed: {e}"));
                    self.graph_failed = true;
                }
            }
        }
    }

    /// Enqueues the forward passes over `tokens` (the graph for a single token), unless the
    /// step ahead is that step.
    fn passes(&mut self, tokens: &[i32]) -> Result<(), Error> {
        if Ahead::take(&mut self.ahead, self.len, tokens) {
            self.shared.counters.took_ahead();
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        let s = &shared;
        let mut past = self.len;
        for chunk in tokens.chunks(CHUNK) {
            let m = chunk.len();
            self.buffers.ids.write(&self.stream, chunk)?;
            self.buffers.write_step(&self.stream, past, m)?;
            if m == 1 {
                self.capture_step();
            }
            self.mark(tokens.len(), Point::Launch);
            match (&self.graph, m) {
                (Some(graph), 1) => {
                    graph.launch()?;
                    s.counters.replayed();
                }
                _ => {
                    self.pass(m, false)?;
                    if m == 1 {
                        s.counters.eager_step();
                    }
                }
            }
            past += m;
        }
        Ok(())
    }

    /// The checks of a step's input against the cache.
    fn check_input(&self, input: &StepInput<'_>) -> genai_engine::Result<()> {
        let past = input.total_len.checked_sub(input.new_len);
        if past != Some(self.len) {
            return Err(genai_engine::Error::InvalidState(format!(
                "step starts at position {} but the KV cache holds {}",
                input.total_len.saturating_sub(input.new_len),
                self.len
            )));
        }
        if input.tokens.len() != input.new_len || input.new_len == 0 {
            return Err(genai_engine::Error::backend(
                "native",
                "batch size 1 with at least one new token expected",
            ));
        }
        let vocab = self.shared.model.vocab;
        if let Some((i, &id)) = input
            .tokens
            .iter()
            .enumerate()
            .find(|&(_, &id)| id < 0 || id as usize >= vocab)
        {
            return Err(genai_engine::Error::TokenOutOfRange {
                id: i64::from(id),
                position: self.len + i,
                vocab_size: vocab,
            });
        }
        let limit = self.buffers.capacity.min(self.shared.model.max_positions);
        if input.total_len > limit {
            return Err(engine_error(Error::Invalid {
                what: "sequence",
                why: format!(
                    "{} positions exceed the KV cache's {} (or the model's {} positions)",
                    input.total_len, self.buffers.capacity, self.shared.model.max_positions
                ),
            }));
        }
        Ok(())
    }
}

impl CudaState {
    /// Enqueues the single-token step at `position` on the id at `chosen` (4 bytes on the
    /// device, written by the choice before it on the stream) when running ahead is on and the
    /// step fits; returns the event recorded before it (the host waits for that one, not for the
    /// stream), or None when nothing was enqueued.
    fn enqueue_ahead(
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
        self.ahead = Some(Ahead::at(position));
        Ok(self.ready_event.as_ref())
    }
}

impl DecodeBackend for CudaState {
    fn forward(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
        self.check_input(input)?;
        let logits = self.run(input.tokens).map_err(engine_error)?;
        self.len = input.total_len;
        Ok(logits)
    }

    fn forward_choose(
        &mut self,
        input: &StepInput<'_>,
        spec: &SamplingSpec<'_>,
    ) -> genai_engine::Result<Option<i32>> {
        if !self.shared.device_choice || spec.no_repeat_ngram != 0 {
            return Ok(None);
        }
        self.check_input(input)?;
        if self.chooser.is_none() {
            let chooser = Chooser::new(&self.stream, self.buffers.capacity);
            self.chooser = Some(chooser.map_err(engine_error)?);
        }
        // The distinct penalised ids, computed once per step (the whole sequence's).
        let (ids, penalized) = process_ids(spec);
        if !self.chooser.as_ref().is_some_and(|c| c.fits(ids.len())) {
            return Ok(None);
        }
        let token = self
            .run_choose(input.tokens, spec, (&ids, penalized))
            .map_err(engine_error)?;
        self.len = input.total_len;
        Ok(Some(token))
    }

    fn rewind_to(&mut self, len: usize) -> genai_engine::Result<()> {
        // Positions past `len` are overwritten by the next steps; the graph reads the position
        // from device memory, so it stays valid. A step ahead is not taken after a rewind.
        self.ahead = None;
        self.len = len.min(self.len);
        Ok(())
    }

    fn cached_len(&self) -> usize {
        self.len
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
