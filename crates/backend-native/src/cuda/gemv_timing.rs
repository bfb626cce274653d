//! Times the one-row GEMVs (dense fp16 and int4) alone at the shapes of real models, for
//! kernel tuning on a GPU (`benches/cuda_gemv.rs`): each case's launches are captured in one
//! CUDA graph that cycles through enough distinct copies of the weights that no launch finds its
//! weights in the L2 (or through a number of copies the caller names: 1 times the launches with
//! their weights in the L2), and the graph's replays are timed on the host.

use crate::cuda::device::Device;
use crate::cuda::kernels::{
    DenseLinear, Int4Fp32, Int4Linear, Kernels, LinearShape, OneRow, Ops, RowKernel,
};
use crate::cuda::launch::launch_error as cuda;
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use std::time::Instant;

/// One linear layer of a decode step: `n` outputs (with `glu`, `n / 2` (gate, up) pairs) of
/// `k` inputs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GemvCase {
    pub name: String,
    pub n: usize,
    pub k: usize,
    pub glu: bool,
}

/// The weights a case is timed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchWeights {
    Fp16,
    /// MatMulNBits int4 as CompFp32 layers hold it on the device: block 32, f32 scales (with
    /// `half_scales` the f16 ones the tensor-core kernel then reads), and with `zero_points`
    /// f32 integral zero points (the tensor-core kernel where it fits).
    Int4 {
        zero_points: bool,
        half_scales: bool,
    },
}

impl BenchWeights {
    /// The `--weights` name: fp16, int4, int4-sym (no zero points), then for int4 `-s16` for
    /// f16 scales.
    pub fn parse(name: &str) -> Option<Self> {
        let (base, half_scales) = match name.strip_suffix("-s16") {
            Some(base) => (base, true),
            None => (name, false),
        };
        let zero_points = match base {
            "fp16" if !half_scales => return Some(BenchWeights::Fp16),
            "int4" => true,
            "int4-sym" => false,
            _ => return None,
        };
        Some(BenchWeights::Int4 {
            zero_points,
            half_scales,
        })
    }

    /// The name [`BenchWeights::parse`] reads.
    pub fn name(self) -> String {
        match self {
            BenchWeights::Fp16 => "fp16".into(),
            BenchWeights::Int4 {
                zero_points,
                half_scales,
            } => format!(
                "int4{}{}",
                if zero_points { "" } else { "-sym" },
                if half_scales { "-s16" } else { "" }
            ),
        }
    }
}

/// Block size of [`BenchWeights::Int4`].
const INT4_BLOCK: usize = 32;

impl BenchWeights {
    /// Bytes of an `n` × `k` layer on the device.
    pub fn bytes(self, n: usize, k: usize) -> usize {
        match self {
            BenchWeights::Fp16 => n * k * 2,
            // Per block of a row: 16 packed bytes, a scale (f32, or f16) and an f32 zero point.
            BenchWeights::Int4 {
                zero_points,
                half_scales,
                ..
            } => {
                let scale = if half_scales { 2 } else { 4 };
                let zp = if zero_points { 4 } else { 0 };
                n * k.div_ceil(INT4_BLOCK) * (INT4_BLOCK / 2 + scale + zp)
            }
        }
    }
}

/// One case at one kernel and split.
#[derive(Debug, Clone)]
pub struct GemvTiming {
    pub case: GemvCase,
    pub weights: BenchWeights,
    /// The kernel this run launched and its warps per column pair (int4: per row group);
    /// whether the decode rule picks this kernel and split (int4 runs the rule's only).
    pub kernel: &'static str,
    pub split: usize,
    pub rule: bool,
    pub blocks: usize,
    /// Distinct weight copies the graph cycles through, and launches per replay.
    pub copies: usize,
    pub launches: usize,
    /// Per launch, over the timed replays.
    pub us_median: f64,
    pub us_min: f64,
    /// Weight bytes per launch / median time.
    pub weight_gbs: f64,
}

