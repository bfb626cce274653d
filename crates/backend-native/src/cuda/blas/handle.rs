//! The cuBLAS side of the prompt GEMMs: the library check, a generation's handle with its
//! workspace and scratch ([`Blas`]), the scratch's sizes, and one `cublasGemmEx` in cuBLAS's
//! column-major terms ([`ColMajor`]).

use crate::cuda::kernels::{CHUNK, GemmType};
use crate::cuda::launch::{int, launch_error};
use crate::cuda::memory::{DevBuf, DevPtr};
use crate::error::Error;
use cudarc::cublas::{result as cublas, sys};
use cudarc::driver::CudaStream;
use std::ffi::c_void;
use std::sync::Arc;

/// cuBLAS workspace of a generation (what NVIDIA recommends for Hopper), given to the handle
/// once so that no call allocates.
pub(crate) const WORKSPACE_BYTES: usize = 32 << 20;

/// Fewest rows of x that go through a GEMM.
pub(crate) const MIN_ROWS: usize = 2;

/// The cuBLAS entry points used here (a library lacking one would panic in cudarc's loader).
const SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSetWorkspace_v2",
    "cublasSetMathMode",
    "cublasSetPointerMode_v2",
    "cublasGemmEx",
];

/// Why cuBLAS cannot be used here, if it cannot.
pub fn cublas_available() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library names cudarc would use; nothing is called.
    if !unsafe { sys::is_culib_present() } {
        return Err("the cuBLAS library (libcublas.so) was not found on the library path".into());
    }
    // SAFETY: a candidate library loads (checked above), so `culib` opens it instead of
    // panicking; looking its symbols up runs none of its code.
    let lib = unsafe { sys::culib() };
    for name in SYMBOLS {
        // SAFETY: the symbol is only looked up, never called through this function type.
        if unsafe { lib.get::<unsafe extern "C" fn()>(name.as_bytes()) }.is_err() {
            return Err(format!("the cuBLAS library found has no {name}"));
        }
    }
    Ok(())
}

fn blas_error(what: &'static str) -> impl Fn(cublas::CublasError) -> Error {
    move |e| Error::Cuda {
        what,
        message: format!("{e:?}"),
    }
}

/// cuBLAS's data type of `ty`'s values.
fn data_type(ty: GemmType) -> sys::cudaDataType {
    match ty {
        GemmType::F32 => sys::cudaDataType::CUDA_R_32F,
        GemmType::F16 => sys::cudaDataType::CUDA_R_16F,
        GemmType::Bf16 => sys::cudaDataType::CUDA_R_16BF,
    }
}

/// cuBLAS's compute type for a GEMM of `ty`: f32 sums, never TF32 for f32.
fn compute_type(ty: GemmType) -> sys::cublasComputeType_t {
    match ty {
        GemmType::F32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_PEDANTIC,
        GemmType::F16 | GemmType::Bf16 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
    }
}

/// A generation's GEMM scratch: x cast to 16 bits `[CHUNK, k]` for the widest half-precision
/// input, the GEMM's sums `[CHUNK, n]` for the widest output (read by the epilogue), and the
/// dequantised column slice of the widest int4 layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GemmScratch {
    /// u16 values.
    pub cast: usize,
    /// f32 values.
    pub out: usize,
    /// Bytes.
    pub dequant: usize,
}

impl GemmScratch {
    /// For dense layers `(type, k, n)` and CompFp32 int4 layers `(type dequantised to, k, n)`
    /// run over up to `CHUNK` rows, int4 layers dequantised `dequant_values` at a time.
    pub fn of(
        dense: impl IntoIterator<Item = (GemmType, usize, usize)>,
        int4: impl IntoIterator<Item = (GemmType, usize, usize)>,
        dequant_values: usize,
    ) -> Self {
        let (mut k, mut n, mut dequant) = (0, 0, 0);
        let mut add = |ty: GemmType, lk: usize, ln: usize| {
            if ty != GemmType::F32 {
                k = k.max(lk);
            }
            n = n.max(ln);
        };
        for (ty, lk, ln) in dense {
            add(ty, lk, ln);
        }
        for (ty, lk, ln) in int4 {
            add(ty, lk, ln);
            dequant = dequant
                .max(super::slices::dequant_cols_in(lk, ln, dequant_values) * lk * ty.size());
        }
        GemmScratch {
            cast: CHUNK * k,
            out: CHUNK * n,
            dequant,
        }
    }

    /// Device bytes, the workspace included.
    pub fn bytes(&self) -> usize {
        WORKSPACE_BYTES + 2 * self.cast + 4 * self.out + self.dequant
    }
}

/// One `cublasGemmEx` in cuBLAS's column-major terms: `C (m × n) = op(A) (m × k) · op(B)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ColMajor {
    pub trans_a: bool,
    pub trans_b: bool,
    pub m: i32,
    pub n: i32,
    pub k: i32,
    pub lda: i32,
    pub ldb: i32,
    pub ldc: i32,
}

impl ColMajor {
    /// Row-major `y[rows, n]` (rows `ldc` apart) = `x[rows, k]` (rows `ldb` apart) · `W^T`,
    /// W `[n, k]` row-major: a row-major matrix is its transpose column-major with the same
    /// leading dimension, so C = y^T (n × rows), A = W^T as stored (k × n, transposed),
    /// B = x^T as stored (k × rows).
    pub fn of(rows: usize, k: usize, n: usize, ldb: usize, ldc: usize) -> Result<Self, Error> {
        if rows == 0 || k == 0 || n == 0 || ldb < k || ldc < n {
            return Err(Error::Invalid {
                what: "GEMM shape",
                why: format!("rows {rows}, k {k}, n {n}, ldb {ldb}, ldc {ldc}"),
            });
        }
        Ok(ColMajor {
            trans_a: true,
            trans_b: false,
            m: int("n", n)?,
            n: int("m", rows)?,
            k: int("k", k)?,
            lda: int("k", k)?,
            ldb: int("ldx", ldb)?,
            ldc: int("ldy", ldc)?,
        })
    }
}

