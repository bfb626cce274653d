//! What the fused decode attention (`kernels/decode_attention.cu`) takes on this device: its
//! split layout, grid, shared memory, ring depth and cluster choice, mirrored from the kernel
//! and unit-tested in `decode.rs` (those tests run in CI without a GPU). The launch itself is
//! `decode.rs`.

use super::kv::KvKind;
use crate::cuda::launch::dynamic_shared_max;
use crate::settings::CudaTuning;
use cudarc::driver::{CudaFunction, sys};

/// Positions one block pass covers (`DA_PASS`: 8 warps of `DA_KEYS` = 4 keys).
pub(super) const PASS: usize = 32;
/// Splits merged per group: the cluster width (`DA_GROUP`).
pub(crate) const GROUP: usize = 8;
/// Splits per row at most (`DA_MAX_SPLITS`).
pub(crate) const MAX_SPLITS: usize = 64;
/// Passes per split while the splits number at most [`MAX_SPLITS`] (`DA_STAGED`).
pub(super) const STAGED: usize = 2;
/// Query heads one block serves at most (`DA_HEADS`).
pub(super) const HEADS: usize = 2;
/// Threads per block (`DA_THREADS`).
pub(super) const THREADS: u32 = 256;
/// Cache elements of one warp's ring slot per head-size value: 4 keys and 4 values
/// (`da_issue`).
pub(super) const SLOT_ROWS: usize = 8;
/// Warps per block (`DA_WARPS`).
pub(super) const WARPS: usize = 8;

/// How the kernel splits `n` attended positions (`da_layout`): `passes` of 32 positions per
/// split, `splits` blocks, `groups` of up to 8 consecutive splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeLayout {
    pub passes: usize,
    pub splits: usize,
    pub groups: usize,
}

/// The split layout for `n >= 1` positions: one pass per split while 8 splits cover `n`, two up
/// to 512 positions (still one group), more only past [`MAX_SPLITS`] splits.
pub(crate) fn decode_layout(n: usize) -> DecodeLayout {
    let pt = n.max(1).div_ceil(PASS);
    let passes = pt.div_ceil(GROUP).min(STAGED).max(pt.div_ceil(MAX_SPLITS));
    let splits = pt.div_ceil(passes);
    DecodeLayout {
        passes,
        splits,
        groups: splits.div_ceil(GROUP),
    }
}

/// Split blocks of the grid for a cache of `capacity` positions: the most splits any attended
/// length up to `capacity` uses, so one grid serves every position of a captured graph. The
/// count is not monotonic (8 splits at 256 positions, 5 at 257; 64 at 4096, 43 at 4097) but
/// grows within each regime, so the most is at the end of the first two regimes reached.
pub(crate) fn decode_splits(capacity: usize) -> usize {
    let one_pass = GROUP * PASS;
    let staged = MAX_SPLITS * STAGED * PASS;
    let at = |n: usize| decode_layout(capacity.min(n)).splits;
    at(one_pass).max(at(staged))
}

/// Query heads one block serves (`da_heads`): 2, or 1 past head size 128 (two float4 units
/// per lane).
pub(crate) fn decode_heads(hs: usize) -> usize {
    if hs > 128 { HEADS / 2 } else { HEADS }
}

/// Dynamic shared memory of one block: every warp's `ring` slots of 4 keys and 4 values, as
/// the cache holds them.
pub(crate) fn decode_stage_bytes(hs: usize, ring: usize, kv: KvKind) -> usize {
    WARPS * ring * SLOT_ROWS * hs * kv.bytes()
}

/// Geometry of one decode-attention launch: heads, KV heads, head size, the cache's kind.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecodeHeads {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_size: usize,
    pub kv: KvKind,
}

impl DecodeHeads {
    /// Block rows: every KV head times the slices of at most [`decode_heads`] query heads.
    pub fn rows(&self) -> usize {
        let per = decode_heads(self.head_size);
        self.kv_heads * (self.heads / self.kv_heads).div_ceil(per)
    }

