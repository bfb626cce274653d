//! Building input tensors and reading outputs in whatever element type the graph declares.

use crate::Error;
use half::{bf16, f16};
use ort::memory::Allocator;
use ort::value::{DynTensor, DynValue, Tensor, TensorElementType};

/// An integer tensor (`int32` or `int64`, as the graph wants) from i64 values.
pub(crate) fn int_tensor(
    ty: TensorElementType,
    shape: [usize; 2],
    values: Vec<i64>,
) -> Result<DynValue, Error> {
    let shape = shape.map(|d| d as i64).to_vec();
    let value = match ty {
        TensorElementType::Int32 => {
            let narrowed = values
                .into_iter()
                .map(|v| i32::try_from(v).unwrap_or(i32::MAX))
                .collect::<Vec<_>>();
            Tensor::from_array((shape, narrowed)).map(Tensor::into_dyn)
        }
        _ => Tensor::from_array((shape, values)).map(Tensor::into_dyn),
    };
    value.map_err(|e| Error::ort("creating an input tensor", e))
}

/// An empty (zero-length sequence) tensor of a float type.
pub(crate) fn empty_float(ty: TensorElementType, shape: Vec<i64>) -> Result<DynValue, Error> {
    let value = match ty {
        TensorElementType::Float16 => {
            Tensor::<f16>::from_array((shape, Vec::new())).map(Tensor::into_dyn)
        }
        TensorElementType::Bfloat16 => {
            Tensor::<bf16>::from_array((shape, Vec::new())).map(Tensor::into_dyn)
        }
        _ => Tensor::<f32>::from_array((shape, Vec::new())).map(Tensor::into_dyn),
    };
    value.map_err(|e| Error::ort("creating an empty KV tensor", e))
}

/// A tensor allocated by ONNX Runtime (so it can be bound as an output), zeroed when the memory
/// is host-accessible.
pub(crate) fn allocated(
    allocator: &Allocator,
    ty: TensorElementType,
    shape: Vec<i64>,
) -> Result<DynTensor, Error> {
    let mut tensor = DynTensor::new(allocator, ty, shape)
        .map_err(|e| Error::ort("allocating the KV buffer", e))?;
    if allocator.memory_info().is_cpu_accessible() {
        let zeroed = match ty {
            TensorElementType::Float16 => tensor
                .try_extract_tensor_mut::<f16>()
                .map(|(_, d)| d.fill(f16::ZERO)),
            TensorElementType::Bfloat16 => tensor
                .try_extract_tensor_mut::<bf16>()
                .map(|(_, d)| d.fill(bf16::ZERO)),
            _ => tensor
                .try_extract_tensor_mut::<f32>()
                .map(|(_, d)| d.fill(0.0)),
        };
        zeroed.map_err(|e| Error::ort("zeroing the KV buffer", e))?;
    }
    Ok(tensor)
}

/// The logits tensor as f32 with its shape.
pub(crate) fn logits_f32(value: &DynValue) -> Result<(Vec<i64>, Vec<f32>), Error> {
    let context = "reading logits";
    let ty = value.dtype().tensor_type();
    let (shape, data) = match ty {
        Some(TensorElementType::Float16) => {
            let (s, d) = value
                .try_extract_tensor::<f16>()
                .map_err(|e| Error::ort(context, e))?;
            (s.to_vec(), d.iter().map(|v| v.to_f32()).collect())
        }
        Some(TensorElementType::Bfloat16) => {
            let (s, d) = value
                .try_extract_tensor::<bf16>()
                .map_err(|e| Error::ort(context, e))?;
            (s.to_vec(), d.iter().map(|v| v.to_f32()).collect())
        }
        _ => {
            let (s, d) = value
                .try_extract_tensor::<f32>()
                .map_err(|e| Error::ort(context, e))?;
            (s.to_vec(), d.to_vec())
        }
    };
    Ok((shape, data))
}

/// A copy of `value` keeping the first `keep` positions along `axis`.
pub(crate) fn truncate_axis(value: &DynValue, axis: usize, keep: usize) -> Result<DynValue, Error> {
    match value.dtype().tensor_type() {
        Some(TensorElementType::Float16) => truncate_typed::<f16>(value, axis, keep),
        Some(TensorElementType::Bfloat16) => truncate_typed::<bf16>(value, axis, keep),
        _ => truncate_typed::<f32>(value, axis, keep),
    }
}

fn truncate_typed<T>(value: &DynValue, axis: usize, keep: usize) -> Result<DynValue, Error>
where
    T: ort::value::PrimitiveTensorElementType + Copy + std::fmt::Debug + 'static,
{
    let context = "rewinding the KV cache";
    let (shape, data) = value
        .try_extract_tensor::<T>()
        .map_err(|e| Error::ort(context, e))?;
    let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    let len = dims.get(axis).copied().unwrap_or(0);
    let keep = keep.min(len);
    let outer: usize = dims[..axis].iter().product();
    let inner: usize = dims[axis + 1..].iter().product();
    let mut kept = Vec::with_capacity(outer * keep * inner);
    for block in 0..outer {
        let start = block * len * inner;
        kept.extend_from_slice(&data[start..start + keep * inner]);
    }
    let mut new_shape: Vec<i64> = shape.to_vec();
    new_shape[axis] = keep as i64;
    Tensor::from_array((new_shape, kept))
        .map(Tensor::into_dyn)
        .map_err(|e| Error::ort(context, e))
}
