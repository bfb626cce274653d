//! The RMS norm folded into the one-row dense linears after it (`kernels/gemv_norm.cu`): the
//! linear reads the residual, the delta to add and the norm's weight, and applies the norm's
//! scale to its sums, so a decode step has no norm launch (`GENAI_BRIDGE_NORM_FOLD`).

use super::{DEC_WARPS, DevPtr, Error, Kernels, LinearShape, OneRow, Ops, RowKernel, cfg, launch};

/// `0` turns the fold off (an A/B switch: norm launches as before).
const NORM_FOLD_ENV: &str = "GENAI_BRIDGE_NORM_FOLD";

/// The norm a folded linear applies to its input row: `s = x + round(delta)` (`delta` 0: none),
/// the linear's input `s * r * weight` with `r = 1 / sqrt(mean(s²) + eps)`, and `round(s)`
/// written to `x_out` (0: not written; never `x`, which every block reads).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NormIn {
    pub x: DevPtr,
    pub delta: DevPtr,
    pub weight: DevPtr,
    pub x_out: DevPtr,
    pub eps: f32,
    /// The model's activation precision (0 f32, 1 f16, 2 bf16): rounds delta and `x_out`.
    pub act: i32,
}

impl NormIn {
    /// Why a launch over rows of `k` values cannot take this norm: no residual or weight, an
    /// unknown precision, or an `x_out` row overlapping the residual or the delta (block 0
    /// writes it while the other blocks still read those).
    fn check(&self, k: usize) -> Result<(), &'static str> {
        let bytes = 4 * k as u64;
        let overlaps = |a: DevPtr, b: DevPtr| a != 0 && b != 0 && a < b + bytes && b < a + bytes;
        if self.x == 0 || self.weight == 0 {
            Err("needs a residual row and a weight")
        } else if !(0..=2).contains(&self.act) {
            Err("the activation precision is 0 (f32), 1 (f16) or 2 (bf16)")
        } else if overlaps(self.x_out, self.x) || overlaps(self.x_out, self.delta) {
            Err("the residual handed on may not overlap the residual or the delta read")
        } else {
            Ok(())
        }
    }
}

/// The folded entry of a dense linear kernel `kind` for a plan's entry.
pub(crate) fn norm_kernel(kind: &'static str, via: RowKernel) -> Option<&'static str> {
    Some(match (via, kind) {
        (RowKernel::Walk, "gemv_f32") => "gemv_decode_norm_f32",
        (RowKernel::Walk, "gemv_f16") => "gemv_decode_norm_f16",
        (RowKernel::Walk, "gemv_bf16") => "gemv_decode_norm_bf16",
        (RowKernel::Pipe, "gemv_f32") => "gemv_decode_norm_pipe_f32",
        (RowKernel::Pipe, "gemv_f16") => "gemv_decode_norm_pipe_f16",
        (RowKernel::Pipe, "gemv_bf16") => "gemv_decode_norm_pipe_bf16",
        (RowKernel::Shared, "gemv_f32") => "gemv_decode_norm_shared_f32",
        (RowKernel::Shared, "gemv_f16") => "gemv_decode_norm_shared_f16",
        (RowKernel::Shared, "gemv_bf16") => "gemv_decode_norm_shared_bf16",
        _ => return None,
    })
}

/// Whether decode steps fold their RMS norms where they can (unless [`NORM_FOLD_ENV`] is `0`).
pub(super) fn fold_from_env() -> bool {
    std::env::var(NORM_FOLD_ENV).map_or(true, |v| v != "0")
}

impl Kernels {
    /// Whether a one-row dense linear of `kind` over `s` can read its input through a folded
    /// norm here: the fold is on, the rule gives it an entry with a folded twin, and the twin
    /// is loaded.
    pub(crate) fn folds(&self, kind: &'static str, s: &LinearShape) -> bool {
        self.norm_fold
            && s.m == 1
            && self.decode_gemv != super::DecodeGemv::Staged
            && norm_kernel(kind, self.one_row_plan(kind, s).via)
                .is_some_and(|e| self.get(e).is_ok())
    }
}

impl Ops<'_> {
    /// One row of a dense linear whose input is `norm` applied on the fly (see [`NormIn`]),
    /// through the folded twin of the entry `plan.via` names, at `plan.split`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemv_one_row_norm(
        &self,
        kind: &'static str,
        w: DevPtr,
        norm: &NormIn,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
        plan: OneRow,
    ) -> Result<(), Error> {
        if let Err(why) = norm.check(s.k) {
            return Err(Error::Invalid {
                what: "folded norm",
                why: why.into(),
            });
        }
        let entry = norm_kernel(kind, plan.via);
        let at = self.one_row_frame("folded-norm linear", entry, &s, plan)?;
        let shared = plan.shared_bytes(kind, &s);
        if shared > self.k.shared_limit() {
            return Err(Error::Invalid {
                what: "folded-norm linear",
                why: format!("{s:?} with {plan:?} takes {shared} bytes of shared memory"),
            });
        }
        launch!(
            self,
            at.f,
            cfg(at.grid, 32 * DEC_WARPS as u32, shared as u32),
            &w,
            &norm.x,
            &norm.delta,
            &norm.weight,
            &norm.x_out,
            &norm.eps,
            &norm.act,
            &bias,
            &y,
            &at.n,
            &at.k,
            &at.split,
            &s.glu,
            &act
        )
    }

    /// [`Ops::gemv_one_row_norm`] at the plan the decode rule gives `kind` over `s`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dense_norm(
        &self,
        kind: &'static str,
        w: DevPtr,
        norm: &NormIn,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
    ) -> Result<(), Error> {
        let plan = self.k.one_row_plan(kind, &s);
        self.gemv_one_row_norm(kind, w, norm, bias, y, s, act, plan)
    }
}

