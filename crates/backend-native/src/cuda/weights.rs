//! Linear layers on the device: each layer's image (`host.rs`) lives in device memory
//! (resident) or in page-locked host memory, copied by the pager into its fixed device slot
//! before every use (streamed); the launch reads the parts at fixed offsets from that base.

use crate::cuda::host::{Form, HostLinear, Image, Parts};
use crate::cuda::kernels::{DenseLinear, Int4Fp32, Int4Linear, LinearShape};
use crate::cuda::kernels::{GemmType, HalfCopy, Halves};
use crate::cuda::memory::DevBuf;
use crate::cuda::memory::DevPtr;
use crate::cuda::pager::Pager;
use crate::cuda::pass::Pass;
use crate::cuda::span::DevSpan;
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
    /// Bytes of the image (what is uploaded, or streamed by the pager).
    bytes: usize,
    home: Home,
}

/// x in the other forms the kernels read: scratch for the int4 kernels' int8 activations (`qa`
/// `[rows, kp]` and `sa` `[rows, blocks]`), and the half copies around a prompt GEMM (`halves`: x rounded to 16 bits by the kernel that wrote it, and where
/// the GEMM's epilogue writes y so for the GEMM after it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct XForms<'a> {
    pub qa: DevSpan<'a, i8>,
    pub sa: DevSpan<'a, f32>,
    pub halves: Halves,
}

/// What a linear reads and writes: x `[m, k]` with rows `ldx` apart, y with rows `ldy` apart.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinearIo<'a> {
    pub x: DevSpan<'a, f32>,
    pub ldx: usize,
    pub y: DevSpan<'a, f32>,
    pub ldy: usize,
}

impl DevLinear {
    /// A prepared layer, not placed yet, keeping f16 scales where `half_scales` and the layer
    /// suit them (`CudaTuning::int4_half_scales`).
    pub fn prepare(h: HostLinear, half_scales: bool) -> Self {
        Self::from_image(h.into_image_with(half_scales))
    }

    /// A layer of this image, not placed yet.
    fn from_image(image: Image) -> Self {
        let Image {
            bytes,
            form,
            parts,
            k,
            n,
        } = image;
        DevLinear {
            form,
            parts,
            k,
            n,
            bytes: bytes.len(),
            home: Home::Pending(bytes),
        }
    }

