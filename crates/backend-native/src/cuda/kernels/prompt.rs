//! Prompt attention (more than one token a step, or heads the decode kernel does not take):
//! which kernel runs, its shared memory, grid and launch. Three kernels, best first:
//! - `attention_mma_*` (kernels/attention_mma.cu): tensor cores, for a KV cache in the
//!   activations' half precision on sm_80 and later; 64 rows a block, 16 a warp, over one of
//!   [`mma_spans`] spans of the pass's positions.
//! - `attention_tiled_f32` (kernels/attention.cu): a block stages one split's keys and values
//!   once for 16 tokens and every query head of a KV head; any cache kind.
//! - `attention_f32`: one block per 32 positions, head and token, for head sizes whose stage
//!   does not fit, and as the A/B side of `CudaTuning::prompt_attention`.
//!
//! The first two write per-split partials that `attention_merge_f32` merges.

use super::{
    DevPtr, KvCache, KvKind, Ops, cfg, dynamic_shared_max, grid_dim, int, launch, launch_raw, param,
};
use crate::cuda::blas::HalfCopy;
use crate::cuda::state::ATTN_CHUNK;
use crate::error::Error;
use crate::settings::{self, CudaTuning};
use cudarc::driver::{CudaContext, CudaFunction};
use std::collections::HashMap;

/// Tokens one tiled block takes (`AT_TOKENS`).
const TOKENS: usize = 16;
/// Warps per tiled block (`AT_WARPS`).
const WARPS: usize = 8;
/// Rows ((token, head) pairs) one tensor-core block takes (`AM_ROWS`), 16 a warp.
const MMA_ROWS: usize = 64;
/// Threads of a tensor-core block (`AM_WARPS * 32`).
const MMA_THREADS: usize = MMA_ROWS / 16 * 32;
/// Keys a tensor-core stage holds (`AM_KEYS`).
const MMA_KEYS: usize = 32;
/// Tensor-core blocks an SM is planned for where the driver cannot say how many fit at once
/// (which sets how many spans a pass's keys are cut into): four of head size 128 fit an H200 SM.
const MMA_BLOCKS_PER_SM: usize = 4;
/// Most positions one tensor-core block covers: one f32 running sum over longer spans drifts
/// past 1e-5 of the f32 reference (3,637 keys: 1.07e-5, H200 round 33).
const MMA_SPAN_MAX: usize = 2048;
/// Halves of padding after each staged row (`AM_PAD`).
const MMA_PAD: usize = 8;

/// The tensor-core entries: cache kind, largest head size, name (the smallest that fits runs).
const MMA_ENTRIES: [(KvKind, usize, &str); 6] = [
    (KvKind::F16, 64, "attention_mma_f16_64"),
    (KvKind::F16, 128, "attention_mma_f16_128"),
    (KvKind::F16, 256, "attention_mma_f16_256"),
    (KvKind::Bf16, 64, "attention_mma_bf16_64"),
    (KvKind::Bf16, 128, "attention_mma_bf16_128"),
    (KvKind::Bf16, 256, "attention_mma_bf16_256"),
];

/// Which prompt-attention kernels may run (`CudaTuning::prompt_attention`).
use crate::settings::PromptAttention as PromptMode;

/// Dynamic shared memory of a tiled block (`at_shared_floats`): one split's K rows padded to
/// `hs + 1` floats, its V rows, and each warp's q row and weights.
pub(crate) fn tiled_shared_bytes(hs: usize) -> usize {
    4 * (ATTN_CHUNK * (2 * hs + 1) + WARPS * (hs + ATTN_CHUNK))
}

/// Dynamic shared memory of a tensor-core block (`am_shared_bytes`): q of its rows, then two
/// stages of keys and values, every row `hs + MMA_PAD` halves.
pub(crate) fn mma_shared_bytes(hs: usize) -> usize {
    2 * (MMA_ROWS + 4 * MMA_KEYS) * (hs + MMA_PAD)
}