/// The decode-step layers of a model shape: (hidden, query heads, KV heads, head size, MLP
/// width, vocabulary) of the shapes `models/make_bench_models.py` makes; or `grid`, plain
/// layers over n in 1,024-16,384 and k in 1,024-16,384 (powers of two, and 14,336), for
/// fitting a split rule rather than checking one model.
pub fn model_cases(model: &str) -> Option<Vec<GemvCase>> {
    if model == "grid" {
        let sizes = [1024, 2048, 4096, 8192, 14_336, 16_384];
        let cases = sizes.iter().flat_map(|&n| {
            sizes.iter().map(move |&k| GemvCase {
                name: format!("grid.n{n}.k{k}"),
                n,
                k,
                glu: false,
            })
        });
        return Some(cases.collect());
    }
    let (hidden, heads, kv, hs, mlp, vocab) = match model {
        "qwen2.5-0.5b" => (896, 14, 2, 64, 4864, 151_936),
        "qwen2.5-1.5b" => (1536, 12, 2, 128, 8960, 151_936),
        "llama3-8b" => (4096, 32, 8, 128, 14_336, 128_256),
        _ => return None,
    };
    let case = |layer: &str, n, k, glu| GemvCase {
        name: format!("{model}.{layer}"),
        n,
        k,
        glu,
    };
    Some(vec![
        case("qkv", (heads + 2 * kv) * hs, hidden, false),
        case("o", hidden, heads * hs, false),
        case("gate_up", 2 * mlp, hidden, true),
        case("down", hidden, mlp, false),
        case("lm_head", vocab, hidden, false),
    ])
}

/// Distinct copies of a `bytes` weight so that one pass over them is at least three times the
/// L2 (`l2` bytes): at least 2, at most as many as fit `budget` bytes (and at least 1).
pub fn copies_for(bytes: usize, l2: usize, budget: usize) -> usize {
    let want = (3 * l2).div_ceil(bytes.max(1)).max(2);
    want.min(budget / bytes.max(1)).max(1)
}

/// Launches per replay: whole passes over the copies, at least `floor` launches.
pub fn launches_for(copies: usize, floor: usize) -> usize {
    floor.div_ceil(copies.max(1)).max(1) * copies.max(1)
}

/// Device memory the weight copies of one case may take.
const COPY_BUDGET: usize = 4 << 30;
/// Launches per replay at least (a replay of the smallest case is then hundreds of µs, far
/// above the host's launch-and-sync overhead).
const LAUNCH_FLOOR: usize = 256;

