//! The prompt-attention launch: one call's buffers and scalars ([`PromptAttention`]), the
//! kernel `prompt_device.rs` picks for it here, and the launch with its merge.

use super::chunk::ATTN_CHUNK;
use super::halves::HalfCopy;
use super::kv::{KvCache, KvKind};
use super::ops::Ops;
use super::prompt_device::*;
use crate::cuda::launch::{cfg, grid_dim, int, launch, launch_raw, param};
use crate::cuda::span::DevSpan;
use crate::error::Error;

/// One prompt attention: `m` tokens' q in `qkv` (rows of `ld` floats), the cache, the step
/// scalars; `part` holds `[m, heads, splits, hs + 2]` partials (`splits`: the cache's 32-position
/// splits) and `counts` `[m, heads]` zeroed tickets (left zeroed); `out` `[m, heads * hs]`;
/// `half`: where a separate merge also writes out rounded to 16 bits for the GEMM after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PromptAttention<'a> {
    pub qkv: DevSpan<'a, f32>,
    pub ld: usize,
    pub cache: KvCache<'a>,
    pub step: DevSpan<'a, i32>,
    pub part: DevSpan<'a, f32>,
    pub splits: usize,
    pub counts: DevSpan<'a, i32>,
    pub out: DevSpan<'a, f32>,
    pub m: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub hs: usize,
    pub scale: f32,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
    pub act: i32,
    pub half: Option<HalfCopy>,
}

/// Whether the tensor-core kernel can read `a`'s q four floats at a time (16-byte aligned rows).
fn mma_reads_q(a: &PromptAttention<'_>) -> bool {
    a.qkv.ptr().is_multiple_of(16) && a.ld.is_multiple_of(4)
}

