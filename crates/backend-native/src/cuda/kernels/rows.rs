//! The launches of the per-row kernels: the embedding gather, the skip-norm (plain and split
//! for the int4 tensor-core GEMV), the rotary append of the two-launch attention, the gated
//! and plain activations, and the two-pass argmax. Every buffer is a [`DevSpan`] checked against
//! what the launch's dimensions make its kernel read or write.

use super::halves::HalfCopy;
use super::kv::KvCache;
use super::ops::Ops;
use crate::cuda::launch::{cfg, grid_dim, int, launch};
use crate::cuda::span::{DevSpan, need_opt};
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

/// The embedding gather (`embedding_f32`): `x[t] = table[ids[t]] * scale (+ positions[step[0] +
/// t])` for the `m` tokens, rounded to `act`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Embedding<'a> {
    /// `[vocab, hidden]`.
    pub table: DevSpan<'a, f32>,
    /// `[positions, hidden]` learned position rows, if the model has them.
    pub positions: Option<DevSpan<'a, f32>>,
    pub ids: DevSpan<'a, i32>,
    pub step: DevSpan<'a, i32>,
    /// `[m, hidden]`.
    pub x: DevSpan<'a, f32>,
    pub m: usize,
    pub hidden: usize,
    pub vocab: usize,
    pub scale: Option<f32>,
    pub act: i32,
}

/// Rows a norm takes: `rows` rows of `width` values, row r at
/// `(r / per_row) * ld + (r % per_row) * width` (hidden rows: `per_row` 1, `ld` the width;
/// per-head rows inside the fused qkv rows: `per_row` the heads).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NormRows {
    pub rows: usize,
    pub width: usize,
    pub per_row: usize,
    pub ld: usize,
}

impl NormRows {
    /// Rows packed `width` apart.
    pub fn packed(rows: usize, width: usize) -> NormRows {
        NormRows {
            rows,
            width,
            per_row: 1,
            ld: width,
        }
    }

    /// Values from the first row's start through the last row's end, for the blocks a launch
    /// runs (`grid_dim` launches one block for zero rows).
    fn extent(&self) -> Result<usize, Error> {
        if self.per_row == 0 {
            return Err(Error::Invalid {
                what: "norm rows",
                why: "0 rows per ld".into(),
            });
        }
        let last = self.rows.max(1) - 1;
        Ok((last / self.per_row) * self.ld + (last % self.per_row) * self.width + self.width)
    }
}

/// One skip-norm (`skip_norm_f32`): `s = x + round(delta)`, `out = round(norm(s) * weight (+
/// bias))`, and `x = round(s)` with `write_sum`, over `rows` (`out` may be `x`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SkipNorm<'a> {
    pub x: DevSpan<'a, f32>,
    pub delta: Option<DevSpan<'a, f32>>,
    /// `[width]` each.
    pub weight: DevSpan<'a, f32>,
    pub bias: Option<DevSpan<'a, f32>>,
    pub out: DevSpan<'a, f32>,
    pub rows: NormRows,
    pub eps: f32,
    pub rms: bool,
    pub write_sum: bool,
    pub act: i32,
}

/// The rotary embedding and KV append of the two-launch attention (`rotary_append_f32`): the
/// `m` tokens' q and k heads in `qkv` (rows `ld` apart: q heads, k heads, v heads) rotated in
/// place at positions `step[0] + t`, their keys and values appended to the cache.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RotaryAppend<'a> {
    pub qkv: DevSpan<'a, f32>,
    pub ld: usize,
    pub step: DevSpan<'a, i32>,
    /// cos, sin caches (`[positions, rotary_dim / 2]`), rotary_dim, interleaved; none: no
    /// rotation.
    pub rotary: Option<(DevSpan<'a, f32>, DevSpan<'a, f32>, usize, bool)>,
    pub m: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub hs: usize,
    pub cache: KvCache<'a>,
    pub act: i32,
}

