//! Types generated from the ONNX schema subset in `proto/onnx_subset.proto` (by the build script).

include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
