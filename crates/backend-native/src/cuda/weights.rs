//! Reading the plan's weights out of the ONNX model and uploading them once, in the layouts the
//! kernels read: dense linear weights `[n, k]` in their stored precision, MatMulNBits weights
//! packed as stored with f32 scales and unpacked zero points, everything else as f32.

use crate::cuda::kernels::{DevPtr, LinearShape, Ops};
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use cudarc::driver::CudaStream;
use genai_frontend::{Int4Weight as PlanInt4, Linear, Table, Tensor, Weight, WeightDType};
use genai_onnx::{DataType, OnnxModel};
use std::sync::Arc;

fn model_error(what: impl Into<String>, message: impl std::fmt::Display) -> Error {
    Error::Model {
        what: what.into(),
        message: message.to_string(),
    }
}

fn raw<'m>(model: &'m OnnxModel, name: &str) -> Result<std::borrow::Cow<'m, [u8]>, Error> {
    let t = model
        .initializer(name)
        .ok_or_else(|| model_error(name, "initializer missing"))?;
    t.bytes().map_err(|e| model_error(name, e))
}

fn f32s(model: &OnnxModel, name: &str, expected: Option<usize>) -> Result<Vec<f32>, Error> {
    let t = model
        .initializer(name)
        .ok_or_else(|| model_error(name, "initializer missing"))?;
    let v = t.to_f32_vec().map_err(|e| model_error(name, e))?;
    match expected {
        Some(n) if n != v.len() => Err(model_error(
            name,
            format!("{} values, plan expects {n}", v.len()),
        )),
        _ => Ok(v),
    }
}

/// A float tensor as f32 values, checked against the plan's dims.
pub(crate) fn tensor_f32(model: &OnnxModel, t: &Tensor) -> Result<Vec<f32>, Error> {
    f32s(model, &t.name, Some(t.dims.iter().product()))
}

/// `[rows, cols]` elements of `size` bytes, transposed to `[cols, rows]`.
fn transpose_bytes(data: &[u8], rows: usize, cols: usize, size: usize) -> Vec<u8> {
    let mut out = vec![0u8; data.len()];
    const TILE: usize = 64;
    for r0 in (0..rows).step_by(TILE) {
        for c0 in (0..cols).step_by(TILE) {
            for r in r0..(r0 + TILE).min(rows) {
                for c in c0..(c0 + TILE).min(cols) {
                    let (src, dst) = ((r * cols + c) * size, (c * rows + r) * size);
                    out[dst..dst + size].copy_from_slice(&data[src..src + size]);
                }
            }
        }
    }
    out
}

/// How a linear layer's weight sits in device memory.
// One per linear layer, built once: the size difference does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum DevWeight {
    /// `[n, k]`, read by `kernel`.
    Dense {
        kernel: &'static str,
        data: DevBuf<u8>,
    },
    /// MatMulNBits as stored; `int8` selects the CompInt8 path (accuracy level 4, integer zero
    /// points), as the CPU decoder does.
    Int4 {
        packed: DevBuf<u8>,
        scales: DevBuf<f32>,
        zp_f32: Option<DevBuf<f32>>,
        zp_u8: Option<DevBuf<u8>>,
        block: usize,
        int8: bool,
    },
}

/// A linear layer on the device.
pub(crate) struct DevLinear {
    pub weight: DevWeight,
    pub bias: Option<DevBuf<f32>>,
    pub k: usize,
    pub n: usize,
}

/// Scratch for int8 activations: `qa` `[rows, kp]` and `sa` `[rows, blocks]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuantScratch {
    pub qa: DevPtr,
    pub sa: DevPtr,
}