impl Ops<'_> {
    /// [`Embedding`]: one block a token.
    pub fn embedding(&self, e: &Embedding<'_>) -> Result<(), Error> {
        const K: &str = "embedding_f32";
        // One block a token (at least one); the position rows read are `step[0] + t`, which
        // only the device knows: their span is checked for the first `m` (the state keeps the
        // positions within the model's).
        let (m, hidden) = (e.m.max(1), e.hidden);
        let table = e.table.need(K, "table", e.vocab * hidden)?;
        let positions = need_opt(e.positions, K, "positions", m * hidden)?;
        let ids = e.ids.need(K, "ids", m)?;
        let step = e.step.need(K, "step", 1)?;
        let x = e.x.need(K, "x", m * hidden)?;
        let (hidden, vocab) = (int("hidden", hidden)?, int("vocab", e.vocab)?);
        let (has_scale, scale) = (i32::from(e.scale.is_some()), e.scale.unwrap_or(1.0));
        let act = e.act;
        let f = self.k.get(K)?;
        let c = cfg((grid_dim("tokens", e.m)?, 1, 1), 256, 0);
        launch!(
            self, f, c, &table, &positions, &ids, &step, &x, &hidden, &vocab, &has_scale, &scale,
            &act
        )
    }

    /// [`SkipNorm`]: one block a row.
    pub fn skip_norm(&self, n: &SkipNorm<'_>) -> Result<(), Error> {
        self.skip_norm_half(n, None)
    }

    /// [`Ops::skip_norm`], the output also written rounded to 16 bits into `half` (row r at
    /// `r * width`) where given: the copy the GEMMs after the norm read instead of casting it.
    pub fn skip_norm_half(&self, n: &SkipNorm<'_>, half: Option<HalfCopy>) -> Result<(), Error> {
        let kernel = if half.is_some() {
            "skip_norm_half_f32"
        } else {
            "skip_norm_f32"
        };
        let NormRows {
            rows,
            width,
            per_row,
            ld,
        } = n.rows;
        let threads = norm_threads(width)?;
        let extent = n.rows.extent()?;
        let x = n.x.need(kernel, "x", extent)?;
        let delta = need_opt(n.delta, kernel, "delta", extent)?;
        let weight = n.weight.need(kernel, "weight", width)?;
        let bias = need_opt(n.bias, kernel, "bias", width)?;
        let out = n.out.need(kernel, "out", extent)?;
        let (w, pr, ld) = (
            int("width", width)?,
            int("per_row", per_row)?,
            int("ld", ld)?,
        );
        let (eps, act) = (n.eps, n.act);
        let (rms, write_sum) = (i32::from(n.rms), i32::from(n.write_sum));
        let c = cfg((grid_dim("rows", rows)?, 1, 1), threads, 0);
        let Some(copy) = half else {
            let f = self.k.get(kernel)?;
            return launch!(
                self, f, c, &x, &delta, &weight, &bias, &out, &w, &pr, &ld, &eps, &rms, &write_sum,
                &act
            );
        };
        HalfCopy::need_opt(Some(copy), kernel, rows.max(1) * width)?;
        let (half, half_bf) = HalfCopy::args(Some(copy));
        let f = self.k.get(kernel)?;
        launch!(
            self, f, c, &x, &delta, &weight, &bias, &out, &w, &pr, &ld, &eps, &rms, &write_sum,
            &act, &half, &half_bf
        )
    }

    /// [`RotaryAppend`]: a block a (token, q or k head).
    pub fn rotary_append(&self, r: &RotaryAppend<'_>) -> Result<(), Error> {
        const K: &str = "rotary_append_f32";
        let (m, hs) = (r.m.max(1), r.hs);
        // The last token's v heads end the qkv rows read; the cos/sin rows read are at
        // `step[0] + t`, which only the device knows: checked for the first `m` positions
        // (the state keeps the positions within the caches').
        let qkv_end = (m - 1) * r.ld + (r.heads + 2 * r.kv_heads) * hs;
        let qkv = r.qkv.need(K, "qkv", qkv_end)?;
        let step = r.step.need(K, "step", 1)?;
        let (cos, sin, rotary_dim, interleaved) = match r.rotary {
            Some((cos, sin, rotary_dim, interleaved)) => {
                let rows = m * (rotary_dim / 2);
                let cos = cos.need(K, "cos", rows)?;
                (cos, sin.need(K, "sin", rows)?, rotary_dim, interleaved)
            }
            None => (0, 0, 0, false),
        };
        let (k_cache, v_cache, cap, kv) = r.cache.args(K, r.kv_heads, hs)?;
        let (ld, h, kvh, hs_i) = (
            int("ld", r.ld)?,
            int("heads", r.heads)?,
            int("kv_heads", r.kv_heads)?,
            int("head_size", hs)?,
        );
        let (rd, inter) = (int("rotary_dim", rotary_dim)?, i32::from(interleaved));
        let act = r.act;
        let f = self.k.get(K)?;
        let grid = (
            grid_dim("tokens", r.m)?,
            grid_dim("heads", r.heads + r.kv_heads)?,
            1,
        );
        let c = cfg(grid, 128, 0);
        launch!(
            self, f, c, &qkv, &ld, &step, &cos, &sin, &h, &kvh, &hs_i, &rd, &inter, &k_cache,
            &v_cache, &cap, &act, &kv
        )
    }

    /// h `[rows, w]` = act(gate) * up over gu `[rows, 2w]`.
    pub fn gated(
        &self,
        gu: DevSpan<'_, f32>,
        h: DevSpan<'_, f32>,
        (rows, w): (usize, usize),
        kind: i32,
    ) -> Result<(), Error> {
        const K: &str = "gated_f32";
        let total = rows * w;
        let gu = gu.need(K, "gu", 2 * total)?;
        let h = h.need(K, "h", total)?;
        let (wi, ti) = (int("width", w)?, int("elements", total)?);
        let f = self.k.get(K)?;
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
    pub fn activate(&self, x: DevSpan<'_, f32>, total: usize, kind: i32) -> Result<(), Error> {
        const K: &str = "activate_f32";
        let x = x.need(K, "x", total)?;
        let ti = int("elements", total)?;
        let f = self.k.get(K)?;
        let blocks = grid_dim("elements", total.div_ceil(256).min(4096))?;
        launch!(self, f, cfg((blocks, 1, 1), 256, 0), &x, &ti, &kind)
    }

    /// out[0] = argmax of `n` logits; `(pv, pi)` hold [`ARGMAX_PARTS`] partials.
    pub fn argmax(
        &self,
        logits: DevSpan<'_, f32>,
        n: usize,
        (pv, pi): (DevSpan<'_, f32>, DevSpan<'_, i32>),
        out: DevSpan<'_, i32>,
    ) -> Result<(), Error> {
        let logits = logits.need("argmax_partial_f32", "logits", n)?;
        let pv = pv.need("argmax_partial_f32", "pv", ARGMAX_PARTS)?;
        let pi = pi.need("argmax_partial_f32", "pi", ARGMAX_PARTS)?;
        let out = out.need("argmax_final_f32", "out", 1)?;
        let (ni, parts) = (int("vocab", n)?, int("parts", ARGMAX_PARTS)?);
        let f = self.k.get("argmax_partial_f32")?;
        let grid = (ARGMAX_PARTS as u32, 1, 1);
        launch!(self, f, cfg(grid, 256, 0), &logits, &ni, &pv, &pi)?;
        let f = self.k.get("argmax_final_f32")?;
        launch!(self, f, cfg((1, 1, 1), 1024, 0), &pv, &pi, &parts, &out)
    }
}
