//! Prompt (prefill) linear layers through cuBLAS GEMMs: dense f32/f16/bf16 weights and CompFp32
//! int4 ones (dequantised into a scratch, `blas/int4.rs`), two rows of x or more (decode steps
//! and CompInt8 int4 layers keep the GEMV kernels). cuBLAS is loaded at run time; where it is
//! missing the decoder keeps the GEMV kernels and says so in its reasons.
//!
//! Our row-major `y[m, n] = x[m, k] · W^T` (W stored `[n, k]`) is, read column-major,
//! `Y^T (n × m) = W^T-as-stored^T · X^T`: one `cublasGemmEx` with A = W (transposed, lda k),
//! B = x (lda `ldx`), C = y (ldc `ldy`), cuBLAS dimensions (n, m, k). f16/bf16 weights take x
//! rounded to their type (a small cast kernel into a fixed scratch) and sum in f32
//! (`CUBLAS_COMPUTE_32F`); f32 weights sum in pure f32 (`CUBLAS_COMPUTE_32F_PEDANTIC`, the
//! handle's math mode never allowing TF32). When the layer has a bias, activation rounding or
//! the GLU form, the GEMM writes a scratch and `gemm_epilogue_f32` applies the GEMV kernels'
//! epilogue from there.

use crate::cuda::kernels::{DevPtr, LinearShape, Ops, cfg, int, launch, launch_error};
use crate::cuda::memory::DevBuf;
use crate::cuda::state::CHUNK;
use crate::error::Error;
use crate::settings::CudaTuning;
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

/// Whether prompts use the GEMMs (`tuning.prefill_gemm`, and cuBLAS works: a handle is made
/// and dropped on `stream`), and the route reason saying so.
pub(crate) fn choose(tuning: &CudaTuning, stream: &CudaStream) -> (bool, String) {
    if !tuning.prefill_gemm {
        return (
            false,
            format!(
                "prompt linear layers: GEMV kernels, cuBLAS GEMMs turned off ({}=0)",
                crate::settings::PREFILL_GEMM
            ),
        );
    }
    match Handle::new(stream) {
        Ok(_) => (
            true,
            format!(
                "prompt linear layers: cuBLAS GEMMs for dense weights; {}",
                int4::route_note(tuning.int4_skinny_rows)
            ),
        ),
        Err(why) => (
            false,
            format!("prompt linear layers: GEMV kernels, cuBLAS unavailable: {why}"),
        ),
    }
}

/// A dense weight's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GemmType {
    F32,
    F16,
    Bf16,
}

impl GemmType {
    /// The type of a dense layer's GEMV kernel (`Form::Dense`).
    pub fn of(kernel: &str) -> Option<GemmType> {
        match kernel {
            "gemv_f32" => Some(GemmType::F32),
            "gemv_f16" => Some(GemmType::F16),
            "gemv_bf16" => Some(GemmType::Bf16),
            _ => None,
        }
    }

    /// The type a MatMulNBits layer dequantises to for a prompt GEMM: its scales' type (what
    /// the ONNX Runtime CUDA EP computes in).
    pub fn of_scales(dtype: genai_frontend::WeightDType) -> GemmType {
        match dtype {
            genai_frontend::WeightDType::F32 => GemmType::F32,
            genai_frontend::WeightDType::F16 => GemmType::F16,
            genai_frontend::WeightDType::BF16 => GemmType::Bf16,
        }
    }

    /// Bytes of one value.
    pub fn size(self) -> usize {
        match self {
            GemmType::F32 => 4,
            GemmType::F16 | GemmType::Bf16 => 2,
        }
    }

    fn data(self) -> sys::cudaDataType {
        match self {
            GemmType::F32 => sys::cudaDataType::CUDA_R_32F,
            GemmType::F16 => sys::cudaDataType::CUDA_R_16F,
            GemmType::Bf16 => sys::cudaDataType::CUDA_R_16BF,
        }
    }

    fn compute(self) -> sys::cublasComputeType_t {
        match self {
            GemmType::F32 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F_PEDANTIC,
            GemmType::F16 | GemmType::Bf16 => sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
        }
    }

    /// The kernel rounding x to this type (none: f32 x is read as it is).
    fn cast_kernel(self) -> Option<&'static str> {
        match self {
            GemmType::F32 => None,
            GemmType::F16 => Some("cast_rows_f16"),
            GemmType::Bf16 => Some("cast_rows_bf16"),
        }
    }
}

