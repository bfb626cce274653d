//! What the fused MLP's 64-bit fixed-point sums cost as the blocks adding into them multiply
//! (`atomic_fixed_bench` in `benches/step_proto.cu`; CUDA_NOTES round 37): a graph of launches
//! of `blocks` blocks each adding one value into each of `hidden` words, against the same
//! launches adding nothing, so the difference is the adds' own time per launch.

use crate::cuda::compile;
use crate::cuda::device::Device;
use crate::cuda::gemv_timing::time_graph;
use crate::cuda::kernels::{launch_error as cuda, launch_raw, param};
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use cudarc::driver::LaunchConfig;

/// One case's timing: µs per launch with and without the adds (medians of the replays).
#[derive(Debug, Clone, PartialEq)]
pub struct AtomicTiming {
    pub hidden: usize,
    pub blocks: usize,
    pub threads: u32,
    pub stride: usize,
    pub with_adds_us: f64,
    pub without_us: f64,
}

/// The cases: the 0.5B and 1.5B hidden widths; one block an SM (the fused launch), up to one
/// block per 8 intermediate units of the 0.5B MLP (608) and twice that.
pub fn atomic_cases() -> Vec<(usize, usize, u32, usize)> {
    let mut all = Vec::new();
    for hidden in [896, 1536] {
        for blocks in [122, 304, 608, 1216] {
            for threads in [256, 512] {
                all.push((hidden, blocks, threads, 1));
            }
        }
        all.push((hidden, 608, 256, 4));
    }
    all
}

/// Times every case on device `ordinal`, `launches` launches a graph, `reps` replays.
pub fn time_atomics(
    ordinal: usize,
    reps: usize,
    report: &mut dyn FnMut(&AtomicTiming),
) -> Result<(), Error> {
    let device = Device::open(ordinal)?;
    let stream = device.ctx.new_stream().map_err(cuda("stream"))?;
    let cubin = compile::compile(&super::STEP_PROTO, &device.arch)?;
    let module = device
        .ctx
        .load_module(cudarc::nvrtc::Ptx::from_binary(cubin))
        .map_err(cuda("module load"))?;
    let f = module
        .load_function("atomic_fixed_bench")
        .map_err(cuda("function lookup"))?;
    let acc = DevBuf::<u64>::zeros(&stream, 4 * 1536)?;
    for (hidden, blocks, threads, stride) in atomic_cases() {
        let time = |atomics: i32| {
            let (h, s) = (hidden as i32, stride as i32);
            let cfg = LaunchConfig {
                grid_dim: (blocks as u32, 1, 1),
                block_dim: (threads, 1, 1),
                shared_mem_bytes: 0,
            };
            time_graph(&stream, 50, reps, |_| {
                let mut params = [param(&acc.ptr), param(&h), param(&s), param(&atomics)];
                // SAFETY: the arguments match atomic_fixed_bench's signature (a device address,
                // three ints) and `acc` holds 4 * 1536 words, every index the kernel forms
                // (below hidden * stride <= 1536 * 4); `params` outlives the call.
                unsafe { launch_raw(&stream, &f, cfg, &mut params, false) }
            })
            .map(|(median, _)| median)
        };
        let t = AtomicTiming {
            hidden,
            blocks,
            threads,
            stride,
            with_adds_us: time(1)?,
            without_us: time(0)?,
        };
        report(&t);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_stays_inside_the_sums_buffer() {
        for (hidden, blocks, threads, stride) in atomic_cases() {
            assert!(hidden * stride <= 4 * 1536, "{hidden} x {stride}");
            assert!(blocks > 0 && threads % 32 == 0);
        }
    }
}
