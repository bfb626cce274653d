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

mod dense;
mod handle;
mod int4;
mod route;
mod slices;
#[cfg(feature = "lab")]
pub(crate) use dense::Epilogue;
pub(crate) use dense::{gemm_blas, half_copy};
pub use handle::cublas_available;
pub(crate) use handle::{Blas, GemmScratch};
#[cfg(feature = "lab")]
pub(crate) use int4::skinny_takes;
pub(crate) use route::choose;

#[cfg(test)]
mod tests;
