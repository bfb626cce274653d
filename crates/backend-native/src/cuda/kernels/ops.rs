//! The kernels bound to a stream ([`Ops`], the receiver of every launch wrapper) and the
//! multi-row dense linear launch (`gemv_*`), which hands one row to `gemv_one_row.rs`.

use super::registry::Kernels;
use super::shape::LinearShape;
use crate::cuda::launch::{cfg, launch};
use crate::cuda::memory::DevPtr;
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

impl Ops<'_> {
    /// Dense linear; `kind` is the weight's kernel (`gemv_f32`, `gemv_f16`, `gemv_bf16`).
    #[allow(clippy::too_many_arguments)]
    pub fn gemv(
        &self,
        kind: &'static str,
        w: DevPtr,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
    ) -> Result<(), Error> {
        if s.m == 1 {
            // gemv_one_row checks the shape itself.
            let plan = self.k.one_row_plan(kind, &s);
            return self.gemv_one_row(kind, w, x, bias, y, s, act, plan);
        }
        let (m, k, n, ldx, ldy, split) = s.check()?;
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
