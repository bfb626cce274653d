//! A validated view of one tensor's data, wherever it is stored (raw_data,
//! a typed `*_data` field, or a mapped external file), with conversions.

use std::borrow::Cow;
use std::path::Path;

use crate::proto::TensorProto;
use crate::proto::tensor_proto::DataLocation;
use crate::validate::{Inline, data_type, element_count, expected_bytes, inline_data, unsupported};
use crate::{DataType, Error};

/// Where a tensor's bytes come from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Data<'a> {
    /// Little-endian packed bytes in `raw_data`.
    Raw(&'a [u8]),
    /// Values in the typed field that matches the data type.
    Typed,
    /// Little-endian packed bytes in a mapped external file.
    External(ExternalRef<'a>),
}

/// Where an external tensor's bytes lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExternalRef<'a> {
    /// `location` as written in the model, normalized.
    pub location: &'a Path,
    /// The full path of the file it was read from.
    pub path: &'a Path,
    /// Byte offset within the file.
    pub offset: u64,
    /// The tensor's bytes (already bounds- and size-checked).
    pub bytes: &'a [u8],
}

/// One tensor, checked at construction: known data type, valid dims, and
/// stored size matching dims × element size.
#[derive(Clone, Copy, Debug)]
pub struct Tensor<'a> {
    pub name: &'a str,
    pub dtype: DataType,
    pub dims: &'a [i64],
    proto: &'a TensorProto,
    data: Data<'a>,
}

impl<'a> Tensor<'a> {
    /// Checks and wraps a tensor whose data is stored inside the proto
    /// (e.g. a `Constant` node's `value`). External data needs the model
    /// directory: use [`crate::OnnxModel::initializer`] for those.
    pub fn from_proto(proto: &'a TensorProto) -> Result<Self, Error> {
        let dtype = data_type(proto)?;
        if proto.data_location == DataLocation::External as i32 {
            return Err(unsupported(
                proto,
                "external data outside an OnnxModel initializer",
            ));
        }
        let data = match inline_data(proto, dtype)? {
            Inline::Raw => Data::Raw(&proto.raw_data),
            Inline::Typed => Data::Typed,
        };
        Ok(Self::new(proto, dtype, data))
    }

    pub(crate) fn new(proto: &'a TensorProto, dtype: DataType, data: Data<'a>) -> Self {
        Self {
            name: &proto.name,
            dtype,
            dims: &proto.dims,
            proto,
            data,
        }
    }

