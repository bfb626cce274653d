//! The kernel registry (every family of `kernels/` loaded as a module for the device) and one
//! typed wrapper per kernel. The wrappers take device addresses whose extents the caller sized
//! from the same dimensions (see `state.rs`), check the dimensions they are given, and do one
//! launch each.

use crate::cuda::blas::Blas;
use crate::cuda::compile::{self, Origin, SOURCES};
use crate::cuda::device::Device;
use crate::cuda::pager::PagerPass;
use crate::error::Error;
use crate::settings::CudaTuning;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig};
use cudarc::nvrtc::Ptx;
use std::collections::HashMap;

mod decode;
mod int4;
mod int4_mma;
mod kv;
mod one_row;
mod prompt;
mod rows;
mod shared;
mod waves;
pub(crate) use decode::{DecodeCall, DecodeHeads, DecodeMode, Trigger, decode_splits};
pub(crate) use int4::Int4Fp32;
pub(crate) use int4_mma::int4_mma_form;
pub(crate) use kv::{KvCache, KvKind};
pub(crate) use one_row::{DecodeGemv, OneRow, RowKernel};
use one_row::{PIPE_ROUNDS, decode_kernel, decode_pipe_kernel};
pub(crate) use prompt::{PromptAttention, PromptKernel, mma_spans};
pub(crate) use rows::ARGMAX_PARTS;

/// A device address (0 for an absent optional argument).
pub(crate) type DevPtr = u64;

/// Every kernel, loaded.
pub(crate) struct Kernels {
    functions: HashMap<&'static str, CudaFunction>,
    /// Families compiled by NVRTC at this load, and read from the disk cache.
    pub compiled: usize,
    pub cached: usize,
    /// Whether launches may be programmatic dependent launches: the device is sm_90 or later
    /// and `CudaTuning::pdl` allows them.
    pub pdl: bool,
    /// Which kernel one-row linear layers use (`CudaTuning::decode_gemv`; the default is
    /// fitted to a model by `fit_gemv_rule`).
    pub decode_gemv: DecodeGemv,
    /// Whether the tuning named the rule (then no model changes it).
    decode_gemv_named: bool,
    /// The shared memory and clusters the decode-attention kernel may use here.
    pub decode: decode::DecodeDevice,
    /// What the prompt-attention kernels may use here (`kernels/prompt.rs`).
    pub prompt: prompt::PromptDevice,
    /// Whether the device has the mma.sync tensor-core products (sm_80 or later), which the
    /// kernels that use them compile out before.
    pub mma: bool,
    /// One-row plans named by shape (`CudaTuning::row_plans`), over any rule's.
    row_plans: HashMap<(usize, usize), OneRow>,
    /// Blocks of each one-row dense GEMV the device holds at once (the `waves` split rule).
    resident: HashMap<&'static str, usize>,
    /// The device's SMs, and the dynamic shared memory a block of `gemv_decode_shared_*` may
    /// take here (0: none; `kernels/shared.rs`).
    sms: usize,
    shared_max: usize,
    /// Blocks of a shared entry an SM holds at a number of dynamic shared-memory bytes, as the
    /// occupancy query answered (asked once per pair, not at every eager launch).
    shared_per_sm: std::sync::Mutex<HashMap<(&'static str, usize), usize>>,
    /// Where the tensor-core int4 kernels may run here, and which of their entries a launch
    /// takes.
    pub int4_mma: int4_mma::Int4Mma,
    /// The tuning the kernels were loaded under (what launches read of it: the dequantised
    /// slices' width, the skinny kernel's rows).
    pub tuning: CudaTuning,
}

/// Opts `f` (with `fixed` bytes of static shared memory) into the device's largest dynamic
/// shared memory per block when that is more than `floor` bytes: the dynamic bytes a launch may
/// then use, or None (the driver does not answer, nothing above `floor`, or it refuses).
pub(crate) fn opt_in_shared(
    ctx: &CudaContext,
    f: &CudaFunction,
    fixed: usize,
    floor: usize,
) -> Option<usize> {
    use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN;
    use cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
    let optin = ctx
        .attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .ok()? as usize;
    let want = optin.saturating_sub(fixed);
    let bytes = i32::try_from(want).ok().filter(|_| want > floor)?;
    f.set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes)
        .ok()?;
    Some(want)
}

