//! Times a prototype of a whole decode step's layers as one persistent launch against one
//! launch per phase (`benches/step_proto.cu`, `benches/cuda_step.rs`): what the launch
//! boundaries of a step cost against grid-wide barriers, and what a persistent step whose
//! weight stream runs ahead of the chain gains (`stream`, `benches/step_stream.cu`), with the
//! same phase bodies on every side, before any decoder plumbing is written for it.

mod proto;
mod stream;
mod trace;
mod ways;

pub use proto::{
    Phase, PhaseKind, Rows, STEP_PROTO, StepTiming, layer_phases, phase_blocks, step_shape,
};
pub use trace::{TraceRow, TraceSummary};
pub use ways::time_steps;
