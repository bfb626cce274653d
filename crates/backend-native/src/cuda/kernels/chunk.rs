//! How many tokens one forward pass takes and how many positions one attention split covers:
//! the sizes the generation's buffers (`state.rs`), the GEMM scratch (`blas.rs`) and the
//! prompt-attention kernels share.

/// Most tokens one forward pass takes; longer prompts run in chunks.
pub(crate) const CHUNK: usize = 256;
/// Positions one attention split covers (`ATTN_CHUNK` in kernels/attention.cu).
pub(crate) const ATTN_CHUNK: usize = 32;
