//! Capture of the decode step as one CUDA graph, and the counters that say how often it was
//! captured, replayed, or fell back to eager launches (with the reasons).

use crate::error::Error;
use cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{CudaGraph, CudaStream};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// A captured decode step.
pub(crate) struct StepGraph(CudaGraph);

// SAFETY: a CUDA graph exec may be used from any thread as long as calls on it are serialised;
// a `StepGraph` is owned by one generation state and only touched through `&mut` access to it
// (or `&` while that state is borrowed by its single user), so no two threads use it at once.
unsafe impl Send for StepGraph {}

fn cuda(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Cuda {
        what,
        message: format!("{e:?}"),
    }
}

impl StepGraph {
    /// Records what `enqueue` launches on `stream` (without running it) and instantiates it.
    pub fn capture(
        stream: &Arc<CudaStream>,
        enqueue: impl FnOnce() -> Result<(), Error>,
    ) -> Result<StepGraph, Error> {
        stream
            .begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
            .map_err(cuda("begin capture"))?;
        let recorded = enqueue();
        // Always end the capture, so the stream leaves capture mode even when a launch failed.
        let ended = stream.end_capture(CUgraphInstantiate_flags(0));
        recorded?;
        let graph = ended.map_err(cuda("end capture"))?.ok_or(Error::Cuda {
            what: "end capture",
            message: "the captured graph is empty".into(),
        })?;
        graph.upload().map_err(cuda("graph upload"))?;
        Ok(StepGraph(graph))
    }

    /// Replays the step on the stream it was captured on.
    pub fn launch(&self) -> Result<(), Error> {
        self.0.launch().map_err(cuda("graph launch"))
    }
}

/// Graph counters, summed over a decoder's generations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GraphCounters {
    /// Decode-step graphs captured.
    pub captures: u64,
    /// Decode steps run by replaying a graph.
    pub replays: u64,
    /// Decode steps run eagerly (graph off, or after a fallback).
    pub eager_steps: u64,
    /// Captures that failed and left a generation eager.
    pub fallbacks: u64,
    /// Why each fallback happened (the first few).
    pub fallback_reasons: Vec<String>,
    /// Steps enqueued ahead of the host (`decoder/ahead.rs`; counted in `replays` too).
    pub ahead_steps: u64,
    /// Of those, the ones the next call did not take (it asked for something else, or none
    /// came: the generation ended).
    pub ahead_unused: u64,
}

/// Live counters.
#[derive(Default)]
pub(crate) struct Counters {
    captures: AtomicU64,
    replays: AtomicU64,
    eager_steps: AtomicU64,
    fallbacks: AtomicU64,
    reasons: Mutex<Vec<String>>,
    ahead_steps: AtomicU64,
    ahead_taken: AtomicU64,
}

/// Reasons kept per decoder.
const MAX_REASONS: usize = 8;

impl Counters {
    pub fn captured(&self) {
        self.captures.fetch_add(1, Ordering::Relaxed);
    }

    pub fn replayed(&self) {
        self.replays.fetch_add(1, Ordering::Relaxed);
    }

    pub fn ran_ahead(&self) {
        self.ahead_steps.fetch_add(1, Ordering::Relaxed);
    }

    pub fn took_ahead(&self) {
        self.ahead_taken.fetch_add(1, Ordering::Relaxed);
    }

    pub fn eager_step(&self) {
        self.eager_steps.fetch_add(1, Ordering::Relaxed);
    }

    pub fn fallback(&self, reason: String) {
        self.fallbacks.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut r) = self.reasons.lock()
            && r.len() < MAX_REASONS
        {
            r.push(reason);
        }
    }

    pub fn snapshot(&self) -> GraphCounters {
        let ahead_steps = self.ahead_steps.load(Ordering::Relaxed);
        GraphCounters {
            captures: self.captures.load(Ordering::Relaxed),
            replays: self.replays.load(Ordering::Relaxed),
            eager_steps: self.eager_steps.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
            fallback_reasons: self.reasons.lock().map(|r| r.clone()).unwrap_or_default(),
            ahead_steps,
            ahead_unused: ahead_steps.saturating_sub(self.ahead_taken.load(Ordering::Relaxed)),
        }
    }
}