/// Spans the tensor-core kernel cuts a pass's keys into (the device sizes them from the step
/// scalars, `prompt_span`): as many as `blocks_per_span` blocks each keep within `wanted` blocks
/// in all (one wave where `wanted` is what fits at once: fewer, longer spans read q and write
/// partials fewer times, and a partial second wave leaves SMs idle), and enough that no span of
/// a `capacity`-position cache is longer than [`MMA_SPAN_MAX`]; at most `room` (the partials'
/// buffer) and at least one. Any number gives the same attention up to summation order.
pub(crate) fn mma_spans(
    blocks_per_span: usize,
    wanted: usize,
    capacity: usize,
    room: usize,
) -> usize {
    let for_waves = wanted / blocks_per_span.max(1);
    let for_length = capacity.div_ceil(MMA_SPAN_MAX);
    for_waves.max(for_length).min(room).max(1)
}

/// What the prompt kernels may use on this device.
#[derive(Debug, Default)]
pub(crate) struct PromptDevice {
    /// Dynamic shared memory the tiled kernel may take (0: it does not run).
    tiled_max: usize,
    /// The same for each tensor-core entry that may run here.
    mma_max: HashMap<&'static str, usize>,
    /// Blocks of each tensor-core entry that fit an SM at once, at its largest head size.
    mma_resident: HashMap<&'static str, usize>,
    /// Tensor-core blocks an SM to plan for (`CudaTuning::prompt_blocks_per_sm`; `None`: as
    /// many as fit).
    blocks_per_sm: Option<usize>,
}

impl PromptDevice {
    /// Probes the kernels `functions` holds for a device of compute capability `major`, under
    /// `tuning`'s prompt-attention switches.
    pub(crate) fn probe(
        ctx: &CudaContext,
        major: i32,
        functions: &HashMap<&'static str, CudaFunction>,
        tuning: &CudaTuning,
    ) -> PromptDevice {
        let mode = tuning.prompt_attention;
        let blocks_per_sm = tuning.prompt_blocks_per_sm;
        if mode == PromptMode::Split || ctx.bind_to_thread().is_err() {
            return PromptDevice::default();
        }
        let tiled_max = functions
            .get("attention_tiled_f32")
            .map_or(0, |f| dynamic_shared_max(ctx, f));
        let (mut mma_max, mut mma_resident) = (HashMap::new(), HashMap::new());
        if mode == PromptMode::Best && major >= 8 {
            for (_, max_hs, name) in MMA_ENTRIES {
                if let Some(f) = functions.get(name) {
                    mma_max.insert(name, dynamic_shared_max(ctx, f));
                    let bytes = mma_shared_bytes(max_hs);
                    if let Ok(n) = f.occupancy_max_active_blocks_per_multiprocessor(
                        MMA_THREADS as u32,
                        bytes,
                        None,
                    ) {
                        mma_resident.insert(name, n as usize);
                    }
                }
            }
        }
        PromptDevice {
            tiled_max,
            mma_max,
            mma_resident,
            blocks_per_sm,
        }
    }

    /// Tensor-core blocks of entry `name` an SM is planned for: the switch's value, else as
    /// many as fit at once, else [`MMA_BLOCKS_PER_SM`].
    pub(crate) fn blocks_per_sm(&self, name: &str) -> usize {
        let resident = self.mma_resident.get(name).copied().filter(|&n| n > 0);
        self.blocks_per_sm.or(resident).unwrap_or(MMA_BLOCKS_PER_SM)
    }