/// The dynamic shared memory `f` may take per block here: opted in past the 48 KiB a launch gets
/// by default where the device allows, else what the default leaves beside `f`'s static arrays.
pub(crate) fn dynamic_shared_max(ctx: &CudaContext, f: &CudaFunction) -> usize {
    const DEFAULT_SHARED: usize = 48 * 1024;
    let fixed = f.shared_size_bytes().map_or(DEFAULT_SHARED, |b| b as usize);
    let default_max = DEFAULT_SHARED.saturating_sub(fixed);
    opt_in_shared(ctx, f, fixed, default_max).unwrap_or(default_max)
}

pub(crate) fn launch_error(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Cuda {
        what,
        message: format!("{e:?}"),
    }
}

impl Kernels {
    /// The device's SMs (0 where the driver did not say).
    pub(crate) fn sms(&self) -> usize {
        self.sms
    }

    /// Compiles (or reads from the cache) and loads every family for the device under
    /// `tuning` (its NVRTC definitions and kernel cache, its rules). Families compile in
    /// parallel (NVRTC programs are independent); a cached cubin the driver rejects is
    /// compiled again.
    pub fn load(device: &Device, tuning: &CudaTuning) -> Result<Kernels, Error> {
        let arch = device.arch.as_str();
        let build = compile::Build::of(tuning);
        let cubins: Vec<Result<(Vec<u8>, Origin), Error>> = std::thread::scope(|scope| {
            let build = &build;
            let jobs: Vec<_> = SOURCES
                .iter()
                .map(|source| scope.spawn(move || compile::cubin(source, arch, build)))
                .collect();
            jobs.into_iter()
                .map(|job| {
                    job.join().unwrap_or_else(|_| {
                        Err(Error::Cuda {
                            what: "NVRTC",
                            message: "a compile thread panicked".into(),
                        })
                    })
                })
                .collect()
        });
        let mut functions = HashMap::new();
        let (mut compiled, mut cached) = (0, 0);
        for (source, cubin) in SOURCES.iter().zip(cubins) {
            let (cubin, origin) = cubin?;
            let module = match device.ctx.load_module(Ptx::from_binary(cubin)) {
                Ok(module) => {
                    match origin {
                        Origin::Cache => cached += 1,
                        Origin::Compiled => compiled += 1,
                    }
                    module
                }
                Err(_) if origin == Origin::Cache => {
                    compiled += 1;
                    let fresh = compile::compile(source, arch, &build.defines)?;
                    compile::store(source, arch, &fresh, &build);
                    device
                        .ctx
                        .load_module(Ptx::from_binary(fresh))
                        .map_err(launch_error("module load"))?
                }
                Err(e) => return Err(launch_error("module load")(e)),
            };
            for &symbol in source.symbols {
                let f = module
                    .load_function(symbol)
                    .map_err(launch_error("function lookup"))?;
                functions.insert(symbol, f);
            }
        }
        let attention = KvKind::ALL
            .iter()
            .map(|kind| {
                functions.get(kind.decode_entry()).ok_or(Error::Cuda {
                    what: "kernel lookup",
                    message: format!("{} is not loaded", kind.decode_entry()),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let decode = decode::DecodeDevice::probe(&device.ctx, device.major, &attention, tuning);
        let prompt = prompt::PromptDevice::probe(&device.ctx, device.major, &functions, tuning);
        let int4_mma =
            int4_mma::Int4Mma::probe(&device.ctx, device.major, &functions, tuning.int4_mma);
        let named = tuning.decode_gemv;
        let decode_gemv = named.unwrap_or(DecodeGemv::Shared);
        // Every rule plans with the resident block counts (occupancy queries at load).
        let resident = waves::resident_blocks(&device.ctx, &functions);
        let row_plans = one_row::row_plans(&tuning.row_plans);
        let sms = waves::multiprocessors(&device.ctx);
        let shared_max = shared::prepare(&device.ctx, &functions);
        Ok(Kernels {
            functions,
            compiled,
            cached,
            pdl: device.major >= 9 && tuning.pdl,
            decode_gemv,
            decode_gemv_named: named.is_some(),
            decode,
            prompt,
            mma: device.major >= 8,
            row_plans,
            resident,
            sms,
            shared_max,
            shared_per_sm: Default::default(),
            int4_mma,
            tuning: tuning.clone(),
        })
    }

    /// Whether one-token attention of this geometry runs as the fused decode kernel here.
    pub(crate) fn decode_fits(&self, d: &DecodeHeads) -> bool {
        d.supported() && self.decode.mode(d).is_some()
    }

    pub(crate) fn get(&self, name: &'static str) -> Result<&CudaFunction, Error> {
        self.functions.get(name).ok_or(Error::Cuda {
            what: "kernel lookup",
            message: format!("{name} is not loaded"),
        })
    }
}

pub(crate) fn cfg(grid: (u32, u32, u32), block: u32, shared: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: grid,
        block_dim: (block, 1, 1),
        shared_mem_bytes: shared,
    }
}

/// `usize` to a kernel's `int`, or an error naming the dimension.
pub(crate) fn int(what: &'static str, v: usize) -> Result<i32, Error> {
    i32::try_from(v).map_err(|_| Error::Invalid {
        what,
        why: format!("{v} does not fit a 32-bit kernel argument"),
    })
}

fn grid_dim(what: &'static str, v: usize) -> Result<u32, Error> {
    u32::try_from(v.max(1)).map_err(|_| Error::Invalid {
        what,
        why: format!("grid of {v} blocks"),
    })
}

/// Launches `$f` on `$stream` with the given config and arguments (each a local value).
macro_rules! launch {
    ($ops:expr, $f:expr, $cfg:expr, $($arg:expr),+ $(,)?) => {{
        let mut params = [$($crate::cuda::kernels::param($arg)),+];
        // SAFETY: every argument matches the kernel's C signature in kernels/*.cu (device
        // addresses as u64, int as i32, float as f32), the addresses point to live
        // allocations sized by `state.rs` for the dimensions passed alongside them, and
        // `params` (pointers to those arguments) outlives the call, which copies them.
        unsafe { $crate::cuda::kernels::launch_raw($ops.stream, $f, $cfg, &mut params, $ops.pdl) }
    }};
}
pub(crate) use launch;

/// The kernels bound to a stream, with the pager of the pass when weights are streamed and
/// the cuBLAS handle when prompts' dense layers run as GEMMs (`blas.rs`).
pub(crate) struct Ops<'a> {
    pub k: &'a Kernels,
    pub stream: &'a CudaStream,
    pub pager: Option<&'a PagerPass<'a>>,
    pub blas: Option<&'a Blas>,
    /// Launch with programmatic stream serialization (see `pdl_enter` in
    /// kernels/prelude.cuh): each kernel may start while the one before it finishes.
    pub pdl: bool,
}

/// A kernel parameter: the address of an argument with a C layout.
pub(crate) fn param<T: cudarc::driver::DeviceRepr>(value: &T) -> *mut std::ffi::c_void {
    (value as *const T).cast_mut().cast()
}

/// Launches `f` with `params` (pointers to the arguments, in order) on `stream`; with `pdl`,
/// as a programmatic dependent launch.
///
/// # Safety
/// `params` must match the kernel's signature and point to values that live through the call;
/// every address among them must be valid for what the kernel reads and writes.
pub(crate) unsafe fn launch_raw(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    params: &mut [*mut std::ffi::c_void],
    pdl: bool,
) -> Result<(), Error> {
    // SAFETY: the caller's guarantees are this function's; no cluster is asked for.
    unsafe { launch_raw_in(stream, f, cfg, params, pdl, 1) }
}

/// [`launch_raw`] in thread block clusters of `cluster` blocks along x (1: no cluster).
///
/// # Safety
/// As [`launch_raw`]; with `cluster > 1` the device must support clusters (sm_90+) and the
/// grid's x must be a multiple of `cluster`.
pub(crate) unsafe fn launch_raw_in(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    params: &mut [*mut std::ffi::c_void],
    pdl: bool,
    cluster: u32,
) -> Result<(), Error> {
    use cudarc::driver::sys;
    // SAFETY: an all-zero attribute is a valid (ignored) value of this plain C union.
    let mut attrs: [sys::CUlaunchAttribute; 2] = unsafe { std::mem::zeroed() };
    let mut count = 0;
    if pdl {
        let a = &mut attrs[count];
        a.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        a.value.programmaticStreamSerializationAllowed = 1;
        count += 1;
    }
    if cluster > 1 {
        let a = &mut attrs[count];
        a.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        a.value.clusterDim.x = cluster;
        a.value.clusterDim.y = 1;
        a.value.clusterDim.z = 1;
        count += 1;
    }
    // SAFETY: the caller's guarantees are this function's; the attributes are set above.
    unsafe { launch_with(stream, f, cfg, params, &mut attrs[..count]) }
}

/// Launches `f` with `params` and the launch attributes `attrs` on `stream`.
///
/// # Safety
/// As [`launch_raw`], and the device must honour every attribute asked for.
pub(crate) unsafe fn launch_with(
    stream: &CudaStream,
    f: &CudaFunction,
    cfg: LaunchConfig,
    params: &mut [*mut std::ffi::c_void],
    attrs: &mut [cudarc::driver::sys::CUlaunchAttribute],
) -> Result<(), Error> {
    use cudarc::driver::sys;
    stream
        .context()
        .bind_to_thread()
        .map_err(launch_error("kernel launch"))?;
    let config = sys::CUlaunchConfig {
        gridDimX: cfg.grid_dim.0,
        gridDimY: cfg.grid_dim.1,
        gridDimZ: cfg.grid_dim.2,
        blockDimX: cfg.block_dim.0,
        blockDimY: cfg.block_dim.1,
        blockDimZ: cfg.block_dim.2,
        sharedMemBytes: cfg.shared_mem_bytes,
        hStream: stream.cu_stream(),
        attrs: attrs.as_mut_ptr(),
        numAttrs: attrs.len() as u32,
    };
    // SAFETY: `config` and `attrs` live through the call; the caller guarantees `params`.
    unsafe {
        sys::cuLaunchKernelEx(
            &config,
            f.cu_function(),
            params.as_mut_ptr(),
            std::ptr::null_mut(),
        )
    }
    .result()
    .map_err(launch_error("kernel launch"))
}

impl Ops<'_> {
    fn pager(&self, j: usize) -> Result<&PagerPass<'_>, Error> {
        self.pager.ok_or(Error::Invalid {
            what: "pager",
            why: format!("streamed weight {j} used in a pass without the pager"),
        })
    }