    /// Reads and prepares the plan's layer ([`DevLinear::prepare`]).
    pub fn read(model: &OnnxModel, plan: &Linear, half_scales: bool) -> Result<Self, Error> {
        Ok(Self::prepare(HostLinear::load(model, plan)?, half_scales))
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

    /// Bytes of the image (uploaded once, or streamed by the pager every step).
    pub fn weight_bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes one decode step (one row) reads of the layer: the image of a dense layer; of an
    /// int4 one the packed data, the scales (f16 where the image keeps them: the tensor-core
    /// kernel reads those; else f32), the bias and the zero points of its path (u8 for
    /// CompInt8, f32 for CompFp32; the image carries both where the model has u8 ones).
    pub fn step_bytes(&self) -> usize {
        let Form::Int4 { block, int8, .. } = self.form else {
            return self.bytes;
        };
        let blocks = self.n * self.k.div_ceil(block);
        let zero_points = if int8 {
            self.parts.zp_u8.map_or(0, |_| blocks)
        } else {
            self.parts.zp_f32.map_or(0, |_| blocks * 4)
        };
        let bias = self.parts.bias.map_or(0, |_| self.n * 4);
        let scale = if self.parts.scales_f16.is_some() {
            2
        } else {
            4
        };
        blocks * block / 2 + blocks * scale + zero_points + bias
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

    /// The image's values of `T` from byte `offset` (a part's, if it has one) to its end, at
    /// the address `at` gives for that offset.
    ///
    /// # Safety
    /// `at` must give the device address of a byte offset of this layer's image while the
    /// image is in place (resident, or in the slot the pager filled for this pass) for the
    /// span's use (what [`DevLinear::placed`] hands out).
    unsafe fn part<T>(
        &self,
        at: &dyn Fn(Option<usize>) -> DevPtr,
        offset: Option<usize>,
    ) -> Option<DevSpan<'_, T>> {
        let offset = offset?;
        let values = self.bytes.saturating_sub(offset) / std::mem::size_of::<T>();
        // SAFETY: the caller's guarantee; the image holds `bytes` bytes from its base.
        Some(unsafe { DevSpan::from_raw(at(Some(offset)), values) })
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
    pub fn run(
        &self,
        ops: &Pass<'_>,
        io: LinearIo<'_>,
        m: usize,
        act: i32,
        forms: XForms<'_>,
    ) -> Result<Option<HalfCopy>, Error> {
        self.run_glu(ops, io, m, act, -1, forms)
    }

    /// [`DevLinear::run`]; with `glu >= 0` the outputs are (gate, up) pairs and y gets
    /// `n / 2` values act(gate) * up (`glu` the activation). Returns y's half copy where a GEMM
    /// epilogue wrote it (`XForms::halves`).
    pub fn run_glu(
        &self,
        ops: &Pass<'_>,
        io: LinearIo<'_>,
        m: usize,
        act: i32,
        glu: i32,
        forms: XForms<'_>,
    ) -> Result<Option<HalfCopy>, Error> {
        let LinearIo {
            x: x_span,
            ldx,
            y: y_span,
            ldy,
        } = io;
        let shape = LinearShape {
            m,
            k: self.k,
            n: self.n,
            ldx,
            ldy,
            glu,
        };
        self.placed(ops, |at| {
            // SAFETY (each `part` below): `placed` hands out the addresses of the image's parts
            // while the image is in place (resident, or in its acquired slot) for this call.
            let bias = unsafe { self.part(at, self.parts.bias) };
            let main = unsafe { self.part(at, Some(self.parts.main)) }.ok_or(Error::Invalid {
                what: "linear layer",
                why: "no weight part".into(),
            })?;
            let int4 = |zp: Option<usize>| -> Result<Int4Linear<'_>, Error> {
                Ok(Int4Linear {
                    packed: main,
                    // SAFETY: as above.
                    scales: unsafe { self.part(at, self.parts.scales) }.ok_or(Error::Invalid {
                        what: "int4 layer",
                        why: "no scales in its image".into(),
                    })?,
                    // SAFETY: as above.
                    scales_f16: unsafe { self.part(at, self.parts.scales_f16) },
                    // SAFETY: as above.
                    zp: unsafe { self.part(at, zp) },
                    x: x_span,
                    bias,
                    y: y_span,
                })
            };
            match self.form {
                Form::Dense { kernel } => {
                    let d = DenseLinear {
                        w: main,
                        x: x_span,
                        bias,
                        y: y_span,
                    };
                    ops.dense(ops.blas, kernel, &d, shape, act, forms.halves)
                }
                Form::Int4 {
                    block, int8: true, ..
                } => {
                    let l = int4(self.parts.zp_u8)?;
                    let scratch = (forms.qa, forms.sa);
                    ops.gemv_int4_i8(&l, block, scratch, shape, act)
                        .map(|()| None)
                }
                Form::Int4 {
                    block,
                    int8: false,
                    prompt,
                    integral_zp,
                } => {
                    let l = int4(self.parts.zp_f32)?;
                    let form = Int4Fp32 { block, integral_zp };
                    ops.int4_fp32(ops.blas, &l, form, prompt, shape, act, forms.halves)
                }
            }
        })
    }

    /// The dense kernel and one-row shape of this layer, or `None` for an int4 one (the plan
    /// of a one-row launch depends on (k, n) only, not on a GLU).
    pub fn one_row_dense(&self) -> Option<(&'static str, LinearShape)> {
        match self.form {
            Form::Dense { kernel } => Some((kernel, LinearShape::one_row(self.n, self.k, -1))),
            Form::Int4 { .. } => None,
        }
    }

    /// The type of the GEMM `m` rows of this layer run here, if they run through one (as
    /// `Ops::dense` and `Ops::int4_fp32` choose): what a half copy of its x should hold.
    pub fn prompt_gemm(&self, ops: &Pass<'_>, m: usize) -> Option<GemmType> {
        match self.form {
            Form::Dense { kernel } => ops.gemm_blas(m, false).and(GemmType::of(kernel)),
            Form::Int4 {
                int8: false,
                prompt,
                ..
            } => ops.gemm_blas(m, true).map(|_| prompt),
            Form::Int4 { int8: true, .. } => None,
        }
    }

    /// Whether the layer adds a bias.
    pub fn has_bias(&self) -> bool {
        self.parts.bias.is_some()
    }

    /// Runs `launch` with the layer's weights in place (a streamed layer acquired from the
    /// pager before and released after), handing it the device address of a part's offset
    /// (0 for an absent part).
    fn placed<T>(
        &self,
        ops: &Pass<'_>,
        launch: impl FnOnce(&dyn Fn(Option<usize>) -> DevPtr) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let index = self.streamed_index();
        if let Some(j) = index {
            ops.acquire(j)?;
        }
        let base = self.base()?;
        let out = launch(&|offset: Option<usize>| offset.map_or(0, |o| base + o as u64))?;
        if let Some(j) = index {
            ops.release(j)?;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::DevLinear;
    use crate::cuda::host::{HostLinear, HostWeight};
    use crate::cuda::kernels::GemmType;

    /// The layer with f32 scales only (`GENAI_BRIDGE_INT4_SCALES=f32`).
    fn int4(n: usize, k: usize, int8: bool, zero_points: bool) -> DevLinear {
        DevLinear::from_image(host_int4(n, k, int8, zero_points).into_image_with(false))
    }

    fn host_int4(n: usize, k: usize, int8: bool, zero_points: bool) -> HostLinear {
        let (block, nb) = (32, k.div_ceil(32));
        HostLinear {
            weight: HostWeight::Int4 {
                packed: vec![0x21; n * nb * block / 2],
                scales: vec![0.5; n * nb],
                zp_u8: zero_points.then(|| vec![8; n * nb]),
                zp_f32: zero_points.then(|| vec![8.0; n * nb]),
                block,
                int8,
                prompt: GemmType::F16,
            },
            bias: Some(vec![0.0; n]),
            k,
            n,
        }
    }

    #[test]
    fn a_step_reads_the_parts_its_one_row_kernel_reads() {
        let (n, k) = (64, 256);
        let (blocks, packed, bias) = (n * k / 32, n * k / 2, n * 4);
        // CompFp32 reads f32 scales and f32 zero points, CompInt8 f32 scales and u8 ones.
        assert_eq!(
            int4(n, k, false, true).step_bytes(),
            packed + blocks * 8 + bias
        );
        assert_eq!(
            int4(n, k, true, true).step_bytes(),
            packed + blocks * 5 + bias
        );
        assert_eq!(
            int4(n, k, false, false).step_bytes(),
            packed + blocks * 4 + bias
        );
        // The image holds both kinds of zero points (and alignment padding): more than a step.
        let layer = int4(n, k, false, true);
        assert!(layer.weight_bytes() > layer.step_bytes());
        // Where the image keeps the f16 scales, a step reads those instead of the f32 ones.
        let half = |zero_points| {
            let image = host_int4(n, k, false, zero_points).into_image_with(true);
            DevLinear::from_image(image).step_bytes()
        };
        assert_eq!(half(false), packed + blocks * 2 + bias);
        assert_eq!(half(true), packed + blocks * 6 + bias);
    }
}
