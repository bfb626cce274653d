//! The graph front end: recognises a transformer decoder in an ONNX graph by structure and
//! dataflow (never by node names), checks every assumption, and lifts it into a typed
//! [`DecoderPlan`] — or says exactly which node it could not lift and why.

pub mod plan;

pub use plan::*;
