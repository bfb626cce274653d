//! The kernels bound to a stream ([`Ops`], the receiver of every launch wrapper) and the
//! multi-row dense linear launch (`gemv_*`), which hands one row to `gemv_one_row.rs`, with
//! the buffers of a dense linear ([`DenseLinear`]) checked against its shape.

use super::registry::Kernels;
use super::shape::{LinearShape, weight_bytes};
use crate::cuda::launch::{cfg, launch};
use crate::cuda::memory::DevPtr;
use crate::cuda::span::{DevSpan, need_opt};
use crate::error::Error;
use cudarc::driver::CudaStream;

/// The kernels bound to a stream: what every launch wrapper (`impl Ops` in `kernels/*.rs`,
/// `blas.rs`) launches on. The pager and the cuBLAS handle of a pass are above this layer
/// (`pass.rs`).
pub(crate) struct Ops<'a> {
    pub k: &'a Kernels,
    pub stream: &'a CudaStream,
    /// Launch with programmatic stream serialization (see `pdl_enter` in
    /// kernels/prelude.cuh): each kernel may start while the one before it finishes.
    pub pdl: bool,
}

/// The buffers of one dense linear: the weight `[n, k]` of the kernel's type (as bytes), x
/// `[m, ldx]`, the bias `[n]` if any, y `[m, ldy]` (`LinearShape`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DenseLinear<'a> {
    pub w: DevSpan<'a, u8>,
    pub x: DevSpan<'a, f32>,
    pub bias: Option<DevSpan<'a, f32>>,
    pub y: DevSpan<'a, f32>,
}

impl DenseLinear<'_> {
    /// The addresses (w, x, bias or 0, y), each checked to hold what `kernel` reads or writes
    /// over `s` with weights of `weight_bytes` bytes.
    pub(crate) fn check(
        &self,
        kernel: &'static str,
        weight_bytes: usize,
        s: &LinearShape,
    ) -> Result<(DevPtr, DevPtr, DevPtr, DevPtr), Error> {
        Ok((
            self.w.need(kernel, "w", s.n * s.k * weight_bytes)?,
            self.x.need(kernel, "x", s.x_extent())?,
            need_opt(self.bias, kernel, "bias", s.n)?,
            self.y.need(kernel, "y", s.y_extent())?,
        ))
    }
}

impl Ops<'_> {
    /// Dense linear; `kind` is the weight's kernel (`gemv_f32`, `gemv_f16`, `gemv_bf16`).
    pub fn gemv(
        &self,
        kind: &'static str,
        d: &DenseLinear<'_>,
        s: LinearShape,
        act: i32,
    ) -> Result<(), Error> {
        if s.m == 1 {
            // gemv_one_row checks the shape itself.
            let plan = self.k.one_row_plan(kind, &s);
            return self.gemv_one_row(kind, d, s, act, plan);
        }
        let (m, k, n, ldx, ldy, split) = s.check()?;
        let (w, x, bias, y) = d.check(kind, weight_bytes(kind), &s)?;
        let f = self.k.get(kind)?;
        let shared = s.stage_f32(s.k.next_multiple_of(8));
        launch!(
            self,
            f,
            cfg(s.grid()?, 256, shared),
            &w,
            &x,
            &ldx,
            &bias,
            &y,
            &ldy,
            &n,
            &k,
            &m,
            &split,
            &s.glu,
            &act
        )
    }
}
