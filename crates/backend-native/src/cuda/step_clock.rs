//! Where a single-token step's time goes between the host and the device, from timing events
//! at four points of the step in stream order (`CudaTuning::step_events`,
//! `GENAI_BRIDGE_STEP_EVENTS=1`; reported as
//! [`StepClock`] in the decoder's counters and `bench --json`'s `step_*_us` fields).
//!
//! `start` is recorded before the step's input copies, `launch` before its graph (or first
//! kernel), `kernels_end` after its last kernel and `end` after the chosen token's copy. The
//! host records `start` only after it has synchronized on the previous step, so the interval
//! from the previous step's `end` to this `start` is time the device had nothing queued: the
//! host's turn between two steps. Recording costs a few microseconds of host time a step, so
//! the switch is off by default.

use crate::cuda::launch::launch_error as cuda;
use crate::error::Error;
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, sys};
use genai_engine::StepClock;
use std::sync::{Arc, Mutex};

/// The points of a step, in stream order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Point {
    Start,
    Launch,
    KernelsEnd,
    End,
}

/// One generation's events: this step's four, and the previous step's end.
pub(crate) struct StepEvents {
    start: CudaEvent,
    launch: CudaEvent,
    kernels_end: CudaEvent,
    end: CudaEvent,
    previous_end: CudaEvent,
    /// `previous_end` holds a recorded step's end.
    has_previous: bool,
    /// A mark of this step failed: its figures are not taken.
    failed: bool,
}

/// One step's intervals, in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct StepSplit {
    pub host_gap: Option<f32>,
    pub inputs: f32,
    pub kernels: f32,
    pub choice: f32,
}

impl StepEvents {
    pub fn new(ctx: &Arc<CudaContext>) -> Result<StepEvents, Error> {
        let timed = || {
            ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
                .map_err(cuda("timing event"))
        };
        Ok(StepEvents {
            start: timed()?,
            launch: timed()?,
            kernels_end: timed()?,
            end: timed()?,
            previous_end: timed()?,
            has_previous: false,
            failed: false,
        })
    }

    /// Records `point` on `stream`. A failure only drops this step's figures: timing never
    /// fails a step.
    pub fn mark(&mut self, point: Point, stream: &CudaStream) {
        if point == Point::Start {
            self.failed = false;
        }
        let event = match point {
            Point::Start => &self.start,
            Point::Launch => &self.launch,
            Point::KernelsEnd => &self.kernels_end,
            Point::End => &self.end,
        };
        self.failed |= event.record(stream).is_err();
    }

    /// The step's intervals once the stream has been synchronized after its `End` (None when
    /// a mark or a reading failed; the next step then has no gap); its end then becomes the
    /// previous one.
    pub fn take(&mut self) -> Option<StepSplit> {
        let split = if self.failed { Err(()) } else { self.read() };
        match split {
            Ok(split) => {
                std::mem::swap(&mut self.end, &mut self.previous_end);
                self.has_previous = true;
                Some(split)
            }
            Err(()) => {
                self.break_chain();
                None
            }
        }
    }

    fn read(&self) -> Result<StepSplit, ()> {
        let ms = |a: &CudaEvent, b: &CudaEvent| a.elapsed_ms(b).map_err(|_| ());
        Ok(StepSplit {
            host_gap: if self.has_previous {
                Some(ms(&self.previous_end, &self.start)?)
            } else {
                None
            },
            inputs: ms(&self.start, &self.launch)?,
            kernels: ms(&self.launch, &self.kernels_end)?,
            choice: ms(&self.kernels_end, &self.end)?,
        })
    }

    /// Forgets the previous step (a prompt or an untimed step ran since).
    pub fn break_chain(&mut self) {
        self.has_previous = false;
    }
}

/// Timed steps kept for the medians at most (16 bytes each): a long-running process under the
/// diagnostic switch keeps its first steps' figures, and counts the rest.
const MAX_SAMPLES: usize = 1 << 16;

/// The timed steps of a decoder's generations (the first [`MAX_SAMPLES`]) and how many there
/// were.
#[derive(Default)]
pub(crate) struct StepSamples(Mutex<(Vec<StepSplit>, u64)>);

impl StepSamples {
    pub fn push(&self, split: StepSplit) {
        if let Ok(mut guard) = self.0.lock() {
            let (kept, steps) = &mut *guard;
            *steps += 1;
            if kept.len() < MAX_SAMPLES {
                kept.push(split);
            }
        }
    }

    /// The medians (over the kept steps) and the count of every timed step, or None when no
    /// step was timed.
    pub fn summary(&self) -> Option<StepClock> {
        let guard = self.0.lock().ok()?;
        let (kept, steps) = &*guard;
        summarize(kept).map(|clock| StepClock {
            steps: *steps,
            ..clock
        })
    }
}

/// Medians of the samples, in microseconds.
fn summarize(all: &[StepSplit]) -> Option<StepClock> {
    if all.is_empty() {
        return None;
    }
    let median_us = |values: Vec<f32>| -> Option<f64> {
        let mut v = values;
        if v.is_empty() {
            return None;
        }
        v.sort_by(f32::total_cmp);
        Some(f64::from(v[(v.len() - 1) / 2]) * 1e3)
    };
    let field = |f: fn(&StepSplit) -> f32| median_us(all.iter().map(f).collect()).unwrap_or(0.0);
    Some(StepClock {
        steps: all.len() as u64,
        host_gap_us: median_us(all.iter().filter_map(|s| s.host_gap).collect()),
        inputs_us: field(|s| s.inputs),
        kernels_us: field(|s| s.kernels),
        choice_us: field(|s| s.choice),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(gap: Option<f32>, inputs: f32, kernels: f32, choice: f32) -> StepSplit {
        StepSplit {
            host_gap: gap,
            inputs,
            kernels,
            choice,
        }
    }

    #[test]
    fn medians_in_microseconds_with_the_first_step_gapless() {
        assert_eq!(summarize(&[]), None);
        let clock = summarize(&[
            split(None, 0.004, 0.700, 0.010),
            split(Some(0.020), 0.003, 0.750, 0.012),
            split(Some(0.010), 0.005, 0.720, 0.011),
        ])
        .expect("three steps");
        assert_eq!(clock.steps, 3);
        // Two gaps: the lower median of 10 and 20 us.
        let close = |a: f64, b: f64| (a - b).abs() < 1e-3;
        assert!(close(clock.host_gap_us.expect("gap"), 10.0), "{clock:?}");
        assert!(close(clock.inputs_us, 4.0), "{clock:?}");
        assert!(close(clock.kernels_us, 720.0), "{clock:?}");
        assert!(close(clock.choice_us, 11.0), "{clock:?}");
        let first_only = summarize(&[split(None, 0.001, 0.5, 0.002)]).expect("one step");
        assert_eq!(first_only.host_gap_us, None);
    }

    #[test]
    fn samples_past_the_cap_are_counted_not_kept() {
        let samples = StepSamples::default();
        assert_eq!(samples.summary(), None);
        for i in 0..MAX_SAMPLES + 10 {
            // The kept steps take 1 µs of kernels; the ones past the cap would move the median.
            let kernels = if i < MAX_SAMPLES { 0.001 } else { 1.0 };
            samples.push(split(Some(0.01), 0.002, kernels, 0.003));
        }
        let clock = samples.summary().expect("timed");
        assert_eq!(clock.steps, (MAX_SAMPLES + 10) as u64);
        assert!((clock.kernels_us - 1.0).abs() < 1e-3, "{clock:?}");
        assert_eq!(samples.0.lock().expect("lock").0.len(), MAX_SAMPLES);
    }
}