impl Ops<'_> {
    /// The kernel [`Ops::attention`] runs `a` with here.
    pub(crate) fn prompt_kernel(&self, a: &PromptAttention<'_>) -> PromptKernel {
        match self
            .k
            .prompt
            .kernel_for(a.cache.kind, a.hs, a.act, mma_reads_q(a))
        {
            PromptKernel::Mma(name, _) => PromptKernel::Mma(name, self.mma_planned_spans(a)),
            other => other,
        }
    }

    /// Tensor-core blocks of 64 rows that `a`'s (token, query head) rows of one KV head fill.
    fn mma_row_blocks(&self, a: &PromptAttention<'_>) -> usize {
        (a.m * (a.heads / a.kv_heads.max(1))).div_ceil(MMA_ROWS)
    }

    /// The spans [`mma_spans`] plans for `a` on this device.
    pub(crate) fn mma_planned_spans(&self, a: &PromptAttention<'_>) -> usize {
        let blocks = a.kv_heads * self.mma_row_blocks(a);
        let name = self.mma_entry(a.cache.kind, a.hs).unwrap_or_default();
        let wanted = self.k.prompt.blocks_per_sm(name) * self.k.sms;
        mma_spans(blocks, wanted, a.cache.capacity, a.splits)
    }

    /// The tensor-core entry for a cache of `kind` and head size `hs` with q rounded to the
    /// cache's kind, if one runs here.
    pub(crate) fn mma_entry(&self, kind: KvKind, hs: usize) -> Option<&'static str> {
        self.k.prompt.mma_entry(kind, hs, kind.code())
    }

    /// Whether the tiled kernel takes head size `hs` here.
    #[cfg(feature = "lab")]
    pub(crate) fn tiled_fits(&self, hs: usize) -> bool {
        self.k.prompt.tiled_fits(hs)
    }

    /// Attention of `a.m` tokens through the best kernel that runs it here. Returns the
    /// output's half copy where the kernel's merge wrote it (`a.half`).
    pub fn attention(&self, a: &PromptAttention<'_>) -> Result<Option<HalfCopy>, Error> {
        if a.hs > 256 || a.kv_heads == 0 || !a.heads.is_multiple_of(a.kv_heads) {
            return Err(Error::Invalid {
                what: "attention",
                why: format!(
                    "heads {}, kv_heads {}, head_size {} (at most 256)",
                    a.heads, a.kv_heads, a.hs
                ),
            });
        }
        self.attention_with(a, self.prompt_kernel(a))
    }

    /// Attention of `a.m` tokens through `kernel` (the caller checked that it runs `a` here).
    /// Returns the output's half copy where the merge wrote it: kernels with a separate merge,
    /// when `a.half` asks for one.
    pub(crate) fn attention_with(
        &self,
        a: &PromptAttention<'_>,
        kernel: PromptKernel,
    ) -> Result<Option<HalfCopy>, Error> {
        const WHAT: &str = "prompt attention";
        let (k_cache, v_cache, cap, kv) = a.cache.args(WHAT, a.kv_heads, a.hs)?;
        let (ld, h, kvh, hs) = (
            int("ld", a.ld)?,
            int("heads", a.heads)?,
            int("kv_heads", a.kv_heads)?,
            int("head_size", a.hs)?,
        );
        let win = int("window", a.window.unwrap_or(0))?;
        let softcap = a.softcap.unwrap_or(0.0);
        let (m, act) = (int("tokens", a.m)?, a.act);
        // The tokens' q rows; `[m, heads, splits, hs + 2]` partials, `[m, heads]` tickets and
        // outputs (what every kernel indexes; the tensor-core one uses no more splits).
        let (rows, heads) = (a.m.max(1), a.heads);
        let qkv = a.qkv.need(WHAT, "qkv", (rows - 1) * a.ld + heads * a.hs)?;
        let step = a.step.need(WHAT, "step", 1)?;
        let part = a
            .part
            .need(WHAT, "part", rows * heads * a.splits * (a.hs + 2))?;
        let counts = a.counts.need(WHAT, "counts", rows * heads)?;
        let out = a.out.need(WHAT, "out", rows * heads * a.hs)?;
        HalfCopy::need_opt(a.half, WHAT, rows * heads * a.hs)?;
        let scale = a.scale;
        // Per kernel: its name, its split span (None: it merges its own splits), splits, grid,
        // block and dynamic shared memory.
        let (name, span, splits, grid, block, shared) = match kernel {
            PromptKernel::Split => (
                "attention_f32",
                None,
                a.splits,
                (a.splits, a.heads, a.m),
                256,
                0,
            ),
            PromptKernel::Tiled => (
                "attention_tiled_f32",
                Some(ATTN_CHUNK),
                a.splits,
                (a.splits, a.kv_heads, a.m.div_ceil(TOKENS)),
                WARPS * 32,
                tiled_shared_bytes(a.hs),
            ),
            PromptKernel::Mma(name, spans) => {
                if !mma_reads_q(a) {
                    return Err(Error::Invalid {
                        what: "prompt attention",
                        why: format!("q at {:#x} in rows of {} floats", a.qkv.ptr(), a.ld),
                    });
                }
                if spans == 0 || spans > a.splits {
                    return Err(Error::Invalid {
                        what: "prompt attention",
                        why: format!("{spans} spans of partials, room for {}", a.splits),
                    });
                }
                let grid = (spans, a.kv_heads, self.mma_row_blocks(a));
                // Span 0: the merge sizes the spans as the kernel does (`prompt_span`).
                (
                    name,
                    Some(0),
                    spans,
                    grid,
                    MMA_THREADS,
                    mma_shared_bytes(a.hs),
                )
            }
        };
        let sp = int("splits", splits)?;
        let grid = (
            grid_dim("splits", grid.0)?,
            grid_dim("heads", grid.1)?,
            grid_dim("tokens", grid.2)?,
        );
        let shared = u32::try_from(shared).map_err(|_| Error::Invalid {
            what: "prompt attention",
            why: format!("{shared} bytes of shared memory"),
        })?;
        let f = self.k.get(name)?;
        let mut params = vec![
            param(&qkv),
            param(&ld),
            param(&k_cache),
            param(&v_cache),
            param(&step),
            param(&part),
            param(&h),
            param(&kvh),
            param(&hs),
            param(&cap),
            param(&scale),
            param(&win),
            param(&softcap),
            param(&sp),
        ];
        // The split kernel merges and rounds itself: it takes out, the tickets and act; the
        // tensor-core entries are compiled per cache kind.
        match kernel {
            PromptKernel::Split => {
                params.extend([param(&out), param(&counts), param(&act), param(&kv)])
            }
            PromptKernel::Tiled => params.extend([param(&m), param(&kv)]),
            PromptKernel::Mma(..) => params.push(param(&m)),
        }
        // SAFETY: `params` follows the kernel's C signature in kernels/attention.cu or
        // attention_mma.cu (the first 14 arguments are shared, then the kernel's own), each
        // pointing to a local that outlives the call; the addresses are `a`'s spans, checked
        // above against the extents these dimensions make the kernel index (q rows, caches,
        // partials, tickets, outputs).
        unsafe {
            launch_raw(
                self.stream,
                f,
                cfg(grid, block as u32, shared),
                &mut params,
                self.pdl,
            )?
        };
        let Some(span) = span else { return Ok(None) };
        let merge = self.k.get("attention_merge_f32")?;
        let grid = (grid_dim("rows", merge_blocks(a.m * a.heads))?, 1, 1);
        let span = int("span", span)?;
        let (half, half_bf) = HalfCopy::args(a.half);
        launch!(
            self,
            merge,
            cfg(grid, (MERGE_WARPS * 32) as u32, 0),
            &step,
            &part,
            &out,
            &h,
            &hs,
            &sp,
            &span,
            &win,
            &act,
            &half,
            &half_bf,
            &m
        )?;
        Ok(a.half)
    }
}

