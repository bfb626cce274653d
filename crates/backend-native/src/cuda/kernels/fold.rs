//! The skip-norm folded into the one-row dense GEMV that writes its delta (`gemv_decode_*fold*`
//! in kernels/gemv.cu, `norm_fold_tail` in kernels/prelude.cuh): a decode step's o and down
//! projections hand their output to the next norm inside the same launch — its last block adds
//! the row to the residual and normalises it, with the same bits as `skip_norm_f32` after the
//! GEMV — so a layer takes two launches fewer. Off unless `GENAI_BRIDGE_NORM_FOLD=1`: on the
//! H200 the one 128-thread block that runs the tail is slower than the launch it saves
//! (Llama-3-8B fp16 231 → 154 tok/s, Qwen2.5-0.5B 1,311 → 1,086; CUDA_NOTES round 11).

use super::{DEC_WARPS, DecodeGemv, DevPtr, LinearShape, OneRow, Ops, cfg, launch};
use crate::error::Error;

/// Set to `1` to fold the skip-norm into the GEMV before it (an A/B switch).
pub const NORM_FOLD_ENV: &str = "GENAI_BRIDGE_NORM_FOLD";

/// Widest row a fold takes: its last block keeps the row in shared memory (4 bytes a value), and
/// 16 KB per block still lets 8 blocks of 128 threads share an SM with room for L1.
pub(crate) const FOLD_MAX_WIDTH: usize = 4096;

/// Whether folding is on (`GENAI_BRIDGE_NORM_FOLD=1`).
pub(super) fn enabled_from_env() -> bool {
    std::env::var(NORM_FOLD_ENV).is_ok_and(|v| v == "1")
}

/// The skip-norm a fold applies after the GEMV: `resid += round(y)`, `out = round(norm(resid) *
/// weight (+ bias))` (rounded to `act`), as `Ops::skip_norm` with `write_sum`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct NormFold {
    pub resid: DevPtr,
    pub weight: DevPtr,
    /// 0: no bias.
    pub bias: DevPtr,
    pub out: DevPtr,
    pub eps: f32,
    pub rms: bool,
    pub act: i32,
    /// One `i32`, zero between launches (the last block resets it).
    pub ticket: DevPtr,
}

/// The folding entry of a dense linear kernel, walk or pipelined.
fn fold_kernel(kind: &str, pipe: bool) -> Option<&'static str> {
    Some(match (kind, pipe) {
        ("gemv_f32", false) => "gemv_decode_fold_f32",
        ("gemv_f16", false) => "gemv_decode_fold_f16",
        ("gemv_bf16", false) => "gemv_decode_fold_bf16",
        ("gemv_f32", true) => "gemv_decode_pipe_fold_f32",
        ("gemv_f16", true) => "gemv_decode_pipe_fold_f16",
        ("gemv_bf16", true) => "gemv_decode_pipe_fold_bf16",
        _ => return None,
    })
}

impl LinearShape {
    /// Whether a fold may follow this linear: one row of plain outputs no wider than
    /// [`FOLD_MAX_WIDTH`].
    fn foldable(&self) -> bool {
        self.m == 1 && self.glu < 0 && (1..=FOLD_MAX_WIDTH).contains(&self.n)
    }
}

impl Ops<'_> {
    /// Whether [`Ops::gemv_fold`] takes this linear here: folding on, the one-row kernels in
    /// use, a dense kernel with folding entries, a foldable shape.
    pub(crate) fn folds(&self, kind: &str, s: &LinearShape) -> bool {
        self.k.norm_fold
            && self.k.decode_gemv != DecodeGemv::Staged
            && fold_kernel(kind, false).is_some()
            && s.foldable()
    }

    /// y = x W (+ bias) for one row, then the skip-norm `fold` over y, in one launch, with the
    /// kernel and split the decode rule gives the GEMV alone (so y and the norm are the bits of
    /// the two launches).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemv_fold(
        &self,
        kind: &'static str,
        w: DevPtr,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
        fold: &NormFold,
    ) -> Result<(), Error> {
        let plan = self.one_row_plan(kind, &s);
        self.gemv_one_row_fold(kind, w, x, bias, y, s, act, plan, fold)
    }

    /// [`Ops::gemv_fold`] with the kernel and split `plan`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemv_one_row_fold(
        &self,
        kind: &'static str,
        w: DevPtr,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
        plan: OneRow,
        fold: &NormFold,
    ) -> Result<(), Error> {
        let entry = fold_kernel(kind, plan.pipe).filter(|_| s.foldable());
        let at = self.one_row_frame("folded one-row linear", entry, &s, plan)?;
        let values = u32::try_from(4 * s.n).map_err(|_| Error::Invalid {
            what: "folded one-row linear",
            why: format!("{} values", s.n),
        })?;
        let NormFold {
            resid,
            weight,
            bias: nbias,
            out,
            eps,
            rms,
            act: nact,
            ticket,
        } = *fold;
        let rms = i32::from(rms);
        launch!(
            self,
            at.f,
            cfg(at.grid, 32 * DEC_WARPS as u32, values),
            &w,
            &x,
            &bias,
            &y,
            &at.n,
            &at.k,
            &at.split,
            &act,
            &resid,
            &weight,
            &nbias,
            &out,
            &eps,
            &rms,
            &nact,
            &ticket
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_row_of_plain_outputs_up_to_the_limit_folds() {
        let one = |n, glu| LinearShape::one_row(n, 4096, glu);
        assert!(one(4096, -1).foldable());
        assert!(one(896, -1).foldable());
        assert!(!one(4097, -1).foldable());
        assert!(!one(8192, -1).foldable());
        assert!(!one(4096, 0).foldable());
        assert!(
            !LinearShape {
                m: 2,
                ..one(896, -1)
            }
            .foldable()
        );
    }

    #[test]
    fn every_dense_kind_has_both_folding_entries_in_the_gemv_family() {
        let gemv = crate::cuda::compile::family("gemv").expect("the gemv family");
        for kind in ["gemv_f32", "gemv_f16", "gemv_bf16"] {
            for pipe in [false, true] {
                let entry = fold_kernel(kind, pipe).expect("a folding entry");
                assert!(gemv.symbols.contains(&entry), "{entry}");
                assert_eq!(entry.contains("_pipe_"), pipe, "{entry}");
            }
        }
        assert_eq!(fold_kernel("gemv_int4_f32", false), None);
    }
}
