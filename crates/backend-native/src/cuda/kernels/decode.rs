//! The fused decode-attention launch (`kernels/decode_attention.cu`): one call's buffers and
//! scalars, checked against the split layout and grid of `decode_device.rs`, and the launch.

use super::decode_device::*;
use super::kv::KvCache;
use super::ops::Ops;
use crate::cuda::launch::{cfg, grid_dim, int, launch_raw_in, param};
use crate::cuda::span::DevSpan;
use crate::error::Error;

/// One decode-attention call: attention of the new token at `step[0]` with the rotary
/// embedding and the KV append folded in. q and k are read from `qkv` (q heads, k heads, v
/// heads; left unrotated there); the token's rotated key and its value are written to the
/// caches at `step[0]`. `part` (`len` floats) needs `heads * decode_splits(capacity) * (hs + 2)`;
/// `counts` (`len` ints, zero, left zero) one ticket per [`DecodeHeads::rows`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct DecodeCall<'a> {
    /// The token's `[heads + 2 kv_heads, hs]` q, k and v.
    pub qkv: DevSpan<'a, f32>,
    pub step: DevSpan<'a, i32>,
    /// cos, sin caches (`[positions, rotary_dim / 2]`), rotary_dim, interleaved; none: no
    /// rotation.
    pub rotary: Option<(DevSpan<'a, f32>, DevSpan<'a, f32>, usize, bool)>,
    /// Keys, values `[kv_heads, capacity, hs]`, of the kind `heads.kv` says.
    pub cache: KvCache<'a>,
    pub part: DevSpan<'a, f32>,
    pub counts: DevSpan<'a, i32>,
    /// `[heads, hs]`.
    pub out: DevSpan<'a, f32>,
    pub heads: DecodeHeads,
    pub scale: f32,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
    pub act: i32,
}

