//! A decode step's RMSNorm spread over the one-row dense GEMVs around it (`SpreadNorm` in
//! kernels/gemv.cu), so it needs no launch of its own and no block waits for the others: the
//! producer (o or down projection) adds its outputs to the residual and writes one partial sum
//! of squares per block; every consumer (qkv, gate/up, lm_head) sums the partials in one fixed
//! order and normalises its input as it reads it. Its sums run in an order of their own, so the
//! logits differ from the two-launch path within rounding (`cuda_kernels` checks the chain
//! against the CPU). Off unless `GENAI_BRIDGE_NORM_SPREAD=1` (every consumer block sums the
//! partials) or `=2` (the producer's last block sums them once, by a ticket, and consumers read
//! that one value: the same bits); not yet measured on a GPU.

use super::{DEC_WARPS, DecodeGemv, DevPtr, LinearShape, Ops, cfg, int, launch};
use crate::error::Error;

/// Set to `1` or `2` to spread the decode step's RMSNorms over the GEMVs around them.
pub const NORM_SPREAD_ENV: &str = "GENAI_BRIDGE_NORM_SPREAD";

/// How a decode step's RMSNorms run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpreadMode {
    /// A launch of their own (or folded, `kernels/fold.rs`).
    Off,
    /// Spread; every consumer block sums the producer's partials.
    Partials,
    /// Spread; the producer's last block sums them into one value the consumers read.
    Total,
}

impl SpreadMode {
    pub(super) fn from_env() -> SpreadMode {
        match std::env::var(NORM_SPREAD_ENV).as_deref() {
            Ok("1") => SpreadMode::Partials,
            Ok("2") => SpreadMode::Total,
            _ => SpreadMode::Off,
        }
    }
}

/// The producer's side: `resid += round(y)` (rounded to `act`), y keeps the unrounded sums, and
/// one partial sum of squares per block lands in `partials`; with a `ticket` (one `i32`, zero
/// between launches; 0: none) their total follows them, after the last block's partial.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpreadOut {
    pub resid: DevPtr,
    pub partials: DevPtr,
    pub act: i32,
    pub ticket: DevPtr,
}

/// A consumer's side: its input x holds the producer's sums; it reads them as
/// `round(x * inv * weight (+ bias))` with `inv` from the producer's `parts` partials.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SpreadIn {
    pub weight: DevPtr,
    /// 0: no bias.
    pub bias: DevPtr,
    pub partials: DevPtr,
    pub parts: usize,
    pub eps: f32,
    pub act: i32,
}

/// The spread entry of a dense linear kernel: (producer, consumer), walk or pipelined.
fn spread_kernels(kind: &str, pipe: bool) -> Option<(&'static str, &'static str)> {
    Some(match (kind, pipe) {
        ("gemv_f32", false) => ("gemv_decode_spread_out_f32", "gemv_decode_spread_in_f32"),
        ("gemv_f16", false) => ("gemv_decode_spread_out_f16", "gemv_decode_spread_in_f16"),
        ("gemv_bf16", false) => ("gemv_decode_spread_out_bf16", "gemv_decode_spread_in_bf16"),
        ("gemv_f32", true) => (
            "gemv_decode_pipe_spread_out_f32",
            "gemv_decode_pipe_spread_in_f32",
        ),
        ("gemv_f16", true) => (
            "gemv_decode_pipe_spread_out_f16",
            "gemv_decode_pipe_spread_in_f16",
        ),
        ("gemv_bf16", true) => (
            "gemv_decode_pipe_spread_out_bf16",
            "gemv_decode_pipe_spread_in_bf16",
        ),
        _ => return None,
    })
}

