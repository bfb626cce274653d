//! Times the one-row dense GEMVs (`gemv_decode_*`) alone at the shapes of real models, for
//! kernel tuning on a GPU (`benches/cuda_gemv.rs`): each case's launches are captured in one
//! CUDA graph that cycles through enough distinct copies of the weights that no launch finds its
//! weights in the L2, and the graph's replays are timed on the host.

use crate::cuda::device::Device;
use crate::cuda::kernels::{DevPtr, Kernels, LinearShape, OneRow, Ops};
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

/// One case at one kernel and split.
#[derive(Debug, Clone)]
pub struct GemvTiming {
    pub case: GemvCase,
    /// Whether this run used the pipelined kernel (`gemv_decode_pipe_*`), and its warps per
    /// column pair; the kernel and split the decode rule picks.
    pub pipe: bool,
    pub split: usize,
    pub rule_pipe: bool,
    pub rule_split: usize,
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
/// width, vocabulary) of the shapes `models/make_bench_models.py` makes.
pub fn model_cases(model: &str) -> Option<Vec<GemvCase>> {
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

fn cuda(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Cuda {
        what,
        message: format!("{e:?}"),
    }
}

/// Times each case with fp16 weights on device `ordinal`, once per entry of `splits` (None: the
/// decode rule's kernel and split; splits that are not 1, 2 or 4 are skipped; each split runs
/// with both kernels), `reps` timed replays each.
pub fn time_gemvs(
    ordinal: usize,
    cases: &[GemvCase],
    splits: &[Option<usize>],
    reps: usize,
) -> Result<Vec<GemvTiming>, Error> {
    use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE;
    let device = Device::open(ordinal)?;
    let stream = device.ctx.new_stream().map_err(cuda("stream"))?;
    let kernels = Kernels::load(&device)?;
    let l2 = device
        .ctx
        .attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .map_err(cuda("device attributes"))? as usize;
    let ops = Ops {
        k: &kernels,
        stream: &stream,
        pager: None,
        blas: None,
        pdl: kernels.pdl,
    };
    let mut out = Vec::new();
    for case in cases {
        let bytes = case.n * case.k * 2;
        let copies = copies_for(bytes, l2, COPY_BUDGET);
        let weights = (0..copies)
            .map(|_| DevBuf::<u16>::zeros(&stream, case.n * case.k))
            .collect::<Result<Vec<_>, _>>()?;
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
        let rule = ops.one_row_plan("gemv_f16", &shape);
        let launches = launches_for(copies, LAUNCH_FLOOR);
        let plans = splits.iter().flat_map(|s| match s {
            None => vec![rule],
            Some(split) if [1, 2, 4].contains(split) => [false, true]
                .map(|pipe| OneRow {
                    pipe,
                    split: *split,
                })
                .to_vec(),
            Some(_) => Vec::new(),
        });
        for plan in plans {
            let ptrs: Vec<DevPtr> = weights.iter().map(|w| w.ptr).collect();
            let graph = crate::cuda::graph::StepGraph::capture(&stream, || {
                for i in 0..launches {
                    ops.gemv_one_row(
                        "gemv_f16",
                        ptrs[i % copies],
                        x.ptr,
                        0,
                        y.ptr,
                        shape,
                        0,
                        plan,
                    )?;
                }
                Ok(())
            })?;
            let mut times = Vec::with_capacity(reps);
            for rep in 0..reps + 2 {
                let start = Instant::now();
                graph.launch()?;
                stream.synchronize().map_err(cuda("sync"))?;
                // The first two replays warm the graph and the clocks.
                if rep >= 2 {
                    times.push(start.elapsed().as_secs_f64() * 1e6 / launches as f64);
                }
            }
            times.sort_by(f64::total_cmp);
            let us_median = times.get(times.len() / 2).copied().unwrap_or(f64::NAN);
            out.push(GemvTiming {
                case: case.clone(),
                pipe: plan.pipe,
                split: plan.split,
                rule_pipe: rule.pipe,
                rule_split: rule.split,
                blocks: shape.decode_grid(plan.split)?.0 as usize,
                copies,
                launches,
                us_median,
                us_min: times.first().copied().unwrap_or(f64::NAN),
                weight_gbs: bytes as f64 / us_median / 1e3,
            });
        }
    }
    Ok(out)
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
        assert!(model_cases("gpt-2").is_none());
    }
}
