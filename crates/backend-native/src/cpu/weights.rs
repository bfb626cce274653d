//! Reading the plan's weights out of the ONNX model into the kernels' prepared layouts.

use crate::cpu::kernels::{DenseWeight, Int4Weight, Scales, Weight, ZeroPoints};
use crate::error::Error;
use genai_frontend::{
    Int4Weight as PlanInt4, Linear, Table, Tensor, Weight as PlanWeight, WeightDType,
};
use genai_onnx::OnnxModel;

fn model_error(what: impl Into<String>, message: impl std::fmt::Display) -> Error {
    Error::Model {
        what: what.into(),
        message: message.to_string(),
    }
}

/// The raw bytes of an initializer.
fn bytes<'m>(model: &'m OnnxModel, name: &str) -> Result<std::borrow::Cow<'m, [u8]>, Error> {
    let tensor = model
        .initializer(name)
        .ok_or_else(|| model_error(name, "initializer missing"))?;
    tensor.bytes().map_err(|e| model_error(name, e))
}

/// A float tensor as f32 values.
pub(crate) fn f32_values(model: &OnnxModel, tensor: &Tensor) -> Result<Vec<f32>, Error> {
    let init = model
        .initializer(&tensor.name)
        .ok_or_else(|| model_error(&tensor.name, "initializer missing"))?;
    let values = init
        .to_f32_vec()
        .map_err(|e| model_error(&tensor.name, e))?;
    let expected: usize = tensor.dims.iter().product();
    if values.len() != expected {
        return Err(model_error(
            &tensor.name,
            format!("{} values, plan expects {expected}", values.len()),
        ));
    }
    Ok(values)
}

