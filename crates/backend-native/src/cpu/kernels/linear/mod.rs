//! Linear layers `y[m, n] = x[m, k] · W + bias` over prepared weights (dense f32 or MatMulNBits
//! int4), split over output columns across threads.
//!
//! Decode (`m == 1`) is a memory-bound GEMV: each thread streams its own column range of the
//! weights once (dense weights: as several parallel streams, and a thread that finishes early
//! takes over the tail of the others' ranges). Prefill (`m > 1`) walks blocks of rows and, within
//! a block, tiles of columns, so the weights stream from memory once per block of rows and are
//! reused from cache within it (dense weights: a register-blocked micro-kernel over k blocks).

mod dense;
mod dense_panel;
#[cfg(target_arch = "x86_64")]
mod dense_x86;
mod driver;
mod int4;
mod int4_matmul;
mod int4_quant;
mod int4_scalar;
#[cfg(target_arch = "x86_64")]
mod int4_x86;
mod rows;

pub use dense::DenseWeight;
pub use driver::{Weight, linear};
pub use int4::{Int4Compute, Int4Weight, Scales, ZeroPoints};

#[cfg(test)]
mod tests;