impl DevLinear {
    pub fn load(stream: &Arc<CudaStream>, model: &OnnxModel, plan: &Linear) -> Result<Self, Error> {
        let (k, n) = (plan.k, plan.n);
        let weight = match &plan.weight {
            Weight::Dense { tensor, transposed } => {
                let bytes = raw(model, &tensor.name)?;
                let (size, kernel) = match tensor.dtype {
                    WeightDType::F32 => (4, "gemv_f32"),
                    WeightDType::F16 => (2, "gemv_f16"),
                    WeightDType::BF16 => (2, "gemv_bf16"),
                };
                if bytes.len() != k * n * size {
                    return Err(model_error(
                        &tensor.name,
                        format!("{} bytes, plan expects {k} x {n} x {size}", bytes.len()),
                    ));
                }
                let nk = if *transposed {
                    bytes.into_owned()
                } else {
                    transpose_bytes(&bytes, k, n, size)
                };
                DevWeight::Dense {
                    kernel,
                    data: DevBuf::from_host(stream, &nk)?,
                }
            }
            Weight::Int4(w) => int4(stream, model, w)?,
        };
        let bias = match &plan.bias {
            Some(b) => Some(DevBuf::from_host(stream, &tensor_f32(model, b)?)?),
            None => None,
        };
        Ok(DevLinear { weight, bias, k, n })
    }

    /// Bytes of weight data read per call.
    pub fn weight_bytes(&self) -> usize {
        match &self.weight {
            DevWeight::Dense { data, .. } => data.bytes(),
            DevWeight::Int4 {
                packed,
                scales,
                zp_u8,
                zp_f32,
                ..
            } => {
                packed.bytes()
                    + scales.bytes()
                    + zp_u8.as_ref().map_or(0, DevBuf::bytes)
                    + zp_f32.as_ref().map_or(0, DevBuf::bytes)
            }
        }
    }

    /// Int8 scratch this layer needs per row: (quantized values, block scales).
    pub fn quant_scratch(&self) -> (usize, usize) {
        match &self.weight {
            DevWeight::Int4 {
                block, int8: true, ..
            } => {
                let nb = self.k.div_ceil(*block);
                (nb * block, nb)
            }
            _ => (0, 0),
        }
    }

    /// y `[m, n]` (rows `ldy` apart) = x `[m, k]` (rows `ldx` apart) W (+ bias).
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        ops: &Ops<'_>,
        x: DevPtr,
        ldx: usize,
        y: DevPtr,
        ldy: usize,
        m: usize,
        act: i32,
        scratch: QuantScratch,
    ) -> Result<(), Error> {
        let shape = LinearShape {
            m,
            k: self.k,
            n: self.n,
            ldx,
            ldy,
        };
        let bias = self.bias.as_ref().map_or(0, |b| b.ptr);
        match &self.weight {
            DevWeight::Dense { kernel, data } => ops.gemv(kernel, data.ptr, x, bias, y, shape, act),
            DevWeight::Int4 {
                packed,
                scales,
                zp_f32,
                zp_u8,
                block,
                int8,
            } => {
                if *int8 {
                    let zp = zp_u8.as_ref().map_or(0, |z| z.ptr);
                    ops.gemv_int4_i8(
                        (packed.ptr, scales.ptr, zp),
                        *block,
                        x,
                        (scratch.qa, scratch.sa),
                        bias,
                        y,
                        shape,
                        act,
                    )
                } else {
                    let zp = zp_f32.as_ref().map_or(0, |z| z.ptr);
                    ops.gemv_int4_f32((packed.ptr, scales.ptr, zp), *block, x, bias, y, shape, act)
                }
            }
        }
    }
}

/// Zero points of a MatMulNBits weight, one per block, as u8 (packed input) or f32 (float).
fn zero_points(
    model: &OnnxModel,
    name: &str,
    n: usize,
    nb: usize,
) -> Result<(Option<Vec<u8>>, Vec<f32>), Error> {
    let t = model
        .initializer(name)
        .ok_or_else(|| model_error(name, "initializer missing"))?;
    if t.dtype == DataType::Uint8 {
        let packed = raw(model, name)?;
        let per_col = nb.div_ceil(2);
        if packed.len() != n * per_col {
            return Err(model_error(
                name,
                format!("{} bytes, expected {n} x {per_col}", packed.len()),
            ));
        }
        let mut u = Vec::with_capacity(n * nb);
        for col in packed.chunks(per_col) {
            u.extend((0..nb).map(|b| (col[b / 2] >> (4 * (b % 2))) & 0x0f));
        }
        let f = u.iter().map(|&z| f32::from(z)).collect();
        Ok((Some(u), f))
    } else {
        Ok((None, f32s(model, name, Some(n * nb))?))
    }
}