    /// Before the kernels that read streamed weight `j`: wait for its copy.
    pub fn acquire(&self, j: usize) -> Result<(), Error> {
        self.pager(j)?.acquire(j)
    }

    /// After the kernels that read streamed weight `j`: release its slot.
    pub fn release(&self, j: usize) -> Result<(), Error> {
        self.pager(j)?.release(j)
    }
}

/// Shape of a linear call: `m` rows of `k` inputs (rows `ldx` apart) to `n` outputs (rows of y
/// `ldy` apart).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinearShape {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub ldx: usize,
    pub ldy: usize,
    /// -1: plain outputs; otherwise (gate, up) column pairs and the activation of the gate
    /// (0 SiLU, 1 GELU, 2 GELU tanh): `n / 2` outputs act(gate) * up.
    pub glu: i32,
}

impl LinearShape {
    fn check(&self) -> Result<(i32, i32, i32, i32, i32, i32), Error> {
        if self.ldx < self.k || self.m == 0 || (self.glu >= 0 && !self.n.is_multiple_of(2)) {
            return Err(Error::Invalid {
                what: "linear shape",
                why: format!("{self:?}"),
            });
        }
        Ok((
            int("m", self.m)?,
            int("k", self.k)?,
            int("n", self.n)?,
            int("ldx", self.ldx)?,
            int("ldy", self.ldy)?,
            int("split", self.split())?,
        ))
    }

