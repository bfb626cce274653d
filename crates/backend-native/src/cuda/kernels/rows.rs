//! The launches of the per-row kernels: the embedding gather, the skip-norm (plain and split
//! for the int4 tensor-core GEMV), the rotary append of the two-launch attention, the gated
//! and plain activations, and the two-pass argmax.

use super::halves::HalfCopy;
use super::kv::KvCache;
use super::ops::Ops;
use crate::cuda::launch::{cfg, grid_dim, int, launch};
use crate::cuda::memory::DevPtr;
use crate::error::Error;

/// Blocks of the first argmax pass (and partials it leaves).
pub(crate) const ARGMAX_PARTS: usize = 128;

/// Threads of a norm block for rows of `width`: NORM_VALUES (8) values per thread in whole
/// warps, at most 1024 threads.
fn norm_threads(width: usize) -> Result<u32, Error> {
    if width == 0 || width > 8 * 1024 {
        return Err(Error::Invalid {
            what: "norm width",
            why: format!("{width} (1..=8192)"),
        });
    }
    Ok((width.div_ceil(8).div_ceil(32) * 32) as u32)
}

impl Ops<'_> {
    #[allow(clippy::too_many_arguments)]
    pub fn embedding(
        &self,
        table: DevPtr,
        positions: DevPtr,
        ids: DevPtr,
        step: DevPtr,
        x: DevPtr,
        (m, hidden, vocab): (usize, usize, usize),
        scale: Option<f32>,
        act: i32,
    ) -> Result<(), Error> {
        let (hidden, vocab) = (int("hidden", hidden)?, int("vocab", vocab)?);
        let (has_scale, scale) = (i32::from(scale.is_some()), scale.unwrap_or(1.0));
        let f = self.k.get("embedding_f32")?;
        let c = cfg((grid_dim("tokens", m)?, 1, 1), 256, 0);
        launch!(
            self, f, c, &table, &positions, &ids, &step, &x, &hidden, &vocab, &has_scale, &scale,
            &act
        )
    }

    /// `rows` rows of `width`, addressed `(r / per_row) * ld + (r % per_row) * width`.
    #[allow(clippy::too_many_arguments)]
    pub fn skip_norm(
        &self,
        x: DevPtr,
        delta: DevPtr,
        weight: DevPtr,
        bias: DevPtr,
        out: DevPtr,
        rows: (usize, usize, usize, usize),
        eps: f32,
        rms: bool,
        write_sum: bool,
        act: i32,
    ) -> Result<(), Error> {
        let norm = (eps, rms, write_sum, act);
        self.skip_norm_half(x, delta, (weight, bias), out, rows, norm, None)
    }

    /// [`Ops::skip_norm`], the output also written rounded to 16 bits into `half` (row r at
    /// `r * width`) where given: the copy the GEMMs after the norm read instead of casting it.
    #[allow(clippy::too_many_arguments)]
    pub fn skip_norm_half(
        &self,
        x: DevPtr,
        delta: DevPtr,
        (weight, bias): (DevPtr, DevPtr),
        out: DevPtr,
        (rows, width, per_row, ld): (usize, usize, usize, usize),
        (eps, rms, write_sum, act): (f32, bool, bool, i32),
        half: Option<HalfCopy>,
    ) -> Result<(), Error> {
        let threads = norm_threads(width)?;
        let (w, pr, ld) = (
            int("width", width)?,
            int("per_row", per_row)?,
            int("ld", ld)?,
        );
        let (rms, write_sum) = (i32::from(rms), i32::from(write_sum));
        let c = cfg((grid_dim("rows", rows)?, 1, 1), threads, 0);
        let Some(copy) = half else {
            let f = self.k.get("skip_norm_f32")?;
            return launch!(
                self, f, c, &x, &delta, &weight, &bias, &out, &w, &pr, &ld, &eps, &rms, &write_sum,
                &act
            );
        };
        let (half, half_bf) = HalfCopy::args(Some(copy));
        let f = self.k.get("skip_norm_half_f32")?;
        launch!(
            self, f, c, &x, &delta, &weight, &bias, &out, &w, &pr, &ld, &eps, &rms, &write_sum,
            &act, &half, &half_bf
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub fn rotary_append(
        &self,
        qkv: DevPtr,
        ld: usize,
        step: DevPtr,
        cos_sin: (DevPtr, DevPtr),
        (m, heads, kv_heads, hs): (usize, usize, usize, usize),
        (rotary_dim, interleaved): (usize, bool),
        cache: KvCache,
        act: i32,
    ) -> Result<(), Error> {
        let (k_cache, v_cache, cap, kv) = cache.args()?;
        let (ld, h, kvh, hs_i) = (
            int("ld", ld)?,
            int("heads", heads)?,
            int("kv_heads", kv_heads)?,
            int("head_size", hs)?,
        );
        let (rd, inter) = (int("rotary_dim", rotary_dim)?, i32::from(interleaved));
        let f = self.k.get("rotary_append_f32")?;
        let grid = (
            grid_dim("tokens", m)?,
            grid_dim("heads", heads + kv_heads)?,
            1,
        );
        let c = cfg(grid, 128, 0);
        let (cos, sin) = cos_sin;
        launch!(
            self, f, c, &qkv, &ld, &step, &cos, &sin, &h, &kvh, &hs_i, &rd, &inter, &k_cache,
            &v_cache, &cap, &act, &kv
        )
    }

    /// h `[rows, w]` = act(gate) * up over gu `[rows, 2w]`.
    pub fn gated(
        &self,
        gu: DevPtr,
        h: DevPtr,
        rows: usize,
        w: usize,
        kind: i32,
    ) -> Result<(), Error> {
        let total = rows * w;
        let (wi, ti) = (int("width", w)?, int("elements", total)?);
        let f = self.k.get("gated_f32")?;
        let blocks = grid_dim("elements", total.div_ceil(256).min(4096))?;
        launch!(
            self,
            f,
            cfg((blocks, 1, 1), 256, 0),
            &gu,
            &h,
            &wi,
            &ti,
            &kind
        )
    }

    /// x = act(x) over `total` values.
    pub fn activate(&self, x: DevPtr, total: usize, kind: i32) -> Result<(), Error> {
        let ti = int("elements", total)?;
        let f = self.k.get("activate_f32")?;
        let blocks = grid_dim("elements", total.div_ceil(256).min(4096))?;
        launch!(self, f, cfg((blocks, 1, 1), 256, 0), &x, &ti, &kind)
    }

    /// out[0] = argmax of `n` logits; `(pv, pi)` hold [`ARGMAX_PARTS`] partials.
    pub fn argmax(
        &self,
        logits: DevPtr,
        n: usize,
        (pv, pi): (DevPtr, DevPtr),
        out: DevPtr,
    ) -> Result<(), Error> {
        let (ni, parts) = (int("vocab", n)?, int("parts", ARGMAX_PARTS)?);
        let f = self.k.get("argmax_partial_f32")?;
        let grid = (ARGMAX_PARTS as u32, 1, 1);
        launch!(self, f, cfg(grid, 256, 0), &logits, &ni, &pv, &pi)?;
        let f = self.k.get("argmax_final_f32")?;
        launch!(self, f, cfg((1, 1, 1), 1024, 0), &pv, &pi, &parts, &out)
    }
}
