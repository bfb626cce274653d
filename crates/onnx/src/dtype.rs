//! ONNX tensor element types: the `TensorProto.DataType` codes, their names
//! and their storage widths.

use std::fmt;

/// An ONNX tensor element type. Discriminants are the ONNX data type codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum DataType {
    Float = 1,
    Uint8 = 2,
    Int8 = 3,
    Uint16 = 4,
    Int16 = 5,
    Int32 = 6,
    Int64 = 7,
    String = 8,
    Bool = 9,
    Float16 = 10,
    Double = 11,
    Uint32 = 12,
    Uint64 = 13,
    Complex64 = 14,
    Complex128 = 15,
    BFloat16 = 16,
    Float8E4M3FN = 17,
    Float8E4M3FNUZ = 18,
    Float8E5M2 = 19,
    Float8E5M2FNUZ = 20,
    Uint4 = 21,
    Int4 = 22,
    Float4E2M1 = 23,
    Float8E8M0 = 24,
    Uint2 = 25,
    Int2 = 26,
}

impl DataType {
    /// Every known type, in code order.
    pub const ALL: [DataType; 26] = [
        Self::Float,
        Self::Uint8,
        Self::Int8,
        Self::Uint16,
        Self::Int16,
        Self::Int32,
        Self::Int64,
        Self::String,
        Self::Bool,
        Self::Float16,
        Self::Double,
        Self::Uint32,
        Self::Uint64,
        Self::Complex64,
        Self::Complex128,
        Self::BFloat16,
        Self::Float8E4M3FN,
        Self::Float8E4M3FNUZ,
        Self::Float8E5M2,
        Self::Float8E5M2FNUZ,
        Self::Uint4,
        Self::Int4,
        Self::Float4E2M1,
        Self::Float8E8M0,
        Self::Uint2,
        Self::Int2,
    ];

    /// The type for an ONNX data type code; `None` for UNDEFINED (0) and
    /// codes this crate does not know.
    pub fn from_onnx(code: i32) -> Option<Self> {
        Self::ALL.iter().copied().find(|t| t.to_onnx() == code)
    }

    /// The ONNX data type code.
    pub fn to_onnx(self) -> i32 {
        self as i32
    }

    /// The lower-case ONNX name, as in `tensor(float16)`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Float => "float",
            Self::Uint8 => "uint8",
            Self::Int8 => "int8",
            Self::Uint16 => "uint16",
            Self::Int16 => "int16",
            Self::Int32 => "int32",
            Self::Int64 => "int64",
            Self::String => "string",
            Self::Bool => "bool",
            Self::Float16 => "float16",
            Self::Double => "double",
            Self::Uint32 => "uint32",
            Self::Uint64 => "uint64",
            Self::Complex64 => "complex64",
            Self::Complex128 => "complex128",
            Self::BFloat16 => "bfloat16",
            Self::Float8E4M3FN => "float8e4m3fn",
            Self::Float8E4M3FNUZ => "float8e4m3fnuz",
            Self::Float8E5M2 => "float8e5m2",
            Self::Float8E5M2FNUZ => "float8e5m2fnuz",
            Self::Uint4 => "uint4",
            Self::Int4 => "int4",
            Self::Float4E2M1 => "float4e2m1",
            Self::Float8E8M0 => "float8e8m0",
            Self::Uint2 => "uint2",
            Self::Int2 => "int2",
        }
    }

    /// Storage bits per element; `None` for strings (variable length).
    /// Sub-byte types report their packed width (4 or 2).
    pub fn bits(self) -> Option<u32> {
        Some(match self {
            Self::String => return None,
            Self::Uint2 | Self::Int2 => 2,
            Self::Uint4 | Self::Int4 | Self::Float4E2M1 => 4,
            Self::Uint8
            | Self::Int8
            | Self::Bool
            | Self::Float8E4M3FN
            | Self::Float8E4M3FNUZ
            | Self::Float8E5M2
            | Self::Float8E5M2FNUZ
            | Self::Float8E8M0 => 8,
            Self::Uint16 | Self::Int16 | Self::Float16 | Self::BFloat16 => 16,
            Self::Float | Self::Int32 | Self::Uint32 => 32,
            Self::Int64 | Self::Uint64 | Self::Double | Self::Complex64 => 64,
            Self::Complex128 => 128,
        })
    }

    /// Bytes needed to store `count` elements in ONNX's packed little-endian
    /// layout (sub-byte types packed and rounded up to whole bytes).
    /// `None` for strings or on arithmetic overflow.
    pub fn byte_size(self, count: u64) -> Option<u64> {
        let bits = u64::from(self.bits()?);
        Some(count.checked_mul(bits)?.div_ceil(8))
    }

    /// Elements stored per byte for sub-byte types (2 or 4), else 1.
    pub(crate) fn per_byte(self) -> u64 {
        match self.bits() {
            Some(4) => 2,
            Some(2) => 4,
            _ => 1,
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A readable name for a raw ONNX element-type code, known or not.
pub(crate) fn code_name(code: i32) -> String {
    match DataType::from_onnx(code) {
        Some(t) => t.name().to_string(),
        None if code == 0 => "undefined".to_string(),
        None => format!("unknown({code})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for (i, t) in DataType::ALL.iter().enumerate() {
            let code = i32::try_from(i + 1).unwrap_or(-1);
            assert_eq!(t.to_onnx(), code);
            assert_eq!(DataType::from_onnx(code), Some(*t));
        }
        assert_eq!(DataType::from_onnx(0), None);
        assert_eq!(DataType::from_onnx(27), None);
        assert_eq!(DataType::from_onnx(-1), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(DataType::Float.byte_size(3), Some(12));
        assert_eq!(DataType::Int4.byte_size(3), Some(2));
        assert_eq!(DataType::Uint4.byte_size(4), Some(2));
        assert_eq!(DataType::Int2.byte_size(5), Some(2));
        assert_eq!(DataType::Complex128.byte_size(2), Some(32));
        assert_eq!(DataType::String.byte_size(1), None);
        assert_eq!(DataType::Double.byte_size(u64::MAX), None);
        assert_eq!(DataType::BFloat16.name(), "bfloat16");
        assert_eq!(code_name(0), "undefined");
        assert_eq!(code_name(99), "unknown(99)");
    }
}