    /// Warps per output column (in one block, summed in warp order): doubled while the launch
    /// has fewer than [`TARGET_WARPS`] warps and each warp keeps at least 256 values of a row
    /// (one 8-value unit per lane). Depends on (k, n) and the GLU pairing only.
    fn split(&self) -> usize {
        // (gate, up) pairs must share a block: at least two columns per block.
        let most = if self.glu >= 0 { 4 } else { 8 };
        let mut split = 1;
        while split < most && self.n * split < TARGET_WARPS && self.k / (split * 2) >= 256 {
            split *= 2;
        }
        split
    }

    /// Rows of x one block computes (`GEMV_ROWS`, or 1 for the decode entries).
    fn block_rows(&self) -> usize {
        if self.m == 1 { 1 } else { GEMV_ROWS }
    }

    /// Dynamic shared memory staging a block's rows of f32 activations (`stage_rows` in
    /// kernels/prelude.cuh) over `kp` columns, or 0 (the kernel then reads x from global
    /// memory, with the same results) when that exceeds [`STAGE_LIMIT`].
    fn stage_f32(&self, kp: usize) -> u32 {
        stage_bytes(self.block_rows() * kp * 4)
    }

    fn grid(&self) -> Result<(u32, u32, u32), Error> {
        Ok((
            grid_dim("gemv columns", self.n.div_ceil(GEMV_WARPS / self.split()))?,
            grid_dim("gemv rows", self.m.div_ceil(GEMV_ROWS))?,
            1,
        ))
    }
}

