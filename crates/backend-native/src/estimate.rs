//! Bytes a decoder's prepared weights will take, from the plan alone (before reading them): the
//! CPU and CUDA decoders lay weights out differently, so each gives its per-element sizes.

use genai_frontend::{DecoderPlan, Weight, WeightDType};

/// The linear layers (dense at `dense_size(dtype)` bytes per value; int4 at half a byte per
/// value plus `int4_block_bytes` per block) and the embedding table as f32.
pub(crate) fn prepared_bytes(
    plan: &DecoderPlan,
    dense_size: impl Fn(WeightDType) -> u64,
    int4_block_bytes: u64,
) -> u64 {
    let linear = |l: &genai_frontend::Linear| -> u64 {
        let (k, n) = (l.k as u64, l.n as u64);
        match &l.weight {
            Weight::Dense { tensor, .. } => {
                k.saturating_mul(n).saturating_mul(dense_size(tensor.dtype))
            }
            Weight::Int4(w) => {
                let blocks = k.div_ceil(w.block_size.max(1) as u64).saturating_mul(n);
                (k.saturating_mul(n) / 2).saturating_add(blocks.saturating_mul(int4_block_bytes))
            }
        }
    };
    let embedding = (plan.dims.vocab as u64)
        .saturating_mul(plan.dims.hidden as u64)
        .saturating_mul(4);
    plan.linears()
        .into_iter()
        .map(linear)
        .fold(embedding, u64::saturating_add)
}