    /// The underlying proto.
    pub fn proto(&self) -> &'a TensorProto {
        self.proto
    }

    /// Product of dims (1 for a scalar).
    pub fn num_elements(&self) -> Result<u64, Error> {
        element_count(self.proto)
    }

    /// Size of the data in ONNX's packed little-endian layout; for strings,
    /// the total length of all strings.
    pub fn byte_len(&self) -> Result<u64, Error> {
        match self.dtype {
            DataType::String => Ok(self.proto.string_data.iter().map(|s| s.len() as u64).sum()),
            _ => expected_bytes(self.proto, self.dtype),
        }
    }

    /// Where the data lies when it is stored in an external file.
    pub fn external(&self) -> Option<ExternalRef<'a>> {
        match self.data {
            Data::External(r) => Some(r),
            _ => None,
        }
    }

    /// The bytes without copying, when stored in raw_data or externally.
    pub fn raw_bytes(&self) -> Option<&'a [u8]> {
        match self.data {
            Data::Raw(b) | Data::External(ExternalRef { bytes: b, .. }) => Some(b),
            Data::Typed => None,
        }
    }

    /// The data as packed little-endian bytes (the `raw_data` layout):
    /// borrowed when stored that way, built from the typed field otherwise.
    /// Fails for string tensors.
    pub fn bytes(&self) -> Result<Cow<'a, [u8]>, Error> {
        match self.raw_bytes() {
            Some(b) => Ok(Cow::Borrowed(b)),
            None => self.typed_bytes().map(Cow::Owned),
        }
    }

    /// The strings of a string tensor.
    pub fn strings(&self) -> Result<&'a [Vec<u8>], Error> {
        match self.dtype {
            DataType::String => Ok(&self.proto.string_data),
            _ => Err(self.conversion("string")),
        }
    }

    /// Values as f32, for float, float16 and bfloat16 tensors.
    pub fn to_f32_vec(&self) -> Result<Vec<f32>, Error> {
        if let (DataType::Float, Data::Typed) = (self.dtype, self.data) {
            return Ok(self.proto.float_data.clone());
        }
        let bytes = match self.dtype {
            DataType::Float | DataType::Float16 | DataType::BFloat16 => self.bytes()?,
            _ => return Err(self.conversion("f32")),
        };
        Ok(match self.dtype {
            DataType::Float => le_words(&bytes, f32::from_le_bytes).collect(),
            DataType::Float16 => {
                le_words(&bytes, |b| half::f16::from_le_bytes(b).to_f32()).collect()
            }
            _ => le_words(&bytes, |b| half::bf16::from_le_bytes(b).to_f32()).collect(),
        })
    }

    /// Values as i64, for integer and bool tensors (4- and 2-bit types
    /// unpacked; uint64 values above `i64::MAX` are an error).
    pub fn to_i64_vec(&self) -> Result<Vec<i64>, Error> {
        use DataType as T;
        if let (T::Int64, Data::Typed) = (self.dtype, self.data) {
            return Ok(self.proto.int64_data.clone());
        }
        let b = match self.dtype {
            T::Int64 | T::Int32 | T::Int16 | T::Int8 | T::Uint64 | T::Uint32 | T::Uint16 => {
                self.bytes()?
            }
            T::Uint8 | T::Bool | T::Int4 | T::Uint4 | T::Int2 | T::Uint2 => self.bytes()?,
            _ => return Err(self.conversion("i64")),
        };
        Ok(match self.dtype {
            T::Int64 => le_words(&b, i64::from_le_bytes).collect(),
            T::Int32 => le_words(&b, |w| i64::from(i32::from_le_bytes(w))).collect(),
            T::Int16 => le_words(&b, |w| i64::from(i16::from_le_bytes(w))).collect(),
            T::Uint32 => le_words(&b, |w| i64::from(u32::from_le_bytes(w))).collect(),
            T::Uint16 => le_words(&b, |w| i64::from(u16::from_le_bytes(w))).collect(),
            T::Int8 => b.iter().map(|&v| i64::from(v as i8)).collect(),
            T::Uint8 | T::Bool => b.iter().map(|&v| i64::from(v)).collect(),
            T::Uint64 => le_words(&b, u64::from_le_bytes)
                .map(|v| {
                    i64::try_from(v).map_err(|_| Error::OutOfRange {
                        tensor: self.name.to_string(),
                        value: v,
                        target: "i64",
                    })
                })
                .collect::<Result<_, _>>()?,
            _ => self.unpack_sub_byte(&b)?,
        })
    }

    /// Unpacks 4- or 2-bit elements, low bits first, sign-extending signed types.
    fn unpack_sub_byte(&self, bytes: &[u8]) -> Result<Vec<i64>, Error> {
        let bits = self.dtype.bits().unwrap_or(8);
        let per_byte = 8 / bits;
        let signed = matches!(self.dtype, DataType::Int4 | DataType::Int2);
        let n = usize::try_from(self.num_elements()?).map_err(|_| self.conversion("memory"))?;
        let mask = (1u8 << bits) - 1;
        Ok((0..n)
            .map(|i| {
                let byte = bytes.get(i / per_byte as usize).copied().unwrap_or(0);
                let v = (byte >> ((i % per_byte as usize) as u32 * bits)) & mask;
                if signed && v >> (bits - 1) == 1 {
                    i64::from(v) - (1i64 << bits)
                } else {
                    i64::from(v)
                }
            })
            .collect())
    }

    /// Builds packed little-endian bytes from the typed field.
    fn typed_bytes(&self) -> Result<Vec<u8>, Error> {
        use DataType as T;
        let p = self.proto;
        Ok(match self.dtype {
            T::String => return Err(self.conversion("bytes")),
            T::Float | T::Complex64 => p.float_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            T::Double | T::Complex128 => {
                p.double_data.iter().flat_map(|v| v.to_le_bytes()).collect()
            }
            T::Int64 => p.int64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            T::Uint64 => p.uint64_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            T::Uint32 => p
                .uint64_data
                .iter()
                .flat_map(|&v| (v as u32).to_le_bytes())
                .collect(),
            T::Int32 => p.int32_data.iter().flat_map(|v| v.to_le_bytes()).collect(),
            T::Int16 | T::Uint16 | T::Float16 | T::BFloat16 => p
                .int32_data
                .iter()
                .flat_map(|&v| (v as u16).to_le_bytes())
                .collect(),
            // One byte per entry: 8-bit types, and sub-byte types already packed.
            _ => p.int32_data.iter().map(|&v| v as u8).collect(),
        })
    }

    fn conversion(&self, target: &'static str) -> Error {
        Error::Conversion {
            tensor: self.name.to_string(),
            dtype: self.dtype,
            target,
        }
    }
}

