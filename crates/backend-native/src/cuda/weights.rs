//! Linear layers in device memory (uploaded once from `host.rs`'s layouts) and their launch.

use crate::cuda::host::{HostLinear, HostWeight};
use crate::cuda::kernels::{DevPtr, LinearShape, Ops};
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use cudarc::driver::CudaStream;
use genai_frontend::Linear;
use genai_onnx::OnnxModel;
use std::sync::Arc;

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
    /// Uploads a prepared layer.
    pub fn upload(stream: &Arc<CudaStream>, h: HostLinear) -> Result<Self, Error> {
        let weight = match h.weight {
            HostWeight::Dense { kernel, nk } => DevWeight::Dense {
                kernel,
                data: DevBuf::from_host(stream, &nk)?,
            },
            HostWeight::Int4 {
                packed,
                scales,
                zp_u8,
                zp_f32,
                block,
                int8,
            } => DevWeight::Int4 {
                packed: DevBuf::from_host(stream, &packed)?,
                scales: DevBuf::from_host(stream, &scales)?,
                zp_f32: zp_f32.map(|z| DevBuf::from_host(stream, &z)).transpose()?,
                zp_u8: zp_u8.map(|z| DevBuf::from_host(stream, &z)).transpose()?,
                block,
                int8,
            },
        };
        let bias = h.bias.map(|b| DevBuf::from_host(stream, &b)).transpose()?;
        Ok(DevLinear {
            weight,
            bias,
            k: h.k,
            n: h.n,
        })
    }

    /// Reads and uploads the plan's layer.
    pub fn load(stream: &Arc<CudaStream>, model: &OnnxModel, plan: &Linear) -> Result<Self, Error> {
        Self::upload(stream, HostLinear::load(model, plan)?)
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
        self.run_glu(ops, (x, ldx), (y, ldy), m, act, -1, scratch)
    }

    /// [`DevLinear::run`]; with `glu >= 0` the outputs are (gate, up) pairs and y gets
    /// `n / 2` values act(gate) * up (`glu` the activation).
    #[allow(clippy::too_many_arguments)]
    pub fn run_glu(
        &self,
        ops: &Ops<'_>,
        (x, ldx): (DevPtr, usize),
        (y, ldy): (DevPtr, usize),
        m: usize,
        act: i32,
        glu: i32,
        scratch: QuantScratch,
    ) -> Result<(), Error> {
        let shape = LinearShape {
            m,
            k: self.k,
            n: self.n,
            ldx,
            ldy,
            glu,
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