/// Times each case on device `ordinal`. fp16: once per entry of `splits` (None: the decode
/// rule's kernel and split; 1, 2 and 4 run with both one-row kernels; other values are
/// skipped); int4: the rule's kernel and split only. `reps` timed replays each. `copies`:
/// the weight copies the launches cycle through (None: enough to defeat the L2). The kernels
/// load under `tuning` (its NVRTC definitions, rules and kernel cache).
pub fn time_gemvs(
    ordinal: usize,
    cases: &[GemvCase],
    weights: BenchWeights,
    (splits, reps, copies): (&[Option<usize>], usize, Option<usize>),
    tuning: &crate::settings::CudaTuning,
) -> Result<Vec<GemvTiming>, Error> {
    use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE;
    let device = Device::open(ordinal)?;
    let stream = device.ctx.new_stream().map_err(cuda("stream"))?;
    let kernels = Kernels::load(&device, tuning)?;
    let l2 = device
        .ctx
        .attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .map_err(cuda("device attributes"))? as usize;
    let ops = Ops {
        k: &kernels,
        stream: &stream,
        pdl: kernels.pdl,
    };
    let mut out = Vec::new();
    for case in cases {
        let bytes = weights.bytes(case.n, case.k);
        let copies = copies.map_or_else(
            || copies_for(bytes, l2, COPY_BUDGET),
            |c| c.clamp(1, (COPY_BUDGET / bytes.max(1)).max(1)),
        );
        let launches = launches_for(copies, LAUNCH_FLOOR);
        let x = DevBuf::<f32>::zeros(&stream, case.k)?;
        let y = DevBuf::<f32>::zeros(&stream, case.n)?;
        let shape = LinearShape {
            m: 1,
            k: case.k,
            n: case.n,
            ldx: case.k,
            ldy: case.n,
            glu: if case.glu { 0 } else { -1 },
        };
        let mut record = |kernel, split, rule, blocks, (us_median, us_min): (f64, f64)| {
            out.push(GemvTiming {
                case: case.clone(),
                weights,
                kernel,
                split,
                rule,
                blocks,
                copies,
                launches,
                us_median,
                us_min,
                weight_gbs: bytes as f64 / us_median / 1e3,
            })
        };
        match weights {
            BenchWeights::Fp16 => {
                let copies_w = (0..copies)
                    .map(|_| DevBuf::<u16>::zeros(&stream, case.n * case.k))
                    .collect::<Result<Vec<_>, _>>()?;
                let rule = ops.k.one_row_plan("gemv_f16", &shape);
                let plans = splits.iter().flat_map(|s| match s {
                    None => vec![rule],
                    Some(split) if [1, 2, 4].contains(split) => {
                        [RowKernel::Walk, RowKernel::Pipe, RowKernel::Shared]
                            .map(|via| OneRow { via, split: *split })
                            .into_iter()
                            .filter(|plan| ops.k.one_row_fits("gemv_f16", &shape, *plan))
                            .collect()
                    }
                    Some(_) => Vec::new(),
                });
                for plan in plans {
                    let timing = time_graph(&stream, launches, reps, |i| {
                        let d = DenseLinear {
                            w: copies_w[i % copies].span().as_bytes(),
                            x: x.span(),
                            bias: None,
                            y: y.span(),
                        };
                        ops.gemv_one_row("gemv_f16", &d, shape, 0, plan)
                    })?;
                    let blocks = shape.decode_grid(plan.split)?.0 as usize;
                    record(
                        plan.kernel("gemv_f16"),
                        plan.split,
                        plan == rule,
                        blocks,
                        timing,
                    );
                }
            }
            BenchWeights::Int4 {
                zero_points,
                half_scales,
            } => {
                let blocks_per_row = case.k.div_ceil(INT4_BLOCK);
                let per_row = case.n * blocks_per_row;
                let parts = (0..copies)
                    .map(|_| {
                        Ok((
                            DevBuf::<u8>::zeros(&stream, per_row * INT4_BLOCK / 2)?,
                            DevBuf::<f32>::zeros(&stream, per_row)?,
                            half_scales
                                .then(|| DevBuf::<u16>::zeros(&stream, per_row))
                                .transpose()?,
                            zero_points
                                .then(|| DevBuf::<f32>::zeros(&stream, per_row))
                                .transpose()?,
                        ))
                    })
                    .collect::<Result<Vec<_>, Error>>()?;
                let (kernel, config, split, _) =
                    ops.int4_one_row(&shape, INT4_BLOCK, true, half_scales, None)?;
                let timing = time_graph(&stream, launches, reps, |i| {
                    let (packed, scales, scales_f16, zp) = &parts[i % copies];
                    let l = Int4Linear {
                        packed: packed.span(),
                        scales: scales.span(),
                        scales_f16: scales_f16.as_ref().map(DevBuf::span),
                        zp: zp.as_ref().map(|z| z.span().as_bytes()),
                        x: x.span(),
                        bias: None,
                        y: y.span(),
                    };
                    let form = Int4Fp32 {
                        block: INT4_BLOCK,
                        integral_zp: true,
                    };
                    ops.gemv_int4_f32(&l, form, shape, 0)
                })?;
                record(kernel, split, true, config.grid_dim.0 as usize, timing);
            }
        }
    }
    Ok(out)
}

