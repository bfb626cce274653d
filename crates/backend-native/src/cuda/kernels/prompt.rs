//! The prompt attention tiled over queries (`attention_tiled_f32` and `attention_merge_f32` in
//! kernels/attention.cu): its shared memory, grid and launch. A block stages one split's keys
//! and values once for 16 tokens and every query head of a KV head; the split kernel
//! (`attention_f32`) read them once per query head and token, which made prompts of thousands
//! of tokens take seconds. The split kernel stays for head sizes whose stage does not fit and
//! as the A/B side of [`PROMPT_ATTENTION_ENV`].

use super::{DevPtr, KvCache, Ops, cfg, grid_dim, int, launch, opt_in_shared};
use crate::error::Error;
use cudarc::driver::{CudaContext, CudaFunction};

/// Tokens one block takes (`AT_TOKENS`).
const TOKENS: usize = 16;
/// Warps per block (`AT_WARPS`).
const WARPS: usize = 8;
/// Positions one split covers (`ATTN_CHUNK`).
const CHUNK: usize = 32;

/// Set to `split` to run prompts through the split kernel (one block per 32 positions, head and
/// token) instead of the tiled one (an A/B switch).
pub const PROMPT_ATTENTION_ENV: &str = "GENAI_BRIDGE_PROMPT_ATTENTION";

/// Dynamic shared memory of a tiled block (`at_shared_floats`): one split's K rows padded to
/// `hs + 1` floats, its V rows, and each warp's q row and weights.
pub(crate) fn tiled_shared_bytes(hs: usize) -> usize {
    4 * (CHUNK * (2 * hs + 1) + WARPS * (hs + CHUNK))
}

/// The dynamic shared memory the tiled kernel may take here (opted in past the default where
/// the device allows); 0 when [`PROMPT_ATTENTION_ENV`] is `split`.
pub(crate) fn probe(ctx: &CudaContext, f: &CudaFunction) -> usize {
    const DEFAULT_SHARED: usize = 48 * 1024;
    if std::env::var(PROMPT_ATTENTION_ENV).is_ok_and(|v| v == "split")
        || ctx.bind_to_thread().is_err()
    {
        return 0;
    }
    let fixed = f.shared_size_bytes().map_or(DEFAULT_SHARED, |b| b as usize);
    let default_max = DEFAULT_SHARED.saturating_sub(fixed);
    opt_in_shared(ctx, f, fixed, default_max).unwrap_or(default_max)
}

/// Grid of a tiled launch: splits of the cache, KV heads, tiles of tokens.
pub(crate) fn tiled_grid(splits: usize, kv_heads: usize, m: usize) -> (usize, usize, usize) {
    (splits, kv_heads, m.div_ceil(TOKENS))
}

impl Ops<'_> {
    /// Whether the tiled kernel takes head size `hs` here.
    pub(crate) fn tiled_fits(&self, hs: usize) -> bool {
        tiled_shared_bytes(hs) <= self.k.prompt_dynamic_max
    }

    /// Attention of `m` tokens through the tiled kernel, then the merge: `part` holds
    /// `[m, heads, splits, hs + 2]` partials, `out` `[m, heads * hs]`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn attention_tiled(
        &self,
        qkv: DevPtr,
        ld: usize,
        cache: KvCache,
        step: DevPtr,
        (part, splits): (DevPtr, usize),
        out: DevPtr,
        (m, heads, kv_heads, hs): (usize, usize, usize, usize),
        (scale, window, softcap): (f32, Option<usize>, Option<f32>),
        act: i32,
    ) -> Result<(), Error> {
        let (k_cache, v_cache, cap, kv) = cache.args()?;
        let (ld, h, kvh, hs_i, sp, mi) = (
            int("ld", ld)?,
            int("heads", heads)?,
            int("kv_heads", kv_heads)?,
            int("head_size", hs)?,
            int("splits", splits)?,
            int("tokens", m)?,
        );
        let win = int("window", window.unwrap_or(0))?;
        let cap_s = softcap.unwrap_or(0.0);
        let shared = tiled_shared_bytes(hs);
        let shared = u32::try_from(shared).map_err(|_| Error::Invalid {
            what: "prompt attention",
            why: format!("{shared} bytes of shared memory"),
        })?;
        let (x, y, z) = tiled_grid(splits, kv_heads, m);
        let grid = (
            grid_dim("splits", x)?,
            grid_dim("kv_heads", y)?,
            grid_dim("token tiles", z)?,
        );
        let f = self.k.get("attention_tiled_f32")?;
        launch!(
            self,
            f,
            cfg(grid, (WARPS * 32) as u32, shared),
            &qkv,
            &ld,
            &k_cache,
            &v_cache,
            &step,
            &part,
            &h,
            &kvh,
            &hs_i,
            &cap,
            &scale,
            &win,
            &cap_s,
            &sp,
            &mi,
            &kv
        )?;
        let merge = self.k.get("attention_merge_f32")?;
        let grid = (grid_dim("heads", heads)?, grid_dim("tokens", m)?, 1);
        launch!(
            self,
            merge,
            cfg(grid, 128, 0),
            &step,
            &part,
            &out,
            &h,
            &hs_i,
            &sp,
            &win,
            &act
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rust_constants_match_the_kernel() {
        let source = crate::cuda::compile::family("attention").expect("the attention family");
        for (name, value) in [
            ("AT_TOKENS", TOKENS),
            ("AT_WARPS", WARPS),
            ("ATTN_CHUNK", CHUNK),
        ] {
            let line = format!("#define {name} {value}");
            assert!(source.code.contains(&line), "{line} not in the kernel");
        }
        for symbol in ["attention_tiled_f32", "attention_merge_f32"] {
            assert!(source.symbols.contains(&symbol), "{symbol} not loaded");
        }
    }

    #[test]
    fn the_stage_and_the_grid() {
        // Head size 128: 32 K rows of 129 floats, 32 V rows, 8 q rows and 8 x 32 weights.
        assert_eq!(tiled_shared_bytes(128), 4 * (32 * 257 + 8 * 160));
        assert!(tiled_shared_bytes(128) <= 48 * 1024 - 1024); // no opt-in needed
        assert!(tiled_shared_bytes(256) > 48 * 1024); // opt-in (or the split kernel)
        assert_eq!(tiled_grid(128, 8, 256), (128, 8, 16));
        assert_eq!(tiled_grid(4, 2, 1), (4, 2, 1));
        assert_eq!(tiled_grid(4, 2, 17), (4, 2, 2));
    }
}