fn int4(stream: &Arc<CudaStream>, model: &OnnxModel, w: &PlanInt4) -> Result<DevWeight, Error> {
    if ![16, 32, 64, 128, 256].contains(&w.block_size) {
        return Err(model_error(
            &w.packed,
            format!("block_size {}", w.block_size),
        ));
    }
    let nb = w.k.div_ceil(w.block_size);
    let packed = raw(model, &w.packed)?;
    if packed.len() != w.n * nb * w.block_size / 2 {
        return Err(model_error(
            &w.packed,
            "packed data is not [n, blocks, block/2]",
        ));
    }
    let scales = f32s(model, &w.scales.name, Some(w.n * nb))?;
    let (zp_u8, zp_f32) = match &w.zero_points {
        Some(name) => {
            let (u, f) = zero_points(model, name, w.n, nb)?;
            (u, Some(f))
        }
        None => (None, None),
    };
    let float_zp = zp_f32.is_some() && zp_u8.is_none();
    let int8 = w.accuracy_level == 4 && !float_zp;
    Ok(DevWeight::Int4 {
        packed: DevBuf::from_host(stream, &packed)?,
        scales: DevBuf::from_host(stream, &scales)?,
        zp_f32: zp_f32.map(|z| DevBuf::from_host(stream, &z)).transpose()?,
        zp_u8: zp_u8.map(|z| DevBuf::from_host(stream, &z)).transpose()?,
        block: w.block_size,
        int8,
    })
}

/// An embedding table as f32 rows `[vocab, hidden]`.
pub(crate) fn table(
    model: &OnnxModel,
    table: &Table,
    vocab: usize,
    hidden: usize,
) -> Result<Vec<f32>, Error> {
    match table {
        Table::Dense(t) => tensor_f32(model, t),
        Table::Transposed(t) => {
            let v = tensor_f32(model, t)?;
            let bytes: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
            let tr = transpose_bytes(&bytes, hidden, vocab, 4);
            Ok(tr
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        }
        Table::Int4(w) => dequantize_rows(model, w),
    }
}

/// Rows of a block-quantized table (GatherBlockQuantized): row r is `(q - zp) * scale`.
fn dequantize_rows(model: &OnnxModel, w: &PlanInt4) -> Result<Vec<f32>, Error> {
    let (k, n, block) = (w.k, w.n, w.block_size);
    let nb = k.div_ceil(block);
    let packed = raw(model, &w.packed)?;
    let scales = f32s(model, &w.scales.name, Some(n * nb))?;
    if packed.len() != n * nb * block / 2 {
        return Err(model_error(
            &w.packed,
            "packed data is not [n, blocks, block/2]",
        ));
    }
    let zp = match &w.zero_points {
        Some(name) => Some(zero_points(model, name, n, nb)?.1),
        None => None,
    };
    let mut rows = vec![0.0f32; n * k];
    for r in 0..n {
        for b in 0..nb {
            let scale = scales[r * nb + b];
            let z = zp.as_ref().map_or(8.0, |z| z[r * nb + b]);
            let base = (r * nb + b) * block / 2;
            for j in 0..block.min(k - b * block) {
                let byte = packed[base + j / 2];
                let q = if j % 2 == 0 { byte & 0x0f } else { byte >> 4 };
                rows[r * k + b * block + j] = (f32::from(q) - z) * scale;
            }
        }
    }
    Ok(rows)
}
