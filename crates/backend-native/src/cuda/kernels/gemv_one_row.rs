//! The one-row dense linear launch (`gemv_decode_*`, `gemv_decode_pipe_*` or
//! `gemv_decode_shared_*`) with the plan `plans.rs` gives it, and the frame every one-row
//! launch shares (entry, grid, kernel ints).

use super::one_row::OneRow;
use super::ops::{DenseLinear, Ops};
use super::shape::{DEC_WARPS, LinearShape, weight_bytes};
use crate::cuda::launch::{cfg, int, launch};
use crate::error::Error;
use cudarc::driver::CudaFunction;

impl Ops<'_> {
    /// One row of a dense linear through the entry `plan.via` names (`gemv_decode_*`,
    /// `gemv_decode_pipe_*` or `gemv_decode_shared_*`) with `plan.split` warps per column pair
    /// (1, 2 or 4; [`Kernels::one_row_plan`] gives the rule's).
    pub(crate) fn gemv_one_row(
        &self,
        kind: &'static str,
        d: &DenseLinear<'_>,
        s: LinearShape,
        act: i32,
        plan: OneRow,
    ) -> Result<(), Error> {
        let at = self.one_row_frame("one-row linear", Some(plan.kernel(kind)), &s, plan)?;
        let (w, x, bias, y) = d.check(plan.kernel(kind), weight_bytes(kind), &s)?;
        let shared = plan.shared_bytes(kind, &s);
        if shared > self.k.shared_limit() {
            return Err(Error::Invalid {
                what: "one-row linear",
                why: format!("{s:?} with {plan:?} takes {shared} bytes of shared memory"),
            });
        }
        launch!(
            self,
            at.f,
            cfg(at.grid, 32 * DEC_WARPS as u32, shared as u32),
            &w,
            &x,
            &bias,
            &y,
            &at.n,
            &at.k,
            &at.split,
            &s.glu,
            &act
        )
    }
}

/// What every one-row dense launch passes besides its buffers: the entry, the grid, and
/// (n, k, split) as kernel ints.
pub(crate) struct OneRowFrame<'a> {
    pub f: &'a CudaFunction,
    pub grid: (u32, u32, u32),
    pub n: i32,
    pub k: i32,
    pub split: i32,
}

impl<'a> Ops<'a> {
    /// The frame of one row of `s` through `entry` with `plan`: an error naming `what` when
    /// there is no entry (the family has none for this plan or shape), the shape is not one
    /// valid row, or the split does not divide a block's warps.
    pub(crate) fn one_row_frame(
        &self,
        what: &'static str,
        entry: Option<&'static str>,
        s: &LinearShape,
        plan: OneRow,
    ) -> Result<OneRowFrame<'a>, Error> {
        let (_, k, n, _, _, _) = s.check()?;
        let entry = entry.filter(|_| s.m == 1 && DEC_WARPS.is_multiple_of(plan.split));
        let Some(entry) = entry else {
            return Err(Error::Invalid {
                what,
                why: format!("{s:?} with {plan:?}"),
            });
        };
        Ok(OneRowFrame {
            f: self.k.get(entry)?,
            grid: s.decode_grid(plan.split)?,
            n,
            k,
            split: int("split", plan.split)?,
        })
    }
}
