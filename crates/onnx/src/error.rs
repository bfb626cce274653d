//! The one error type of this crate, with the file, tensor and byte range
//! involved carried as fields.

use std::path::PathBuf;

use crate::DataType;

/// Everything that can go wrong loading an ONNX model or reading a tensor.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model file could not be read.
    #[error("cannot read ONNX model {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The model file is not a valid (or is a truncated) ModelProto.
    #[error("cannot decode ONNX model {} (truncated or not an ONNX file?): {source}", path.display())]
    Decode {
        path: PathBuf,
        #[source]
        source: prost::DecodeError,
    },

    /// The ModelProto has no graph.
    #[error("ONNX model {} has no graph", path.display())]
    MissingGraph { path: PathBuf },

    /// Two initializers share a name.
    #[error("ONNX model {} has more than one initializer named '{name}'", path.display())]
    DuplicateInitializer { path: PathBuf, name: String },

    /// A tensor's `data_type` is UNDEFINED or not a known code.
    #[error("tensor '{tensor}': unknown or undefined data type code {code}")]
    UnknownDataType { tensor: String, code: i32 },

    /// A tensor's dims are negative or their product overflows.
    #[error("tensor '{tensor}': invalid dims {dims:?}: {reason}")]
    InvalidDims {
        tensor: String,
        dims: Vec<i64>,
        reason: &'static str,
    },

    /// A feature of the format this crate does not handle for this tensor.
    #[error("tensor '{tensor}': unsupported: {what}")]
    Unsupported { tensor: String, what: String },

    /// An `external_data` entry is missing, duplicated or malformed.
    #[error("tensor '{tensor}': invalid external_data key '{key}' = '{value}': {reason}")]
    ExternalDataInvalid {
        tensor: String,
        key: String,
        value: String,
        reason: &'static str,
    },

    /// An external-data `location` is absolute or escapes the model directory.
    #[error("tensor '{tensor}': external data location '{location}' rejected: {reason}")]
    ExternalLocation {
        tensor: String,
        location: String,
        reason: &'static str,
    },

    /// An external-data file is missing or cannot be opened or mapped.
    #[error("tensor '{tensor}': cannot open external data file {} (location '{location}'): {source}", path.display())]
    ExternalFile {
        tensor: String,
        location: String,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// `offset + length` does not fit in 64 bits.
    #[error("tensor '{tensor}': external data offset {offset} + length {length} overflows")]
    ExternalRangeOverflow {
        tensor: String,
        offset: u64,
        length: u64,
    },

    /// The byte range `[offset, offset + length)` lies past the end of its file.
    #[error(
        "tensor '{tensor}': external data range offset {offset} length {length} lies past the end of {} ({file_size} bytes)",
        path.display()
    )]
    ExternalOutOfBounds {
        tensor: String,
        path: PathBuf,
        offset: u64,
        length: u64,
        file_size: u64,
    },

    /// The stored bytes do not match dims × element size.
    #[error(
        "tensor '{tensor}': {storage} holds {actual} bytes but {dtype} dims {dims:?} need {expected}"
    )]
    ByteLengthMismatch {
        tensor: String,
        storage: &'static str,
        dtype: DataType,
        dims: Vec<i64>,
        expected: u64,
        actual: u64,
    },

    /// A typed `*_data` field holds the wrong number of entries for dims.
    #[error("tensor '{tensor}': {field} holds {actual} entries but dims {dims:?} need {expected}")]
    ElementCountMismatch {
        tensor: String,
        field: &'static str,
        dims: Vec<i64>,
        expected: u64,
        actual: u64,
    },

    /// A conversion (`to_f32_vec`, `to_i64_vec`, `bytes` ...) that this
    /// element type does not support.
    #[error("tensor '{tensor}': cannot convert {dtype} to {target}")]
    Conversion {
        tensor: String,
        dtype: DataType,
        target: &'static str,
    },

    /// A value does not fit the requested target type.
    #[error("tensor '{tensor}': value {value} out of range for {target}")]
    OutOfRange {
        tensor: String,
        value: u64,
        target: &'static str,
    },
}