#[cfg(test)]
mod tests {
    use super::{NormIn, RowKernel, norm_kernel};

    #[test]
    fn every_one_row_entry_has_a_folded_twin() {
        for kind in ["gemv_f32", "gemv_f16", "gemv_bf16"] {
            for via in [RowKernel::Walk, RowKernel::Pipe, RowKernel::Shared] {
                let twin = norm_kernel(kind, via).expect("a twin");
                let plain = crate::cuda::kernels::OneRow { via, split: 1 }.kernel(kind);
                // gemv_decode[_pipe|_shared]_T -> gemv_decode_norm[_pipe|_shared]_T
                assert_eq!(twin.replacen("gemv_decode_norm", "gemv_decode", 1), plain);
            }
        }
        assert_eq!(norm_kernel("gemv_int4_f32", RowKernel::Walk), None);
    }

    #[test]
    fn a_residual_handed_on_over_what_is_read_is_refused() {
        let norm = NormIn {
            x: 0x1000,
            delta: 0x2000,
            weight: 0x3000,
            x_out: 0x4000,
            eps: 1e-6,
            act: 1,
        };
        // 256 values: 1 KB rows.
        assert!(norm.check(256).is_ok());
        assert!(NormIn { x_out: 0, ..norm }.check(256).is_ok());
        assert!(NormIn { delta: 0, ..norm }.check(256).is_ok());
        assert!(
            NormIn {
                x_out: 0x1000,
                ..norm
            }
            .check(256)
            .is_err()
        );
        assert!(
            NormIn {
                x_out: 0x13fc,
                ..norm
            }
            .check(256)
            .is_err()
        );
        assert!(
            NormIn {
                x_out: 0x1400,
                ..norm
            }
            .check(256)
            .is_ok()
        );
        assert!(
            NormIn {
                x_out: 0x1c04,
                ..norm
            }
            .check(256)
            .is_err()
        );
        assert!(NormIn { x: 0, ..norm }.check(256).is_err());
        assert!(NormIn { weight: 0, ..norm }.check(256).is_err());
        assert!(NormIn { act: 3, ..norm }.check(256).is_err());
    }

    #[test]
    fn every_twin_is_a_symbol_of_its_family() {
        let family = crate::cuda::compile::SOURCES
            .iter()
            .find(|s| s.family == "gemv_norm")
            .expect("the gemv_norm family");
        for kind in ["gemv_f32", "gemv_f16", "gemv_bf16"] {
            for via in [RowKernel::Walk, RowKernel::Pipe, RowKernel::Shared] {
                let twin = norm_kernel(kind, via).expect("a twin");
                assert!(family.symbols.contains(&twin), "{twin}");
            }
        }
    }
}