    /// Whether the fused decode kernel takes this geometry (cache rows of whole 16-byte
    /// copies, `hs <= 256`).
    pub fn supported(&self) -> bool {
        let hs = self.head_size;
        hs > 0
            && hs <= 256
            && (hs * self.kv.bytes()).is_multiple_of(16)
            && self.kv_heads > 0
            && self.heads.is_multiple_of(self.kv_heads)
    }
}

/// When a decode-attention block lets the kernel after it launch (programmatic dependent
/// launch): the dependent then fetches its first weights while this kernel runs, and those
/// reads can queue ahead of this kernel's key and value reads.
pub(crate) use crate::settings::DecodeTrigger as Trigger;

impl Trigger {
    /// The kernel's `trigger` argument.
    pub(super) fn code(self) -> i32 {
        match self {
            Trigger::Start => 0,
            Trigger::AfterWait => 1,
            Trigger::AfterKeys => 2,
        }
    }
}

/// How one launch runs: passes staged ahead per warp (1 or 2), whether the splits of a group
/// merge in a thread block cluster, and when it lets the next kernel start. None changes a
/// result bit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeMode {
    pub ring: usize,
    pub cluster: bool,
    pub trigger: Trigger,
}

/// What the device offers the kernel, found when the kernels load, and the A/B switches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeDevice {
    /// Dynamic shared memory a block may have (the opt-in maximum less the static arrays).
    pub dynamic_max: usize,
    /// Clusters of [`GROUP`] blocks can be launched (sm_90+, not switched off, schedulable).
    pub cluster: bool,
    /// Whether the qkv projection before each decode attention leaves the SMs free one by one:
    /// more blocks than the device holds at once, or more than one load round a warp
    /// (`Kernels::fit_attention_rule`, at load; false until then).
    pub ragged_qkv: bool,
    /// `CudaTuning::decode_cluster` `Some(true)`: clusters for every launch where they exist.
    pub cluster_always: bool,
    /// `CudaTuning::decode_reserve`: every launch asks for the shared memory of an f32 cache's
    /// stage, whatever its cache's kind (fewer blocks of the next kernel then fit beside it).
    pub reserve_f32: bool,
    /// `CudaTuning::decode_trigger`, when set.
    pub trigger: Option<Trigger>,
}

impl DecodeDevice {
    /// Passes staged ahead per warp for a head size and cache kind: two when they fit, else
    /// one; `None` when even one does not (the two-kernel path then runs).
    pub fn ring(&self, hs: usize, kv: KvKind) -> Option<usize> {
        [2, 1]
            .into_iter()
            .find(|&r| decode_stage_bytes(hs, r, kv) <= self.dynamic_max)
    }

    /// The mode for a geometry. The rule (H200, docs/cuda.md round 19; fp16, 128-token prompt,
    /// 256 decode tokens): behind a qkv projection that fits in flight at once, the splits merge
    /// in clusters and the next kernel may start at once (global merges: Qwen2.5-0.5B -6%,
    /// Qwen2.5-1.5B -3.5%, Llama-3.2-1B -4.2% with its 128 blocks); behind a
    /// [`ragged`](Self::ragged_qkv) one they merge through global memory and the next kernel
    /// starts after this one's wait (Llama-3-8B: 233.9 → 240.1 tok/s; either change alone
    /// 238.1). `None` when no stage fits.
    pub fn mode(&self, d: &DecodeHeads) -> Option<DecodeMode> {
        let ring = self.ring(d.head_size, d.kv)?;
        let cluster = self.merges_in_clusters();
        let fallback = if self.ragged_qkv {
            Trigger::AfterWait
        } else {
            Trigger::Start
        };
        Some(DecodeMode {
            ring,
            cluster,
            trigger: self.trigger.unwrap_or(fallback),
        })
    }

    /// Dynamic shared memory a launch asks for: its stage, or with `reserve_f32` the f32
    /// cache's stage where that fits.
    pub fn launch_stage(&self, hs: usize, ring: usize, kind: KvKind) -> usize {
        let f32_stage = decode_stage_bytes(hs, ring, KvKind::F32);
        if self.reserve_f32 && f32_stage <= self.dynamic_max {
            f32_stage
        } else {
            decode_stage_bytes(hs, ring, kind)
        }
    }

