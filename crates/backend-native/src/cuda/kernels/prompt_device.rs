//! What prompt attention (more than one token a step, or heads the decode kernel does not
//! take) may run on this device: which kernel, its shared memory and spans (the launch is
//! `prompt.rs`). Three kernels, best first:
//! - `attention_mma_*` (kernels/attention_mma.cu): tensor cores, for a KV cache in the
//!   activations' half precision on sm_80 and later; 64 rows a block, 16 a warp, over one of
//!   [`mma_spans`] spans of the pass's positions.
//! - `attention_tiled_f32` (kernels/attention.cu): a block stages one split's keys and values
//!   once for 16 tokens and every query head of a KV head; any cache kind.
//! - `attention_f32`: one block per 32 positions, head and token, for head sizes whose stage
//!   does not fit, and as the A/B side of `CudaTuning::prompt_attention`.
//!
//! The first two write per-split partials that `attention_merge_f32` merges.

use super::chunk::ATTN_CHUNK;
use super::kv::KvKind;
use crate::cuda::launch::dynamic_shared_max;
use crate::settings::{self, CudaTuning};
use cudarc::driver::{CudaContext, CudaFunction};
use std::collections::HashMap;

/// Tokens one tiled block takes (`AT_TOKENS`).
pub(super) const TOKENS: usize = 16;
/// Warps per tiled block (`AT_WARPS`).
pub(super) const WARPS: usize = 8;
/// Rows ((token, head) pairs) one tensor-core block takes (`AM_ROWS`), 16 a warp.
pub(super) const MMA_ROWS: usize = 64;
/// Threads of a tensor-core block (`AM_WARPS * 32`).
pub(super) const MMA_THREADS: usize = MMA_ROWS / 16 * 32;
/// Keys a tensor-core stage holds (`AM_KEYS`).
pub(super) const MMA_KEYS: usize = 32;
/// Tensor-core blocks an SM is planned for where the driver cannot say how many fit at once
/// (which sets how many spans a pass's keys are cut into): four of head size 128 fit an H200 SM.
pub(super) const MMA_BLOCKS_PER_SM: usize = 4;
/// Most positions one tensor-core block covers: one f32 running sum over longer spans drifts
/// past 1e-5 of the f32 reference (3,637 keys: 1.07e-5, H200 round 33).
pub(super) const MMA_SPAN_MAX: usize = 2048;
/// Halves of padding after each staged row (`AM_PAD`).
pub(super) const MMA_PAD: usize = 8;

/// The tensor-core entries: cache kind, largest head size, name (the smallest that fits runs).
pub(super) const MMA_ENTRIES: [(KvKind, usize, &str); 6] = [
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
    pub(super) tiled_max: usize,
    /// The same for each tensor-core entry that may run here.
    pub(super) mma_max: HashMap<&'static str, usize>,
    /// Blocks of each tensor-core entry that fit an SM at once, at its largest head size.
    pub(super) mma_resident: HashMap<&'static str, usize>,
    /// Tensor-core blocks an SM to plan for (`CudaTuning::prompt_blocks_per_sm`; `None`: as
    /// many as fit).
    pub(super) blocks_per_sm: Option<usize>,
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
    pub(super) fn kernel_for(
        &self,
        kind: KvKind,
        hs: usize,
        act: i32,
        q_aligned: bool,
    ) -> PromptKernel {
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

/// Which kernel runs a prompt attention (`Ops::prompt_kernel`); the tensor-core entry with
/// the number of spans it cuts the pass's keys into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PromptKernel {
    Mma(&'static str, usize),
    Tiled,
    Split,
}