/// Captures `launches` calls of `launch` (with the launch index) as one graph, replays it
/// twice to warm up, then `reps` times: (median, min) µs per launch.
pub(crate) fn time_graph(
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    launches: usize,
    reps: usize,
    launch: impl Fn(usize) -> Result<(), Error>,
) -> Result<(f64, f64), Error> {
    let graph =
        crate::cuda::graph::StepGraph::capture(stream, || (0..launches).try_for_each(&launch))?;
    let mut times = Vec::with_capacity(reps);
    for rep in 0..reps + 2 {
        let start = Instant::now();
        graph.launch()?;
        stream.synchronize().map_err(cuda("sync"))?;
        if rep >= 2 {
            times.push(start.elapsed().as_secs_f64() * 1e6 / launches.max(1) as f64);
        }
    }
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
    Ok((median, times.first().copied().unwrap_or(f64::NAN)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_defeat_the_l2_within_the_budget() {
        let l2 = 60 << 20;
        // 8B gate/up (235 MB): two copies already exceed 3 × L2.
        assert_eq!(copies_for(28_672 * 4096 * 2, l2, 4 << 30), 2);
        // 0.5B qkv (2,064,384 bytes): 3 × 60 MiB / that = 91.4, so 92 copies.
        assert_eq!(copies_for(1152 * 896 * 2, l2, 4 << 30), 92);
        // A budget smaller than one copy still gives one.
        assert_eq!(copies_for(1 << 30, l2, 1 << 20), 1);
        assert_eq!(copies_for(10 << 20, l2, 30 << 20), 3);
    }

    #[test]
    fn int4_layers_count_packed_values_scales_and_zero_points() {
        assert_eq!(BenchWeights::Fp16.bytes(10, 64), 1280);
        // 2 blocks of 32 per row: 2 × (16 + 4 + 4) bytes; f16 scales 2 bytes less a block.
        let int4 = |name| BenchWeights::parse(name).expect("a --weights name");
        assert_eq!(int4("int4").bytes(10, 64), 480);
        assert_eq!(int4("int4-sym").bytes(10, 64), 400);
        assert_eq!(int4("int4-s16").bytes(10, 64), 440);
        assert_eq!(int4("int4-sym-s16").bytes(10, 64), 360);
        // A partial last block is stored whole.
        assert_eq!(int4("int4").bytes(1, 33), 48);
    }

    #[test]
    fn weight_names_round_trip_and_unknown_ones_are_refused() {
        for name in ["fp16", "int4", "int4-sym", "int4-s16", "int4-sym-s16"] {
            let w = BenchWeights::parse(name).expect("a --weights name");
            assert_eq!(w.name(), name);
        }
        for name in ["fp16-s16", "int8", "", "int4-s16-s16", "INT4", "int4-split"] {
            assert_eq!(BenchWeights::parse(name), None, "{name}");
        }
    }

    #[test]
    fn launches_are_whole_passes_over_the_copies() {
        assert_eq!(launches_for(90, 256), 270);
        assert_eq!(launches_for(2, 256), 256);
        assert_eq!(launches_for(300, 256), 300);
        assert_eq!(launches_for(0, 256), 256);
    }

    #[test]
    fn model_cases_have_the_layer_shapes() {
        let llama = model_cases("llama3-8b").expect("a known shape");
        let dims: Vec<(usize, usize, bool)> = llama.iter().map(|c| (c.n, c.k, c.glu)).collect();
        assert_eq!(
            dims,
            [
                (6144, 4096, false),
                (4096, 4096, false),
                (28_672, 4096, true),
                (4096, 14_336, false),
                (128_256, 4096, false)
            ]
        );
        assert_eq!(model_cases("qwen2.5-0.5b").expect("known")[0].n, 1152);
        let grid = model_cases("grid").expect("the grid");
        assert_eq!(grid.len(), 36);
        assert!(grid.iter().any(|c| (c.n, c.k) == (4096, 14_336)));
        assert!(model_cases("gpt-2").is_none());
    }
}
