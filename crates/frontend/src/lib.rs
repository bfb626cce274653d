//! The graph front end: recognises a transformer decoder in an ONNX graph by structure and
//! dataflow (never by node names), checks every assumption, and lifts it into a typed
//! [`DecoderPlan`] — or says exactly which node it could not lift and why.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let config = genai_config::Config::load(std::path::Path::new("models/qwen2.5-0.5b-int4"))?;
//! let model = genai_onnx::OnnxModel::load(&config.decoder_path())?;
//! match genai_frontend::lift(&model, &config) {
//!     Ok(plan) => println!("{}", plan.summary()),
//!     Err(why) => println!("not liftable: {why}"),
//! }
//! # Ok(()) }
//! ```

mod attention;
mod attrs;
mod context;
mod decoder;
mod embedding;
mod error;
mod gpt2;
mod gqa;
mod graph;
mod mask;
mod mlp;
mod norms;
pub mod plan;
mod rotary;
mod summary;
mod weights;

pub use decoder::lift;
pub use error::Unsupported;
pub use plan::*;
