//! Validation of a tensor's declared type, dims and stored size, shared
//! by inline tensors and external data.

use crate::proto::TensorProto;
use crate::{DataType, Error};

/// An `Unsupported` error for tensor `t`.
pub(crate) fn unsupported(t: &TensorProto, what: &str) -> Error {
    Error::Unsupported {
        tensor: t.name.clone(),
        what: what.to_string(),
    }
}

/// The tensor's data type, rejecting UNDEFINED and unknown codes.
pub(crate) fn data_type(t: &TensorProto) -> Result<DataType, Error> {
    DataType::from_onnx(t.data_type).ok_or_else(|| Error::UnknownDataType {
        tensor: t.name.clone(),
        code: t.data_type,
    })
}

/// Product of dims, rejecting negative dims and overflow.
pub(crate) fn element_count(t: &TensorProto) -> Result<u64, Error> {
    let invalid = |reason| Error::InvalidDims {
        tensor: t.name.clone(),
        dims: t.dims.clone(),
        reason,
    };
    t.dims.iter().try_fold(1u64, |acc, &d| {
        let d = u64::try_from(d).map_err(|_| invalid("negative dimension"))?;
        acc.checked_mul(d)
            .ok_or_else(|| invalid("element count overflows"))
    })
}

/// Bytes the dims need in the packed layout; strings are unsupported.
pub(crate) fn expected_bytes(t: &TensorProto, dtype: DataType) -> Result<u64, Error> {
    let n = element_count(t)?;
    match dtype {
        DataType::String => Err(unsupported(t, "string tensor stored as raw bytes")),
        _ => dtype.byte_size(n).ok_or_else(|| Error::InvalidDims {
            tensor: t.name.clone(),
            dims: t.dims.clone(),
            reason: "byte size overflows",
        }),
    }
}

/// Checks a raw byte payload's length against dims × element size.
pub(crate) fn check_byte_len(
    t: &TensorProto,
    dtype: DataType,
    storage: &'static str,
    actual: u64,
) -> Result<(), Error> {
    let expected = expected_bytes(t, dtype)?;
    if expected == actual {
        return Ok(());
    }
    Err(Error::ByteLengthMismatch {
        tensor: t.name.clone(),
        storage,
        dtype,
        dims: t.dims.clone(),
        expected,
        actual,
    })
}

/// Where an inline tensor's data is, once validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inline {
    /// In `raw_data` (also used for empty tensors with no data at all).
    Raw,
    /// In the typed field matching the data type.
    Typed,
}

/// Validates a tensor stored inside the proto and says where its data is.
pub(crate) fn inline_data(t: &TensorProto, dtype: DataType) -> Result<Inline, Error> {
    if t.segment.is_some() {
        return Err(unsupported(t, "segmented tensor"));
    }
    let n = element_count(t)?;
    if dtype == DataType::String && !t.raw_data.is_empty() {
        return Err(unsupported(t, "string tensor stored as raw bytes"));
    }
    if dtype != DataType::String && !t.raw_data.is_empty() {
        check_byte_len(t, dtype, "raw_data", t.raw_data.len() as u64)?;
        return Ok(Inline::Raw);
    }
    if dtype != DataType::String && n == 0 {
        return Ok(Inline::Raw);
    }
    let (field, actual, expected) = typed_field(t, dtype, n);
    if actual != expected {
        return Err(Error::ElementCountMismatch {
            tensor: t.name.clone(),
            field,
            dims: t.dims.clone(),
            expected,
            actual,
        });
    }
    Ok(Inline::Typed)
}

/// The typed field a data type uses: (name, entries present, entries needed).
fn typed_field(t: &TensorProto, dtype: DataType, n: u64) -> (&'static str, u64, u64) {
    use DataType as T;
    let len = |v: usize| v as u64;
    match dtype {
        T::Float => ("float_data", len(t.float_data.len()), n),
        T::Complex64 => ("float_data", len(t.float_data.len()), n.saturating_mul(2)),
        T::Double => ("double_data", len(t.double_data.len()), n),
        T::Complex128 => ("double_data", len(t.double_data.len()), n.saturating_mul(2)),
        T::Int64 => ("int64_data", len(t.int64_data.len()), n),
        T::Uint32 | T::Uint64 => ("uint64_data", len(t.uint64_data.len()), n),
        T::String => ("string_data", len(t.string_data.len()), n),
        _ => (
            "int32_data",
            len(t.int32_data.len()),
            n.div_ceil(dtype.per_byte()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;

    fn proto(dtype: DataType, dims: &[i64]) -> TensorProto {
        TensorProto {
            name: "t".into(),
            data_type: dtype.to_onnx(),
            dims: dims.to_vec(),
            ..Default::default()
        }
    }

    #[test]
    fn rejects_bad_tensors() {
        let mut p = proto(DataType::Float, &[2, -1]);
        assert!(matches!(
            Tensor::from_proto(&p),
            Err(Error::InvalidDims { .. })
        ));
        p.dims = vec![i64::MAX, i64::MAX];
        assert!(matches!(
            Tensor::from_proto(&p),
            Err(Error::InvalidDims { .. })
        ));
        p.dims = vec![3];
        p.float_data = vec![1.0, 2.0];
        assert!(matches!(
            Tensor::from_proto(&p),
            Err(Error::ElementCountMismatch {
                field: "float_data",
                expected: 3,
                actual: 2,
                ..
            })
        ));
        p.data_type = 0;
        assert!(matches!(
            Tensor::from_proto(&p),
            Err(Error::UnknownDataType { code: 0, .. })
        ));
        let mut s = proto(DataType::String, &[1]);
        s.raw_data = vec![1];
        assert!(matches!(
            Tensor::from_proto(&s),
            Err(Error::Unsupported { .. })
        ));
        s.raw_data.clear();
        assert!(matches!(
            Tensor::from_proto(&s),
            Err(Error::ElementCountMismatch { .. })
        ));
        s.string_data = vec![b"hi".to_vec()];
        let t = Tensor::from_proto(&s).map_err(|e| e.to_string());
        assert_eq!(t.as_ref().map(|t| t.byte_len().ok()), Ok(Some(2)));
        assert!(t.is_ok_and(|t| t.bytes().is_err()));
    }
}