impl Ops<'_> {
    /// The call in the device's mode (see [`DecodeDevice::mode`]).
    pub fn attention_decode(&self, c: &DecodeCall<'_>) -> Result<(), Error> {
        let hs = c.heads.head_size;
        let mode = self.k.decode.mode(&c.heads).ok_or_else(|| Error::Invalid {
            what: "decode attention",
            why: format!(
                "head size {hs} needs {} bytes of shared memory, the device gives {}",
                decode_stage_bytes(hs, 1, c.heads.kv),
                self.k.decode.dynamic_max
            ),
        })?;
        self.attention_decode_as(c, mode)
    }

    /// The call in a given mode (the checks run every mode the device has).
    pub fn attention_decode_as(&self, c: &DecodeCall<'_>, mode: DecodeMode) -> Result<(), Error> {
        let d = c.heads;
        let hs = d.head_size;
        let (capacity, kind) = (c.cache.capacity, c.cache.kind);
        let rotary_dim = c.rotary.map_or(0, |r| r.2);
        let slots = decode_splits(capacity);
        let rows = if d.supported() { d.rows() } else { 0 };
        let part_need = d.heads * slots * (hs + 2);
        let stage = self.k.decode.launch_stage(hs, mode.ring, kind);
        if rows == 0
            || kind != d.kv
            || c.part.len() < part_need
            || c.counts.len() < rows
            || rotary_dim > hs
            || !rotary_dim.is_multiple_of(2)
            || !(1..=2).contains(&mode.ring)
            || stage > self.k.decode.dynamic_max
            || (mode.cluster && !self.k.decode.cluster)
        {
            return Err(Error::Invalid {
                what: "decode attention",
                why: format!(
                    "{d:?}, rotary_dim {rotary_dim}, partials {} (need {part_need}), tickets \
                     {} (need {rows}), {mode:?}",
                    c.part.len(),
                    c.counts.len()
                ),
            });
        }
        let kernel = kind.decode_entry();
        let (k_cache, v_cache, cap, _) = c.cache.args(kernel, d.kv_heads, hs)?;
        // The token's q, k and v heads; the rotary rows read are at `step[0]`, which only the
        // device knows: checked for one position (the state keeps it within the caches').
        let qkv = c.qkv.need(kernel, "qkv", (d.heads + 2 * d.kv_heads) * hs)?;
        let step = c.step.need(kernel, "step", 1)?;
        let out = c.out.need(kernel, "out", d.heads * hs)?;
        let (cos, sin, interleaved) = match c.rotary {
            Some((cos, sin, rd, interleaved)) => (
                cos.need(kernel, "cos", rd / 2)?,
                sin.need(kernel, "sin", rd / 2)?,
                interleaved,
            ),
            None => (0, 0, false),
        };
        let (h, kvh, hs_i, slots_i) = (
            int("heads", d.heads)?,
            int("kv_heads", d.kv_heads)?,
            int("head_size", hs)?,
            int("splits", slots)?,
        );
        let (rd, inter) = (int("rotary_dim", rotary_dim)?, i32::from(interleaved));
        let win = int("window", c.window.unwrap_or(0))?;
        let cap_s = c.softcap.unwrap_or(0.0);
        let (ring, cluster) = (int("ring", mode.ring)?, i32::from(mode.cluster));
        let trigger = mode.trigger.code();
        let f = self.k.get(kernel)?;
        let (x, y) = decode_grid(capacity, rows, mode.cluster);
        let grid = (grid_dim("splits", x)?, grid_dim("rows", y)?, 1);
        let shared = u32::try_from(stage).map_err(|_| Error::Invalid {
            what: "decode attention",
            why: format!("{stage} bytes of shared memory"),
        })?;
        let (scale, act) = (c.scale, c.act);
        let (part, counts) = (c.part.ptr(), c.counts.ptr());
        let mut params = [
            param(&qkv),
            param(&step),
            param(&cos),
            param(&sin),
            param(&rd),
            param(&inter),
            param(&k_cache),
            param(&v_cache),
            param(&cap),
            param(&part),
            param(&slots_i),
            param(&counts),
            param(&out),
            param(&h),
            param(&kvh),
            param(&hs_i),
            param(&scale),
            param(&win),
            param(&cap_s),
            param(&act),
            param(&ring),
            param(&cluster),
            param(&trigger),
        ];
        let width = if mode.cluster { GROUP as u32 } else { 1 };
        // SAFETY: the arguments match the C signature of the kind's entry (`DA_PARAMS`: the
        // three entries share it) in order and type;
        // `part` and `counts` were checked against the slots and rows the grid uses, every
        // other address is a span checked above against the extent these dimensions make the
        // kernel read or write (the caches `[kv_heads, capacity, hs]`), the dynamic
        // shared memory is within what `DecodeDevice::probe` opted the function into, the
        // grid's x is a multiple of the cluster width, and `params` outlives the call.
        unsafe {
            launch_raw_in(
                self.stream,
                f,
                cfg(grid, THREADS, shared),
                &mut params,
                self.pdl,
                width,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::kernels::KvKind;

    fn layout(n: usize) -> (usize, usize, usize) {
        let l = decode_layout(n);
        (l.passes, l.splits, l.groups)
    }

    #[test]
    fn the_layout_at_its_boundaries() {
        assert_eq!(layout(1), (1, 1, 1));
        assert_eq!(layout(32), (1, 1, 1)); // one split: the block writes the output
        assert_eq!(layout(33), (1, 2, 1));
        assert_eq!(layout(190), (1, 6, 1)); // Qwen2.5-1.5B bench lengths: one group
        assert_eq!(layout(256), (1, 8, 1));
        assert_eq!(layout(257), (2, 5, 1)); // two passes per split
        assert_eq!(layout(512), (2, 8, 1));
        assert_eq!(layout(513), (2, 9, 2)); // a second group: partials and a ticket
        assert_eq!(layout(2048), (2, 32, 4));
        assert_eq!(layout(4096), (2, 64, 8));
        assert_eq!(layout(4097), (3, 43, 6)); // past 64 splits the passes grow
        assert_eq!(layout(5000), (3, 53, 7));
        assert_eq!(layout(131_072), (64, 64, 8));
    }

    #[test]
    fn every_split_has_positions_and_the_splits_stay_bounded() {
        for n in 1..=70_000 {
            let l = decode_layout(n);
            let per = l.passes * PASS;
            assert!(
                l.splits * per >= n && (l.splits - 1) * per < n,
                "n {n}: {l:?}"
            );
            assert!(l.splits <= MAX_SPLITS && l.groups <= GROUP, "n {n}: {l:?}");
            assert_eq!(l.groups, l.splits.div_ceil(GROUP));
            assert_eq!(l.groups == 1, n <= 512, "n {n}");
            assert_eq!(l.splits == 1, n <= 32, "n {n}");
            assert!(
                l.passes <= STAGED || l.splits * (l.passes - 1) * PASS < n,
                "n {n}"
            );
        }
    }

    #[test]
    fn the_grid_covers_every_length_up_to_the_capacity() {
        let mut most = 0;
        for cap in 1..=20_000 {
            most = most.max(decode_layout(cap).splits);
            assert_eq!(decode_splits(cap), most, "capacity {cap}");
        }
        assert_eq!(decode_splits(1 << 20), MAX_SPLITS);
        assert_eq!(decode_grid(100, 2, false), (4, 2));
        assert_eq!(decode_grid(100, 2, true), (8, 2)); // whole clusters
        assert_eq!(decode_grid(400, 4, true), (8, 4));
        assert_eq!(decode_grid(4096, 2, true), (64, 2));
        assert_eq!(decode_grid(600, 2, true), (16, 2));
    }

    /// The kernel's key assignment (split s starts at `lo + s * passes * 32`, warp w's keys of
    /// pass t at `s0 + t * 32 + 4 w`, `tiles = ceil((s1 - s0 - 4 w) / 32)`) covers every
    /// attended position once, never takes more passes than the split has, and gives the
    /// token's position to the last split.
    #[test]
    fn the_warps_tile_every_position_once() {
        for n in (1..=600).chain([1000, 2047, 2048, 4096, 4097, 5000]) {
            let p = n + 17; // a window leaves positions 0..lo out
            let lo = p + 1 - n;
            let l = decode_layout(n);
            let mut seen = vec![0u8; n];
            for s in 0..l.splits {
                let s0 = lo + s * l.passes * PASS;
                let s1 = (p + 1).min(s0 + l.passes * PASS);
                assert!(s0 < s1);
                assert_eq!(s1 == p + 1, s == l.splits - 1, "n {n} split {s}");
                for w in 0..WARPS {
                    let first = (s1 - s0) as isize - 4 * w as isize;
                    let tiles = if first > 0 {
                        (first as usize).div_ceil(PASS)
                    } else {
                        0
                    };
                    assert!(tiles <= l.passes);
                    for t in 0..tiles {
                        let key0 = s0 + t * PASS + 4 * w;
                        assert!(key0 < s1, "every tile starts with a key");
                        for key in (key0..key0 + 4).filter(|&k| k < s1) {
                            seen[key - lo] += 1;
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "n {n}");
        }
    }

    #[test]
    fn heads_rows_and_shared_memory() {
        let d = |heads, kv_heads, head_size| DecodeHeads {
            heads,
            kv_heads,
            head_size,
            kv: KvKind::F32,
        };
        assert_eq!(d(12, 2, 128).rows(), 6); // 6 query heads per KV head: three slices
        assert_eq!(d(32, 2, 128).rows(), 16); // 16 query heads per KV head: eight slices
        assert_eq!(d(28, 4, 128).rows(), 16);
        assert_eq!(d(12, 2, 256).rows(), 12); // 1 head per block past head size 128
        assert_eq!(d(14, 2, 132).rows(), 14);
        assert!(d(12, 2, 128).supported());
        assert!(!d(12, 2, 18).supported()); // rows not 16-byte multiples
        assert!(!d(12, 5, 128).supported());
        assert!(!d(12, 2, 260).supported());
        let f32 = KvKind::F32;
        assert_eq!(decode_stage_bytes(128, 2, f32), 65_536);
        assert_eq!(decode_stage_bytes(256, 1, f32), 65_536);
        assert_eq!(decode_stage_bytes(64, 2, f32), 32_768);
        // A half-precision cache stages its rows as they are: half the bytes.
        assert_eq!(decode_stage_bytes(128, 2, KvKind::F16), 32_768);
        assert_eq!(decode_stage_bytes(256, 2, KvKind::Bf16), 65_536);
        // Values of the warps' partials reuse the stage: 8 warps x heads x hs floats fit.
        for hs in (4..=256).step_by(4) {
            for kv in [f32, KvKind::F16, KvKind::Bf16] {
                assert!(
                    WARPS * decode_heads(hs) * hs * 4 <= decode_stage_bytes(hs, 1, kv),
                    "{hs} {kv:?}"
                );
            }
            assert!(decode_heads(hs) * hs <= 1024, "DA_VALUES");
        }
        // An H200 (227 KiB opt-in, ~12 KiB static) stages two passes at every head size; the
        // default 48 KiB stages one up to head size 128 and none at 256 in f32, two at 128
        // and one at 256 in half precision.
        let h200 = h200();
        assert_eq!(h200.ring(256, f32), Some(2));
        assert_eq!(h200.ring(128, f32), Some(2));
        let small = DecodeDevice {
            dynamic_max: 48 * 1024 - 12_112,
            cluster: false,
            ..h200
        };
        assert_eq!(small.ring(64, f32), Some(2));
        assert_eq!(small.ring(128, f32), Some(1));
        assert_eq!(small.ring(256, f32), None);
        assert_eq!(small.ring(128, KvKind::F16), Some(2));
        assert_eq!(small.ring(256, KvKind::Bf16), Some(1));
        assert!(!small.mode(&d(14, 2, 64)).is_some_and(|m| m.cluster));
        assert_eq!(small.mode(&d(32, 8, 256)), None);
        let half = DecodeHeads {
            kv: KvKind::F16,
            ..d(32, 8, 256)
        };
        assert!(small.mode(&half).is_some());
        // The reservation switch asks for the f32 stage where it fits, else the own stage.
        assert_eq!(h200.launch_stage(128, 2, KvKind::F16), 32_768);
        let reserving = DecodeDevice {
            reserve_f32: true,
            ..h200
        };
        assert_eq!(reserving.launch_stage(128, 2, KvKind::F16), 65_536);
        let small_reserving = DecodeDevice {
            reserve_f32: true,
            ..small
        };
        assert_eq!(small_reserving.launch_stage(256, 1, KvKind::Bf16), 32_768);
    }

    #[test]
    fn a_half_precision_cache_needs_rows_of_whole_16_byte_copies() {
        let d = |head_size, kv| DecodeHeads {
            heads: 14,
            kv_heads: 2,
            head_size,
            kv,
        };
        for hs in [64, 80, 96, 128, 256] {
            assert!(d(hs, KvKind::F16).supported(), "{hs}");
            assert!(d(hs, KvKind::Bf16).supported(), "{hs}");
        }
        // 4-value multiples that are not 8-value ones: f32 only (the two-kernel path
        // serves the half kinds there).
        for hs in [4, 12, 124, 132, 252] {
            assert!(d(hs, KvKind::F32).supported(), "{hs}");
            assert!(!d(hs, KvKind::F16).supported(), "{hs}");
            assert!(!d(hs, KvKind::Bf16).supported(), "{hs}");
        }
    }

    /// An H200: 227 KiB of opt-in shared memory less ~12 KiB of static arrays, clusters, no
    /// switches, the qkv held at once.
    fn h200() -> DecodeDevice {
        DecodeDevice {
            dynamic_max: 227 * 1024 - 12_112,
            cluster: true,
            ragged_qkv: false,
            cluster_always: false,
            reserve_f32: false,
            trigger: None,
        }
    }

    /// The cluster and trigger rule (docs/cuda.md round 19), and the switches over it.
    #[test]
    fn behind_a_ragged_qkv_the_splits_merge_through_global_memory_and_trigger_after_the_wait() {
        let h200 = h200();
        let llama8 = DecodeHeads {
            heads: 32,
            kv_heads: 8,
            head_size: 128,
            kv: KvKind::F16,
        };
        let mode = |dev: DecodeDevice| dev.mode(&llama8).map(|m| (m.cluster, m.trigger));
        assert_eq!(mode(h200), Some((true, Trigger::Start)));
        let ragged = DecodeDevice {
            ragged_qkv: true,
            ..h200
        };
        assert_eq!(mode(ragged), Some((false, Trigger::AfterWait)));
        // No clusters on the device: the trigger still follows the qkv.
        let older = DecodeDevice {
            cluster: false,
            ..ragged
        };
        assert_eq!(mode(older), Some((false, Trigger::AfterWait)));
        let forced = DecodeDevice {
            cluster_always: true,
            trigger: Some(Trigger::AfterKeys),
            ..ragged
        };
        assert_eq!(mode(forced), Some((true, Trigger::AfterKeys)));
        assert_eq!(
            [Trigger::Start, Trigger::AfterWait, Trigger::AfterKeys].map(Trigger::code),
            [0, 1, 2]
        );
    }

    #[test]
    fn the_rust_constants_match_the_kernel() {
        let source =
            crate::cuda::compile::family("decode_attention").expect("the decode attention family");
        for (name, value) in [
            ("DA_THREADS", THREADS as usize),
            ("DA_WARPS", WARPS),
            ("DA_HEADS", HEADS),
            ("DA_KEYS", 4),
            ("DA_PASS", PASS),
            ("DA_GROUP", GROUP),
            ("DA_MAX_SPLITS", MAX_SPLITS),
            ("DA_STAGED", STAGED),
        ] {
            let value = value.to_string();
            let defined = source.code.lines().any(|line| {
                let mut words = line.split_whitespace();
                words.next() == Some("#define")
                    && words.next() == Some(name)
                    && words.next() == Some(value.as_str())
            });
            assert!(defined, "#define {name} {value} not in the kernel");
        }
        assert_eq!(WARPS * 4, PASS);
    }
}
