//! Launching a kernel: the launch configuration, kernel `int`s and grid sizes checked, the
//! parameter array, the driver call (with programmatic dependent launch and clusters as
//! asked), the shared-memory opt-in, and driver errors as the crate's [`Error`].

use crate::error::Error;
use cudarc::driver::{CudaContext, CudaFunction, CudaStream, LaunchConfig};

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

/// A driver error as the crate's [`Error`], naming the operation.
pub(crate) fn launch_error(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Cuda {
        what,
        message: format!("{e:?}"),
    }
}

/// A launch of `grid` blocks of `block` threads (one-dimensional) with `shared` bytes of
/// dynamic shared memory.
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

/// A grid dimension of `v` blocks (at least one), or an error naming it.
pub(crate) fn grid_dim(what: &'static str, v: usize) -> Result<u32, Error> {
    u32::try_from(v.max(1)).map_err(|_| Error::Invalid {
        what,
        why: format!("grid of {v} blocks"),
    })
}

/// Launches `$f` on `$stream` with the given config and arguments (each a local value). Every
/// wrapper using it passes device addresses that [`DevSpan::need`](crate::cuda::span::DevSpan)
/// checked against the extents its dimensions make the kernel read or write, or scratch of
/// the wrapper's own whose size it checked (the GEMM scratch, a half copy's `len`).
macro_rules! launch {
    ($ops:expr, $f:expr, $cfg:expr, $($arg:expr),+ $(,)?) => {{
        let mut params = [$($crate::cuda::launch::param($arg)),+];
        // SAFETY: every argument matches the kernel's C signature in kernels/*.cu (device
        // addresses as u64, int as i32, float as f32); each address was checked by the wrapper
        // to hold what the dimensions passed alongside it make the kernel read or write (a
        // span's `need`, or the scratch lengths the GEMM frame compares); and `params`
        // (pointers to those arguments) outlives the call, which copies them.
        unsafe { $crate::cuda::launch::launch_raw($ops.stream, $f, $cfg, &mut params, $ops.pdl) }
    }};
}
pub(crate) use launch;

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