impl Ops<'_> {
    /// Whether a one-row dense linear of `kind` and shape `s` may produce or consume a spread
    /// norm here: spreading on, the one-row kernels in use, one row.
    pub(crate) fn spreads(&self, kind: &str, s: &LinearShape) -> bool {
        self.k.norm_spread != SpreadMode::Off
            && self.k.decode_gemv != DecodeGemv::Staged
            && spread_kernels(kind, false).is_some()
            && s.m == 1
    }

    /// What a spread norm's producer of `kind` and shape `s`, writing to `partials`, gives its
    /// consumers to read: (address, values) — all its partials, or with `ticket` (the
    /// [`SpreadMode::Total`] mode) the one total after them. The ticket to hand the producer
    /// is `ticket` in that mode, else 0.
    pub(crate) fn spread_view(
        &self,
        kind: &'static str,
        s: &LinearShape,
        partials: DevPtr,
        ticket: DevPtr,
    ) -> ((DevPtr, usize), DevPtr) {
        let parts = self.spread_parts(kind, s);
        match self.k.norm_spread {
            SpreadMode::Total => ((partials + 4 * parts as u64, 1), ticket),
            _ => ((partials, parts), 0),
        }
    }

    /// The partial sums a producer of this shape writes: its blocks under the decode rule.
    pub(crate) fn spread_parts(&self, kind: &'static str, s: &LinearShape) -> usize {
        let plan = self.one_row_plan(kind, s);
        s.n.div_ceil(super::DEC_COLS)
            .div_ceil(DEC_WARPS / plan.split)
    }

    /// The frame of a spread launch: the producer's or a consumer's entry (a producer has no
    /// GLU) for this shape under the decode rule.
    fn spread_frame(
        &self,
        kind: &'static str,
        s: &LinearShape,
        producer: bool,
    ) -> Result<super::OneRowFrame<'_>, Error> {
        let plan = self.one_row_plan(kind, s);
        let entry = spread_kernels(kind, plan.pipe)
            .filter(|_| !producer || s.glu < 0)
            .map(|(out, input)| if producer { out } else { input });
        self.one_row_frame("spread-norm linear", entry, s, plan)
    }

    /// The producer: y = x W (+ bias) for one row, then the residual update and the partials.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemv_spread_out(
        &self,
        kind: &'static str,
        w: DevPtr,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
        out: &SpreadOut,
    ) -> Result<(), Error> {
        let at = self.spread_frame(kind, &s, true)?;
        let SpreadOut {
            resid,
            partials,
            act: nact,
            ticket,
        } = *out;
        launch!(
            self,
            at.f,
            cfg(at.grid, 32 * DEC_WARPS as u32, 0),
            &w,
            &x,
            &bias,
            &y,
            &at.n,
            &at.k,
            &at.split,
            &act,
            &resid,
            &partials,
            &nact,
            &ticket
        )
    }

    /// A consumer: y = norm(x) W (+ bias) for one row (x the producer's sums), with
    /// `LinearShape::glu` as [`Ops::gemv`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemv_spread_in(
        &self,
        kind: &'static str,
        w: DevPtr,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
        input: &SpreadIn,
    ) -> Result<(), Error> {
        let at = self.spread_frame(kind, &s, false)?;
        let SpreadIn {
            weight,
            bias: nbias,
            partials,
            parts,
            eps,
            act: nact,
        } = *input;
        let parts = int("partial sums", parts)?;
        launch!(
            self,
            at.f,
            cfg(at.grid, 32 * DEC_WARPS as u32, 0),
            &w,
            &x,
            &bias,
            &y,
            &at.n,
            &at.k,
            &at.split,
            &s.glu,
            &act,
            &weight,
            &nbias,
            &partials,
            &parts,
            &eps,
            &nact
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dense_kind_has_its_four_spread_entries_in_the_gemv_family() {
        let gemv = crate::cuda::compile::family("gemv").expect("the gemv family");
        for kind in ["gemv_f32", "gemv_f16", "gemv_bf16"] {
            for pipe in [false, true] {
                let (out, input) = spread_kernels(kind, pipe).expect("spread entries");
                for entry in [out, input] {
                    assert!(gemv.symbols.contains(&entry), "{entry}");
                }
                let suffix = kind.trim_start_matches("gemv_");
                assert!(out.ends_with(suffix) && input.ends_with(suffix));
                assert_eq!(out.contains("_pipe_"), pipe);
                assert_eq!(input.contains("_pipe_"), pipe);
            }
        }
        assert_eq!(spread_kernels("gemv_int4_f32", true), None);
    }
}