    /// Whether the rule merges the splits in clusters: where the device has them, unless the
    /// qkv before is ragged (and `GENAI_BRIDGE_DECODE_CLUSTER=1` does not force them).
    pub(super) fn merges_in_clusters(&self) -> bool {
        self.cluster && (self.cluster_always || !self.ragged_qkv)
    }

    /// One line for the route's reasons.
    pub fn describe(&self) -> String {
        let merge = if !self.cluster {
            "through global memory (no clusters here, or GENAI_BRIDGE_DECODE_CLUSTER=0)"
        } else if self.merges_in_clusters() {
            "in thread block clusters"
        } else {
            "through global memory (behind a qkv projection of more than one wave or round)"
        };
        format!(
            "decode attention: {} KiB of shared memory per block, splits merged {merge}",
            self.dynamic_max / 1024,
        )
    }

    /// Opts the kernel's entries (one per cache kind) into the device's shared memory and
    /// checks that clusters of [`GROUP`] blocks with the largest stage fit; a failed call only
    /// turns the option off. `tuning`: the A/B switches over the rule (clusters, trigger,
    /// reservation).
    pub fn probe(
        ctx: &cudarc::driver::CudaContext,
        major: i32,
        entries: &[&CudaFunction],
        tuning: &CudaTuning,
    ) -> DecodeDevice {
        use sys::CUdevice_attribute::*;
        let mut device = DecodeDevice {
            dynamic_max: 0,
            cluster: false,
            ragged_qkv: false,
            cluster_always: tuning.decode_cluster == Some(true),
            reserve_f32: tuning.decode_reserve,
            trigger: tuning.decode_trigger,
        };
        if entries.is_empty() || ctx.bind_to_thread().is_err() {
            return device;
        }
        // What every entry may take (they declare the same static arrays).
        device.dynamic_max = entries
            .iter()
            .map(|f| dynamic_shared_max(ctx, f))
            .min()
            .unwrap_or(0);
        let switched_off = tuning.decode_cluster == Some(false);
        let launchable = ctx.attribute(CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH) == Ok(1);
        if major >= 9 && launchable && !switched_off {
            // The largest stage: head size 256 in an f32 cache.
            let f32_stage = |r| decode_stage_bytes(256, r, KvKind::F32);
            let stage = device.ring(256, KvKind::F32).map_or(0, f32_stage);
            device.cluster = entries
                .iter()
                .all(|f| clusters_fit(f, GROUP as u32, THREADS, stage));
        }
        device
    }
}

/// Whether at least one cluster of `group` blocks of `threads` threads with `stage` bytes of
/// dynamic shared memory each can be resident.
pub(super) fn clusters_fit(f: &CudaFunction, group: u32, threads: u32, stage: usize) -> bool {
    let Ok(shared) = u32::try_from(stage) else {
        return false;
    };
    // SAFETY: an all-zero attribute is a valid value of this plain C union.
    let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attr.value.clusterDim.x = group;
    attr.value.clusterDim.y = 1;
    attr.value.clusterDim.z = 1;
    let config = sys::CUlaunchConfig {
        gridDimX: group,
        gridDimY: 1,
        gridDimZ: 1,
        blockDimX: threads,
        blockDimY: 1,
        blockDimZ: 1,
        sharedMemBytes: shared,
        hStream: std::ptr::null_mut(),
        attrs: &mut attr,
        numAttrs: 1,
    };
    let mut clusters = 0;
    // SAFETY: `config` and `attr` live through the call, `clusters` is valid for writes and
    // `f` is a loaded function of the current context (bound by `probe`'s attribute calls).
    let status =
        unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, f.cu_function(), &config) };
    status.result().is_ok() && clusters >= 1
}

/// Grid of a launch for a cache of `capacity` positions: split blocks (a multiple of the
/// cluster width with clusters) by block rows.
pub(crate) fn decode_grid(capacity: usize, rows: usize, cluster: bool) -> (usize, usize) {
    let splits = decode_splits(capacity);
    let x = if cluster {
        splits.next_multiple_of(GROUP)
    } else {
        splits
    };
    (x, rows)
}