/// Rows of x per block of the multi-row linear kernels (`GEMV_ROWS` in kernels/prelude.cuh).
const GEMV_ROWS: usize = 4;
/// Warps per linear block (`GEMV_WARPS`).
const GEMV_WARPS: usize = 8;
/// Warps per block of the one-row kernels (`DEC_WARPS` in kernels/prelude.cuh).
const DEC_WARPS: usize = 4;
/// Adjacent columns one warp of those kernels computes (`DEC_COLS`).
const DEC_COLS: usize = 2;
/// Warps a linear launch aims to have: about 23 per SM on an H200's 132 SMs, enough 16-byte
/// loads in flight to cover DRAM latency at full bandwidth.
const TARGET_WARPS: usize = 3072;
/// Most dynamic shared memory a linear block stages activations in: under the 48 KiB a launch
/// gets without opting in, with room for the kernels' static reduction arrays.
const STAGE_LIMIT: usize = 46 * 1024;

fn stage_bytes(bytes: usize) -> u32 {
    if bytes <= STAGE_LIMIT {
        bytes as u32
    } else {
        0
    }
}

impl Ops<'_> {
    /// Dense linear; `kind` is the weight's kernel (`gemv_f32`, `gemv_f16`, `gemv_bf16`).
    #[allow(clippy::too_many_arguments)]
    pub fn gemv(
        &self,
        kind: &'static str,
        w: DevPtr,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
    ) -> Result<(), Error> {
        if s.m == 1 {
            // gemv_one_row checks the shape itself.
            let plan = self.k.one_row_plan(kind, &s);
            return self.gemv_one_row(kind, w, x, bias, y, s, act, plan);
        }
        let (m, k, n, ldx, ldy, split) = s.check()?;
        let f = self.k.get(kind)?;
        let shared = s.stage_f32(s.k.next_multiple_of(8));
        launch!(
            self,
            f,
            cfg(s.grid()?, 256, shared),
            &w,
            &x,
            &ldx,
            &bias,
            &y,
            &ldy,
            &n,
            &k,
            &m,
            &split,
            &s.glu,
            &act
        )
    }
}

#[cfg(test)]
mod tests {
    use super::LinearShape;

    fn split(n: usize, k: usize, glu: i32) -> usize {
        LinearShape::one_row(n, k, glu).split()
    }

    #[test]
    fn narrow_layers_split_their_rows_across_warps() {
        assert_eq!(split(1536, 8960, -1), 2); // Qwen2.5-1.5B down: 3072 warps
        assert_eq!(split(2048, 1536, -1), 2); // its qkv
        assert_eq!(split(896, 4864, -1), 4); // Qwen2.5-0.5B down
        assert_eq!(split(1152, 896, -1), 2); // at least 256 values per warp
        assert_eq!(split(17920, 1536, 0), 1); // wide enough already
        assert_eq!(split(64, 8960, -1), 8);
        assert_eq!(split(64, 8960, 0), 4); // GLU pairs must share a block
        assert_eq!(split(100, 100, -1), 1); // short rows
    }

    #[test]
    fn activations_are_staged_while_they_fit_the_default_shared_memory() {
        let s = |m, k| LinearShape {
            m,
            k,
            n: 64,
            ldx: k,
            ldy: 64,
            glu: -1,
        };
        assert_eq!(s(1, 8960).stage_f32(8960), 35_840);
        assert_eq!(s(1, 14336).stage_f32(14336), 0); // read from global memory instead
        assert_eq!(s(5, 1536).stage_f32(1536), 4 * 1536 * 4);
        assert_eq!(s(5, 4096).stage_f32(4096), 0);
        assert_eq!(s(1, 8960).stage_i8(32), 280 * 4 + 8960);
        assert_eq!(s(1, 100).stage_i8(16), 32 + 7 * 16); // 7 scales padded to 32 bytes
        assert!(super::int4::check_block(48).is_err());
    }

    #[test]
    fn the_rust_constants_match_the_kernel_prelude() {
        let prelude = crate::cuda::compile::PRELUDE;
        for (name, value) in [
            ("GEMV_ROWS", super::GEMV_ROWS),
            ("GEMV_WARPS", super::GEMV_WARPS),
            ("DEC_WARPS", super::DEC_WARPS),
            ("DEC_COLS", super::DEC_COLS),
        ] {
            let line = format!("#define {name} {value}\n");
            assert!(
                prelude.contains(&line),
                "{line:?} not in kernels/prelude.cuh"
            );
        }
    }
}