/// (token, head) rows a merge block takes, a warp each (`MERGE_WARPS`).
const MERGE_WARPS: usize = 4;

/// Blocks of a merge over `rows` (token, head) rows.
fn merge_blocks(rows: usize) -> usize {
    rows.div_ceil(MERGE_WARPS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn the_ladder_tries_tensor_cores_then_tiled_then_split() {
        let mut device = PromptDevice {
            tiled_max: 48 * 1024,
            ..PromptDevice::default()
        };
        device.mma_max.insert("attention_mma_f16_128", 96 * 1024);
        let kernel = |hs, aligned| device.kernel_for(KvKind::F16, hs, 1, aligned);
        assert_eq!(
            kernel(128, true),
            PromptKernel::Mma("attention_mma_f16_128", 0)
        );
        // q not aligned for the tensor cores, or an f32 cache: the tiled kernel.
        assert_eq!(kernel(128, false), PromptKernel::Tiled);
        assert_eq!(
            device.kernel_for(KvKind::F32, 128, 0, true),
            PromptKernel::Tiled
        );
        // Head size 256: no tensor-core entry probed here, and too large for the tiled stage.
        assert_eq!(kernel(256, true), PromptKernel::Split);
        assert!(
            device
                .describe(KvKind::F16, 1, &[128, 256])
                .contains("tensor cores")
        );
    }

    #[test]
    fn a_merge_block_takes_a_row_a_warp() {
        assert_eq!(merge_blocks(256 * 14), 896);
        assert_eq!(merge_blocks(5 * 3), 4);
        assert_eq!(merge_blocks(1), 1);
    }

    #[test]
    fn the_rust_constants_match_the_kernels() {
        let family = |name| crate::cuda::compile::family(name).expect("the family");
        let (tiled, mma) = (family("attention"), family("attention_mma"));
        for (source, name, value) in [
            (&tiled, "AT_TOKENS", TOKENS),
            (&tiled, "AT_WARPS", WARPS),
            (&tiled, "ATTN_CHUNK", ATTN_CHUNK),
            (&tiled, "MERGE_WARPS", MERGE_WARPS),
            (&mma, "AM_ROWS", MMA_ROWS),
            (&mma, "AM_KEYS", MMA_KEYS),
            (&mma, "AM_PAD", MMA_PAD),
        ] {
            let line = format!("#define {name} {value}");
            assert!(source.code.contains(&line), "{line} not in the kernel");
        }
        assert!(
            mma.code.contains("#define AM_WARPS (AM_ROWS / 16)"),
            "16 rows a warp"
        );
        for symbol in ["attention_tiled_f32", "attention_merge_f32"] {
            assert!(tiled.symbols.contains(&symbol), "{symbol} not loaded");
        }
        for (_, max_hs, symbol) in MMA_ENTRIES {
            assert!(mma.symbols.contains(&symbol), "{symbol} not loaded");
            let kv = if symbol.contains("_f16_") { 1 } else { 2 };
            let entry = format!("{symbol}(AM_PARAMS) {{\n    attention_mma_body<{kv}, {max_hs}>(");
            assert!(
                mma.code.contains(&entry),
                "{symbol} is not the kernel for ({kv}, {max_hs})"
            );
        }
    }

    #[test]
    fn the_stages_and_the_modes() {
        // Head size 128: 32 K rows of 129 floats, 32 V rows, 8 q rows and 8 x 32 weights.
        assert_eq!(tiled_shared_bytes(128), 4 * (32 * 257 + 8 * 160));
        assert!(tiled_shared_bytes(128) <= 48 * 1024 - 1024); // no opt-in needed
        assert!(tiled_shared_bytes(256) > 48 * 1024); // opt-in (or the split kernel)
        // 64 q rows and two stages of 32 keys and 32 values, 136 halves each.
        assert_eq!(mma_shared_bytes(128), 2 * 192 * 136);
        assert!(mma_shared_bytes(64) <= 48 * 1024 && mma_shared_bytes(128) > 48 * 1024);
    }

    #[test]
    fn spans_fill_one_wave_and_bound_their_length() {
        // Llama-3-8B's 256-token chunks on 132 SMs at 4 blocks an SM: 8 KV heads x 16 row
        // blocks make 128 blocks a span, so 4 spans (512 of the wave's 528 blocks).
        let wanted = 4 * 132;
        assert_eq!(mma_spans(128, wanted, 3840, 120), 4);
        // Qwen2.5-1.5B's: 2 KV heads x 24 row blocks, 11 spans (528 blocks: one wave).
        assert_eq!(mma_spans(48, wanted, 3840, 120), 11);
        // Planned for two waves: twice the spans, no partial third wave.
        assert_eq!(mma_spans(128, 2 * wanted, 3840, 120), 8);
        // Few rows: as many spans as the partials hold.
        assert_eq!(mma_spans(1, wanted, 600, 19), 19);
        assert_eq!(mma_spans(0, 0, 0, 0), 1);
        // Many rows: one span, unless the cache is longer than the longest span.
        assert_eq!(mma_spans(2000, wanted, 2048, 64), 1);
        assert_eq!(mma_spans(2000, wanted, 2049, 65), 2);
        assert_eq!(mma_spans(2000, wanted, 131_072, 4096), 64);
    }

    #[test]
    fn the_blocks_switch_overrides_what_fits() {
        let mut device = PromptDevice::default();
        assert_eq!(device.blocks_per_sm("x"), MMA_BLOCKS_PER_SM);
        device.mma_resident.insert("attention_mma_f16_64", 5);
        assert_eq!(device.blocks_per_sm("attention_mma_f16_64"), 5);
        device.blocks_per_sm = Some(2);
        assert_eq!(device.blocks_per_sm("attention_mma_f16_64"), 2);
    }

    #[test]
    fn the_tensor_core_entry_needs_exact_operands_and_a_fitting_stage() {
        let mut device = PromptDevice {
            tiled_max: 48 * 1024,
            mma_max: HashMap::new(),
            mma_resident: HashMap::new(),
            blocks_per_sm: None,
        };
        assert_eq!(device.mma_entry(KvKind::F16, 128, 1), None, "none probed");
        for (_, _, name) in MMA_ENTRIES {
            device.mma_max.insert(name, 64 * 1024);
        }
        assert_eq!(
            device.mma_entry(KvKind::F16, 128, 1),
            Some("attention_mma_f16_128")
        );
        assert_eq!(
            device.mma_entry(KvKind::Bf16, 64, 2),
            Some("attention_mma_bf16_64")
        );
        assert_eq!(
            device.mma_entry(KvKind::Bf16, 80, 2),
            Some("attention_mma_bf16_128")
        );
        assert_eq!(device.mma_entry(KvKind::F16, 128, 0), None, "q in f32");
        assert_eq!(device.mma_entry(KvKind::F16, 128, 2), None, "q in bf16");
        assert_eq!(device.mma_entry(KvKind::F32, 128, 0), None);
        assert_eq!(
            device.mma_entry(KvKind::F16, 72, 1),
            None,
            "not a multiple of 16"
        );
        // Head size 256 needs ~99 KB: not in 64 KB.
        assert_eq!(device.mma_entry(KvKind::F16, 256, 1), None);
        device.mma_max.insert("attention_mma_f16_256", 200 * 1024);
        assert_eq!(
            device.mma_entry(KvKind::F16, 256, 1),
            Some("attention_mma_f16_256")
        );
        assert_eq!(
            device.mma_entry(KvKind::F16, 192, 1),
            Some("attention_mma_f16_256")
        );
        assert!(device.tiled_fits(128) && !device.tiled_fits(256));
    }
}