fn u16_values(raw: &[u8]) -> Vec<u16> {
    raw.chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// A `[rows, cols]` matrix transposed to `[cols, rows]`.
fn transpose<T: Copy>(data: &[T], rows: usize, cols: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(data.len());
    for c in 0..cols {
        out.extend((0..rows).map(|r| data[r * cols + c]));
    }
    out
}

/// A linear layer's prepared weight and f32 bias.
pub(crate) fn linear(
    model: &OnnxModel,
    linear: &Linear,
) -> Result<(Weight, Option<Vec<f32>>), Error> {
    let (k, n) = (linear.k, linear.n);
    let weight = match &linear.weight {
        PlanWeight::Dense { tensor, transposed } => {
            let raw = bytes(model, &tensor.name)?;
            let dense = match tensor.dtype {
                WeightDType::F32 => {
                    let values = f32_values(model, tensor)?;
                    let kn = if *transposed {
                        transpose(&values, n, k)
                    } else {
                        values
                    };
                    DenseWeight::from_f32(k, n, &kn)?
                }
                WeightDType::F16 | WeightDType::BF16 => {
                    let bits = u16_values(&raw);
                    let kn = if *transposed {
                        transpose(&bits, n, k)
                    } else {
                        bits
                    };
                    if tensor.dtype == WeightDType::F16 {
                        DenseWeight::from_f16_bits(k, n, &kn)?
                    } else {
                        DenseWeight::from_bf16_bits(k, n, &kn)?
                    }
                }
            };
            Weight::Dense(dense)
        }
        PlanWeight::Int4(w) => Weight::Int4(int4(model, w)?),
    };
    let bias = linear
        .bias
        .as_ref()
        .map(|b| f32_values(model, b))
        .transpose()?;
    Ok((weight, bias))
}

/// A MatMulNBits weight.
pub(crate) fn int4(model: &OnnxModel, w: &PlanInt4) -> Result<Int4Weight, Error> {
    let packed = bytes(model, &w.packed)?;
    let scale_bytes = bytes(model, &w.scales.name)?;
    let scale_f32;
    let scale_bits;
    let scales = match w.scales.dtype {
        WeightDType::F32 => {
            scale_f32 = f32_values(model, &w.scales)?;
            Scales::F32(&scale_f32)
        }
        WeightDType::F16 => {
            scale_bits = u16_values(&scale_bytes);
            Scales::F16Bits(&scale_bits)
        }
        WeightDType::BF16 => {
            scale_bits = u16_values(&scale_bytes);
            Scales::Bf16Bits(&scale_bits)
        }
    };
    let zp_raw;
    let zp_f32;
    let zp_bits;
    let zero_points = match &w.zero_points {
        None => None,
        Some(name) => {
            let init = model
                .initializer(name)
                .ok_or_else(|| model_error(name, "initializer missing"))?;
            match init.dtype {
                genai_onnx::DataType::Uint8 => {
                    zp_raw = bytes(model, name)?;
                    Some(ZeroPoints::Packed4(&zp_raw))
                }
                genai_onnx::DataType::Float16 => {
                    zp_bits = u16_values(&bytes(model, name)?);
                    Some(ZeroPoints::F16Bits(&zp_bits))
                }
                _ => {
                    zp_f32 = init.to_f32_vec().map_err(|e| model_error(name, e))?;
                    Some(ZeroPoints::F32(&zp_f32))
                }
            }
        }
    };
    Int4Weight::new(
        w.k,
        w.n,
        w.block_size,
        w.accuracy_level,
        &packed,
        scales,
        zero_points,
    )
}

/// An embedding table as f32 rows `[vocab, hidden]`.
pub(crate) fn table(
    model: &OnnxModel,
    table: &Table,
    vocab: usize,
    hidden: usize,
) -> Result<Vec<f32>, Error> {
    match table {
        Table::Dense(t) => f32_values(model, t),
        // Stored `[hidden, vocab]` (a tied lm_head read through a Transpose).
        Table::Transposed(t) => Ok(transpose(&f32_values(model, t)?, hidden, vocab)),
        Table::Int4(w) => dequantize_rows(model, w),
    }
}

/// Every row of a block-quantized table, dequantized: row r is output column r of the
/// MatMulNBits layout (`n` rows of `k` values), w = (q - zero_point) * scale.
fn dequantize_rows(model: &OnnxModel, w: &PlanInt4) -> Result<Vec<f32>, Error> {
    let (k, n, block) = (w.k, w.n, w.block_size);
    let blocks = k.div_ceil(block);
    let packed = bytes(model, &w.packed)?;
    let scales = f32_values(model, &w.scales)?;
    if packed.len() != n * blocks * block / 2 || scales.len() != n * blocks {
        return Err(model_error(
            &w.packed,
            "packed data or scales do not match [n, blocks, block/2]",
        ));
    }
    let zero_points: Option<(Vec<f32>, bool)> = match &w.zero_points {
        None => None,
        Some(name) => {
            let init = model
                .initializer(name)
                .ok_or_else(|| model_error(name, "initializer missing"))?;
            if init.dtype == genai_onnx::DataType::Uint8 {
                Some((
                    bytes(model, name)?.iter().map(|&b| f32::from(b)).collect(),
                    true,
                ))
            } else {
                Some((init.to_f32_vec().map_err(|e| model_error(name, e))?, false))
            }
        }
    };
    let zp_row = blocks.div_ceil(2);
    let zero_point = |row: usize, b: usize| -> f32 {
        match &zero_points {
            None => 8.0,
            Some((values, true)) => {
                let byte = values.get(row * zp_row + b / 2).copied().unwrap_or(136.0) as u8;
                f32::from(if b.is_multiple_of(2) {
                    byte & 0x0f
                } else {
                    byte >> 4
                })
            }
            Some((values, false)) => values.get(row * blocks + b).copied().unwrap_or(8.0),
        }
    };
    let mut rows = vec![0.0f32; n * k];
    for row in 0..n {
        for b in 0..blocks {
            let scale = scales[row * blocks + b];
            let zp = zero_point(row, b);
            let base = (row * blocks + b) * block / 2;
            for j in 0..block.min(k - b * block) {
                let byte = packed[base + j / 2];
                let q = if j % 2 == 0 { byte & 0x0f } else { byte >> 4 };
                rows[row * k + b * block + j] = (f32::from(q) - zp) * scale;
            }
        }
    }
    Ok(rows)
}