/// Iterates fixed-size little-endian words (the length was checked at load).
fn le_words<'a, const N: usize, T>(
    bytes: &'a [u8],
    f: impl Fn([u8; N]) -> T + 'a,
) -> impl Iterator<Item = T> + 'a {
    bytes.chunks_exact(N).map(move |c| {
        let mut word = [0u8; N];
        word.copy_from_slice(c);
        f(word)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: DataType, dims: &[i64]) -> TensorProto {
        TensorProto {
            name: "t".into(),
            data_type: dtype.to_onnx(),
            dims: dims.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn typed_int32_field_packs_to_bytes() -> Result<(), Error> {
        let mut p = proto(DataType::Float16, &[2]);
        p.int32_data = vec![0x3c00, 0xc000]; // 1.0, -2.0
        let t = Tensor::from_proto(&p)?;
        assert_eq!(t.bytes()?.as_ref(), &[0x00, 0x3c, 0x00, 0xc0]);
        assert_eq!(t.to_f32_vec()?, vec![1.0, -2.0]);
        Ok(())
    }

    #[test]
    fn int4_unpacks_with_sign() -> Result<(), Error> {
        let mut p = proto(DataType::Int4, &[3]);
        p.raw_data = vec![0x8f, 0x07]; // -1, -8, 7
        assert_eq!(Tensor::from_proto(&p)?.to_i64_vec()?, vec![-1, -8, 7]);
        p.data_type = DataType::Uint4.to_onnx();
        assert_eq!(Tensor::from_proto(&p)?.to_i64_vec()?, vec![15, 8, 7]);
        p.raw_data = vec![0x8f];
        assert!(matches!(
            Tensor::from_proto(&p),
            Err(Error::ByteLengthMismatch {
                expected: 2,
                actual: 1,
                ..
            })
        ));
        p.raw_data.clear();
        p.int32_data = vec![0x8f, 0x07];
        assert_eq!(Tensor::from_proto(&p)?.to_i64_vec()?, vec![15, 8, 7]);
        Ok(())
    }

    #[test]
    fn uint64_out_of_range() -> Result<(), Error> {
        let mut p = proto(DataType::Uint64, &[2]);
        p.uint64_data = vec![7, u64::MAX];
        let t = Tensor::from_proto(&p)?;
        assert!(matches!(
            t.to_i64_vec(),
            Err(Error::OutOfRange {
                value: u64::MAX,
                ..
            })
        ));
        assert!(matches!(
            t.to_f32_vec(),
            Err(Error::Conversion { target: "f32", .. })
        ));
        Ok(())
    }
}