    /// The tensor-core entry for a cache of `kind`, head size `hs` and activations `act`, if
    /// one runs it here: q must be rounded to the cache's kind (the activations' precision).
    pub(crate) fn mma_entry(&self, kind: KvKind, hs: usize, act: i32) -> Option<&'static str> {
        if kind == KvKind::F32 || act != kind.code() || !hs.is_multiple_of(16) {
            return None;
        }
        MMA_ENTRIES
            .iter()
            .filter(|(k, max_hs, _)| *k == kind && hs <= *max_hs)
            .map(|&(_, _, name)| name)
            .find(|name| {
                self.mma_max
                    .get(name)
                    .is_some_and(|&max| mma_shared_bytes(hs) <= max)
            })
    }

    /// Whether the tiled kernel takes head size `hs` here.
    pub(crate) fn tiled_fits(&self, hs: usize) -> bool {
        tiled_shared_bytes(hs) <= self.tiled_max
    }

    /// The first kernel of the ladder (tensor cores, tiled, split) that runs a cache of `kind`,
    /// head size `hs` and activations `act` here, the tensor cores only where q is aligned for
    /// them (`q_aligned`); a tensor-core choice has 0 spans (the launch plans them).
    fn kernel_for(&self, kind: KvKind, hs: usize, act: i32, q_aligned: bool) -> PromptKernel {
        match self.mma_entry(kind, hs, act) {
            Some(name) if q_aligned => PromptKernel::Mma(name, 0),
            _ if self.tiled_fits(hs) => PromptKernel::Tiled,
            _ => PromptKernel::Split,
        }
    }

    /// A route reason: the kernel each head size of the model's layers runs its prompts with.
    pub(crate) fn describe(&self, kind: KvKind, act: i32, head_sizes: &[usize]) -> String {
        let mut sizes = head_sizes.to_vec();
        sizes.sort_unstable();
        sizes.dedup();
        let kernels: Vec<String> = sizes
            .iter()
            .map(|&hs| {
                let kernel = match self.kernel_for(kind, hs, act, true) {
                    PromptKernel::Mma(name, _) => format!("tensor cores ({name})"),
                    PromptKernel::Tiled => "f32, tiled over queries".to_string(),
                    PromptKernel::Split => {
                        "f32, a block per position split, head and token".to_string()
                    }
                };
                format!("head size {hs}: {kernel}")
            })
            .collect();
        format!(
            "prompt attention: {} ({}=tiled or =split for the f32 kernels)",
            kernels.join("; "),
            settings::PROMPT_ATTENTION
        )
    }
}

/// One prompt attention: `m` tokens' q in `qkv` (rows of `ld` floats), the cache, the step
/// scalars; `part` holds `[m, heads, splits, hs + 2]` partials (`splits`: the cache's 32-position
/// splits) and `counts` `[m, heads]` zeroed tickets (left zeroed); `out` `[m, heads * hs]`;
/// `half`: where a separate merge also writes out rounded to 16 bits for the GEMM after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PromptAttention {
    pub qkv: DevPtr,
    pub ld: usize,
    pub cache: KvCache,
    pub step: DevPtr,
    pub part: DevPtr,
    pub splits: usize,
    pub counts: DevPtr,
    pub out: DevPtr,
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
fn mma_reads_q(a: &PromptAttention) -> bool {
    a.qkv.is_multiple_of(16) && a.ld.is_multiple_of(4)
}

/// Which kernel runs a prompt attention (`Ops::prompt_kernel`); the tensor-core entry with
/// the number of spans it cuts the pass's keys into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PromptKernel {
    Mma(&'static str, usize),
    Tiled,
    Split,
}

impl Ops<'_> {
    /// The kernel [`Ops::attention`] runs `a` with here.
    pub(crate) fn prompt_kernel(&self, a: &PromptAttention) -> PromptKernel {
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
    fn mma_row_blocks(&self, a: &PromptAttention) -> usize {
        (a.m * (a.heads / a.kv_heads.max(1))).div_ceil(MMA_ROWS)
    }

    /// The spans [`mma_spans`] plans for `a` on this device.
    pub(crate) fn mma_planned_spans(&self, a: &PromptAttention) -> usize {
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
    pub(crate) fn tiled_fits(&self, hs: usize) -> bool {
        self.k.prompt.tiled_fits(hs)
    }

    /// Attention of `a.m` tokens through the best kernel that runs it here. Returns the
    /// output's half copy where the kernel's merge wrote it (`a.half`).
    pub fn attention(&self, a: &PromptAttention) -> Result<Option<HalfCopy>, Error> {
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
        a: &PromptAttention,
        kernel: PromptKernel,
    ) -> Result<Option<HalfCopy>, Error> {
        let (k_cache, v_cache, cap, kv) = a.cache.args()?;
        let (ld, h, kvh, hs) = (
            int("ld", a.ld)?,
            int("heads", a.heads)?,
            int("kv_heads", a.kv_heads)?,
            int("head_size", a.hs)?,
        );
        let win = int("window", a.window.unwrap_or(0))?;
        let softcap = a.softcap.unwrap_or(0.0);
        let (m, act) = (int("tokens", a.m)?, a.act);
        let (qkv, step, part, scale, out, counts) =
            (a.qkv, a.step, a.part, a.scale, a.out, a.counts);
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
                        why: format!("q at {:#x} in rows of {} floats", a.qkv, a.ld),
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
        // pointing to a local that outlives the call; the addresses are `a`'s, whose buffers
        // the caller sized for these dimensions (`PromptAttention`).
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