/// Values also held rounded to a 16-bit GEMM type, rows of the consumer's k values apart,
/// written by the kernel that produced them (a norm, the prompt attention's merge, a GEMM
/// epilogue): a prompt GEMM of type `ty` reads them instead of casting x itself. They live in
/// the cast scratch, so they hold until the next producer or cast writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HalfCopy {
    pub ptr: DevPtr,
    pub ty: GemmType,
    /// Values the allocation at `ptr` holds.
    pub len: usize,
}

impl HalfCopy {
    /// The kernels' arguments for an optional copy: its address and 1 for bf16, 0 for f16;
    /// (0, 0) for none.
    pub fn args(copy: Option<HalfCopy>) -> (DevPtr, i32) {
        copy.map_or((0, 0), |h| (h.ptr, i32::from(h.ty == GemmType::Bf16)))
    }
}

/// The 16-bit type a value's half copy should have, given the GEMM type each of its consumers
/// would run (`None`: that consumer reads f32 x, or runs no GEMM): the one 16-bit type among
/// them, or none when no consumer casts or two would cast to different types (each then casts
/// for itself).
pub(crate) fn common_half(
    consumers: impl IntoIterator<Item = Option<GemmType>>,
) -> Option<GemmType> {
    let mut found = None;
    for ty in consumers.into_iter().flatten() {
        if ty == GemmType::F32 {
            continue;
        }
        match found {
            None => found = Some(ty),
            Some(t) if t != ty => return None,
            Some(_) => {}
        }
    }
    found
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
            dequant = dequant.max(dequant_cols_in(lk, ln, dequant_values) * lk * ty.size());
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
struct Handle(sys::cublasHandle_t);

impl Handle {
    /// A handle issuing on `stream`, with host scalars and a math mode without TF32.
    fn new(stream: &CudaStream) -> Result<Self, Error> {
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
    _workspace: DevBuf<u8>,
    cast: DevBuf<u16>,
    out: DevBuf<f32>,
    dequant: DevBuf<u8>,
    stream: Arc<CudaStream>,
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
    fn gemm(
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
                ty.data(),
                g.lda,
                b as *const c_void,
                ty.data(),
                g.ldb,
                (&beta as *const f32).cast(),
                c as *mut c_void,
                sys::cudaDataType::CUDA_R_32F,
                g.ldc,
                ty.compute(),
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

pub(crate) fn elementwise_blocks(total: usize) -> u32 {
    total.div_ceil(256).clamp(1, 4096) as u32
}

/// The half copies around one linear (`HalfCopy`): x's, written by the kernel before it
/// (`x`), and where its GEMM epilogue should write y's for the GEMM after it (`y`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Halves {
    pub x: Option<HalfCopy>,
    pub y: Option<HalfCopy>,
}

impl Ops<'_> {
    /// The handle a linear of `m` rows runs its GEMM on here, if it does: the pass has one,
    /// `MIN_ROWS` rows or more, and for a layer dequantised first (`dequant`), a dequantisation
    /// scratch.
    pub(crate) fn gemm_blas(&self, m: usize, dequant: bool) -> Option<&Blas> {
        self.blas
            .filter(|b| m >= MIN_ROWS && (!dequant || b.dequant.len > 0))
    }

    /// Where a producer of `m` rows of `k` values may also write them rounded to `ty` for the
    /// GEMMs after it (the cast scratch, where it holds them); none for f32 or no type.
    pub(crate) fn half_copy(&self, m: usize, k: usize, ty: Option<GemmType>) -> Option<HalfCopy> {
        let ty = ty.filter(|t| *t != GemmType::F32)?;
        let blas = self.gemm_blas(m, false)?;
        (m * k <= blas.cast.len).then_some(HalfCopy {
            ptr: blas.cast.ptr,
            ty,
            len: blas.cast.len,
        })
    }

    /// A dense linear layer: through cuBLAS for `MIN_ROWS` rows or more when this pass has a
    /// handle, else the GEMV kernel `kernel`. Returns y's half copy if the GEMM wrote it.
    #[allow(clippy::too_many_arguments)]
    pub fn dense(
        &self,
        kernel: &'static str,
        w: DevPtr,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
        halves: Halves,
    ) -> Result<Option<HalfCopy>, Error> {
        match (self.gemm_blas(s.m, false), GemmType::of(kernel)) {
            (Some(blas), Some(ty)) => self.gemm(blas, ty, w, x, bias, y, s, act, halves),
            _ => self.gemv(kernel, w, x, bias, y, s, act).map(|()| None),
        }
    }

    /// y = x W (+ bias) through cuBLAS, with the GEMV kernels' epilogue (`LinearShape::glu`).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm(
        &self,
        blas: &Blas,
        ty: GemmType,
        w: DevPtr,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
        halves: Halves,
    ) -> Result<Option<HalfCopy>, Error> {
        self.gemm_with(blas, ty, x, bias, y, s, act, halves, |b, ldb, c, ldc| {
            blas.gemm(ty, ColMajor::of(s.m, s.k, s.n, ldb, ldc)?, (w, b, c))
        })
    }

    /// The frame of a GEMM linear: checks, x cast to `ty` when it is 16 bits (unless
    /// `halves.x` holds it so), the sums written by `sums(b, ldb, c, ldc)` (B = x as the GEMM
    /// reads it, C = y or the scratch), then the epilogue where the layer has one, which also
    /// writes `halves.y`. Returns y's half copy if it was written.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemm_with(
        &self,
        blas: &Blas,
        ty: GemmType,
        x: DevPtr,
        bias: DevPtr,
        y: DevPtr,
        s: LinearShape,
        act: i32,
        halves: Halves,
        sums: impl FnOnce(DevPtr, usize, DevPtr, usize) -> Result<(), Error>,
    ) -> Result<Option<HalfCopy>, Error> {
        let LinearShape {
            m,
            k,
            n,
            ldx,
            ldy,
            glu,
        } = s;
        let cols = if glu >= 0 { n / 2 } else { n };
        let bad = |why: String| Error::Invalid {
            what: "GEMM linear",
            why,
        };
        if ldx < k || ldy < cols || (glu >= 0 && !n.is_multiple_of(2)) {
            return Err(bad(format!("{s:?}")));
        }
        if blas.stream.cu_stream() != self.stream.cu_stream() {
            return Err(bad("the cuBLAS handle issues on another stream".into()));
        }
        let (b, ldb) = match (ty.cast_kernel(), halves.x) {
            (None, _) => (x, ldx),
            (Some(_), Some(h)) if h.ty == ty => {
                if m * k > h.len {
                    return Err(bad(format!("{m} × {k} values exceed x's half copy")));
                }
                (h.ptr, k)
            }
            (Some(name), _) => {
                if m * k > blas.cast.len {
                    return Err(bad(format!("{m} × {k} values exceed the cast scratch")));
                }
                let (mi, ki, ldxi) = (int("m", m)?, int("k", k)?, int("ldx", ldx)?);
                let f = self.k.get(name)?;
                let c = cfg((elementwise_blocks(m * k), 1, 1), 256, 0);
                let out = blas.cast.ptr;
                launch!(self, f, c, &x, &ldxi, &out, &mi, &ki)?;
                (out, k)
            }
        };
        let epilogue = bias != 0 || act != 0 || glu >= 0;
        let (c, ldc) = if epilogue {
            if m * n > blas.out.len {
                return Err(bad(format!("{m} × {n} sums exceed the GEMM scratch")));
            }
            (blas.out.ptr, n)
        } else {
            (y, ldy)
        };
        sums(b, ldb, c, ldc)?;
        if !epilogue {
            return Ok(None);
        }
        let half = halves.y.filter(|h| m * cols <= h.len);
        self.gemm_epilogue(blas.out.ptr, bias, (y, ldy), m, n, act, glu, half)?;
        Ok(half)
    }

    /// y (rows `ldy` apart) from GEMM sums `[m, n]`: `glu < 0`, `[m, n]` as `linear_store`
    /// (bias, rounding to the `act` precision); `glu >= 0`, `[m, n / 2]` act(gate) * up over
    /// the (gate, up) column pairs. With `half`, y is also written there rounded to its type
    /// (rows of y's values apart).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_epilogue(
        &self,
        sums: DevPtr,
        bias: DevPtr,
        (y, ldy): (DevPtr, usize),
        m: usize,
        n: usize,
        act: i32,
        glu: i32,
        half: Option<HalfCopy>,
    ) -> Result<(), Error> {
        let cols = if glu >= 0 { n / 2 } else { n };
        if ldy < cols || (glu >= 0 && !n.is_multiple_of(2)) {
            return Err(Error::Invalid {
                what: "GEMM epilogue",
                why: format!("m {m}, n {n}, ldy {ldy}, glu {glu}"),
            });
        }
        let (mi, ni, ldyi) = (int("m", m)?, int("n", n)?, int("ldy", ldy)?);
        let f = self.k.get("gemm_epilogue_f32")?;
        let c = cfg((elementwise_blocks(m * cols), 1, 1), 256, 0);
        let (half, half_bf) = HalfCopy::args(half);
        launch!(
            self, f, c, &sums, &bias, &y, &ldyi, &mi, &ni, &act, &glu, &half, &half_bf
        )
    }
}

mod int4;
mod slices;
pub(crate) use int4::skinny_takes;
pub(crate) use slices::dequant_cols_in;

#[cfg(test)]
mod tests;
