//! genai-onnx: loads ONNX model files as written by the ONNX Runtime GenAI
//! model builder — decodes the ModelProto, memory-maps external weight
//! files, validates every initializer, and summarizes the model.
//!
//! ```no_run
//! # fn main() -> Result<(), genai_onnx::Error> {
//! let model = genai_onnx::OnnxModel::load(std::path::Path::new("model.onnx"))?;
//! if let Some(w) = model.initializer("lm_head.MatMul.weight") {
//!     let bytes = w.bytes()?;
//!     println!("{} {} {:?}: {} bytes", w.name, w.dtype, w.dims, bytes.len());
//! }
//! println!("{}", model.report());
//! # Ok(())
//! # }
//! ```

mod dtype;
mod error;
mod external;
mod model;
#[allow(clippy::all, missing_docs)]
pub mod proto;
mod report;
mod tensor;
mod validate;

pub use dtype::DataType;
pub use error::Error;
pub use external::ExternalFile;
pub use model::OnnxModel;
pub use report::{ModelReport, OpCount, ValueReport, WeightBytes};
pub use tensor::{ExternalRef, Tensor};