/// A cuBLAS handle, destroyed on drop.
pub(super) struct Handle(sys::cublasHandle_t);

impl Handle {
    /// A handle issuing on `stream`, with host scalars and a math mode without TF32.
    pub(super) fn new(stream: &CudaStream) -> Result<Self, Error> {
        cublas_available().map_err(|message| Error::Cuda {
            what: "cuBLAS",
            message,
        })?;
        stream
            .context()
            .bind_to_thread()
            .map_err(launch_error("cuBLAS context"))?;
        let handle = Handle(cublas::create_handle().map_err(blas_error("cublasCreate"))?);
        // SAFETY: the handle is live and the stream belongs to the context bound above (the
        // caller keeps the stream alive as long as the handle).
        unsafe { cublas::set_stream(handle.0, stream.cu_stream() as _) }
            .map_err(blas_error("cublasSetStream"))?;
        // The default math mode uses TF32 for f32 nowhere; disallowing reduced-precision
        // reductions (the same value with that flag) keeps split sums in f32 as well.
        let math = sys::cublasMath_t::CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
        let host = sys::cublasPointerMode_t::CUBLAS_POINTER_MODE_HOST;
        // SAFETY: the handle is live; both calls only set its modes.
        unsafe { sys::cublasSetMathMode(handle.0, math) }
            .result()
            .map_err(blas_error("cublasSetMathMode"))?;
        // SAFETY: as above.
        unsafe { sys::cublasSetPointerMode_v2(handle.0, host) }
            .result()
            .map_err(blas_error("cublasSetPointerMode"))?;
        Ok(handle)
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed exactly once, here; a failure only leaks it.
        let _ = unsafe { cublas::destroy_handle(self.0) };
    }
}

/// A generation's cuBLAS handle, bound to its stream, with a fixed workspace and the scratch.
pub(crate) struct Blas {
    // Dropped first: the handle goes before the workspace it was given.
    handle: Handle,
    /// Held for the handle, which was given its address.
    pub(super) _workspace: DevBuf<u8>,
    pub(super) cast: DevBuf<u16>,
    pub(super) out: DevBuf<f32>,
    pub(super) dequant: DevBuf<u8>,
    pub(super) stream: Arc<CudaStream>,
}

// SAFETY: the handle is owned by this value alone and cuBLAS lets a handle be used from any
// host thread; `Blas` is not `Sync`, so only one thread uses it at a time.
unsafe impl Send for Blas {}

impl Blas {
    pub fn new(stream: &Arc<CudaStream>, scratch: GemmScratch) -> Result<Self, Error> {
        let workspace = DevBuf::<u8>::zeros(stream, WORKSPACE_BYTES)?;
        let cast = DevBuf::<u16>::zeros(stream, scratch.cast)?;
        let out = DevBuf::<f32>::zeros(stream, scratch.out)?;
        let dequant = DevBuf::<u8>::zeros(stream, scratch.dequant)?;
        let handle = Handle::new(stream)?;
        // cublasSetStream resets the workspace: it is set after.
        // SAFETY: the handle is live; the workspace is a device allocation of WORKSPACE_BYTES
        // (256-byte aligned, as cudaMalloc's) that outlives the handle (field order).
        unsafe {
            sys::cublasSetWorkspace_v2(handle.0, workspace.ptr as *mut c_void, WORKSPACE_BYTES)
        }
        .result()
        .map_err(blas_error("cublasSetWorkspace"))?;
        Ok(Blas {
            handle,
            _workspace: workspace,
            cast,
            out,
            dequant,
            stream: Arc::clone(stream),
        })
    }

    /// C = op(A) · op(B) (f32 C, `ty` A and B).
    pub(super) fn gemm(
        &self,
        ty: GemmType,
        g: ColMajor,
        (a, b, c): (DevPtr, DevPtr, DevPtr),
    ) -> Result<(), Error> {
        let op = |t| {
            if t {
                sys::cublasOperation_t::CUBLAS_OP_T
            } else {
                sys::cublasOperation_t::CUBLAS_OP_N
            }
        };
        let (alpha, beta) = (1.0f32, 0.0f32);
        // cuBLAS issues through the runtime, on the thread's current context.
        self.stream
            .context()
            .bind_to_thread()
            .map_err(launch_error("cuBLAS context"))?;
        // SAFETY: the handle is live and issues on this generation's stream; A, B and C are
        // device allocations holding the extents `g` describes (checked by the caller against
        // the scratch lengths and the layer's shape); alpha and beta are host f32 values (host
        // pointer mode, compute type 32F) read before the call returns.
        let status = unsafe {
            sys::cublasGemmEx(
                self.handle.0,
                op(g.trans_a),
                op(g.trans_b),
                g.m,
                g.n,
                g.k,
                (&alpha as *const f32).cast(),
                a as *const c_void,
                data_type(ty),
                g.lda,
                b as *const c_void,
                data_type(ty),
                g.ldb,
                (&beta as *const f32).cast(),
                c as *mut c_void,
                sys::cudaDataType::CUDA_R_32F,
                g.ldc,
                compute_type(ty),
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        status.result().map_err(blas_error("cublasGemmEx"))
    }
}

impl Drop for Blas {
    fn drop(&mut self) {
        // The handle is destroyed next (field drop) through the runtime, on the thread's
        // current context: make it this stream's. A failure only risks leaking the handle.
        let _ = self.stream.context().bind_to_thread();
    }
}
