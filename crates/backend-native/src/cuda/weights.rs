//! Linear layers on the device: each layer's image (`host.rs`) lives in device memory
//! (resident) or in page-locked host memory, copied by the pager into its fixed device slot
//! before every use (streamed); the launch reads the parts at fixed offsets from that base.

use crate::cuda::host::{Form, HostLinear, Image, Parts};
use crate::cuda::kernels::{DevPtr, LinearShape, Ops};
use crate::cuda::memory::DevBuf;
use crate::cuda::pager::Pager;
use crate::error::Error;
use cudarc::driver::CudaStream;
use genai_frontend::Linear;
use genai_onnx::OnnxModel;
use std::sync::Arc;

/// Where a layer's image is.
enum Home {
    /// Built on the host, not placed yet.
    Pending(Vec<u8>),
    /// In device memory.
    Device(DevBuf<u8>),
    /// Streamed weight `index` (in step order), read from its slot at `base`.
    Streamed { index: usize, base: DevPtr },
}

/// A linear layer on the device.
pub(crate) struct DevLinear {
    pub form: Form,
    parts: Parts,
    pub k: usize,
    pub n: usize,
    /// Bytes of the image (what one call reads).
    bytes: usize,
    home: Home,
}

/// Scratch for int8 activations: `qa` `[rows, kp]` and `sa` `[rows, blocks]`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QuantScratch {
    pub qa: DevPtr,
    pub sa: DevPtr,
}

impl DevLinear {
    /// A prepared layer, not placed yet.
    pub fn prepare(h: HostLinear) -> Self {
        let Image {
            bytes,
            form,
            parts,
            k,
            n,
        } = h.into_image();
        DevLinear {
            form,
            parts,
            k,
            n,
            bytes: bytes.len(),
            home: Home::Pending(bytes),
        }
    }

    /// Reads and prepares the plan's layer.
    pub fn read(model: &OnnxModel, plan: &Linear) -> Result<Self, Error> {
        Ok(Self::prepare(HostLinear::load(model, plan)?))
    }

    /// Copies a pending image to device memory (no-op once placed).
    pub fn upload(&mut self, stream: &Arc<CudaStream>) -> Result<(), Error> {
        if let Home::Pending(bytes) = &self.home {
            self.home = Home::Device(DevBuf::from_host(stream, bytes)?);
        }
        Ok(())
    }

    /// Hands a pending image to the pager: the layer becomes its next streamed weight, read
    /// from that weight's slot.
    pub fn stream_into(&mut self, pager: &mut Pager) -> Result<(), Error> {
        let Home::Pending(bytes) = &self.home else {
            return Err(Error::Invalid {
                what: "pager",
                why: "only a layer not yet placed can be streamed".into(),
            });
        };
        let (index, base) = pager.add(bytes)?;
        self.home = Home::Streamed { index, base };
        Ok(())
    }

    /// The streamed index, for a streamed layer.
    pub fn streamed_index(&self) -> Option<usize> {
        match self.home {
            Home::Streamed { index, .. } => Some(index),
            _ => None,
        }
    }

    /// Bytes of weight data read per call.
    pub fn weight_bytes(&self) -> usize {
        self.bytes
    }

    fn base(&self) -> Result<DevPtr, Error> {
        match &self.home {
            Home::Device(buf) => Ok(buf.ptr),
            Home::Streamed { base, .. } => Ok(*base),
            Home::Pending(_) => Err(Error::Invalid {
                what: "linear layer",
                why: "used before its weights were placed on the device".into(),
            }),
        }
    }

    /// Int8 scratch this layer needs per row: (quantized values, block scales).
    pub fn quant_scratch(&self) -> (usize, usize) {
        match self.form {
            Form::Int4 {
                block, int8: true, ..
            } => {
                let nb = self.k.div_ceil(block);
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
        let index = self.streamed_index();
        if let Some(j) = index {
            ops.acquire(j)?;
        }
        let base = self.base()?;
        let at = |offset: Option<usize>| offset.map_or(0, |o| base + o as u64);
        let bias = at(self.parts.bias);
        let main = base + self.parts.main as u64;
        let scales = at(self.parts.scales);
        match self.form {
            Form::Dense { kernel } => ops.dense(kernel, main, x, bias, y, shape, act)?,
            Form::Int4 {
                block, int8: true, ..
            } => ops.gemv_int4_i8(
                (main, scales, at(self.parts.zp_u8)),
                block,
                x,
                (scratch.qa, scratch.sa),
                bias,
                y,
                shape,
                act,
            )?,
            Form::Int4 {
                block,
                int8: false,
                prompt,
                integral_zp,
            } => ops.int4_fp32(
                (main, scales, at(self.parts.zp_f32)),
                (block, integral_zp),
                prompt,
                x,
                bias,
                y,
                shape,
                act,
            )?,
        }
        if let Some(j) = index {
            ops.release(j)?;
        }
        Ok(())
    }
}
