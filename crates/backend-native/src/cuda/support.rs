//! Which lifted plans the CUDA kernels can run: the limits of the kernels checked against the
//! plan before any device work, so the router can say why and fall back instead of failing at
//! load.

use genai_frontend::{DecoderPlan, Linear, Mlp, Qkv, Weight};

/// Largest row a norm block takes (1024 threads x 8 values, kernels/norm.cu).
const MAX_NORM_WIDTH: usize = 8 * 1024;
/// Largest head the attention kernel takes (32 lanes x 8 values, kernels/attention.cu).
const MAX_HEAD_SIZE: usize = 256;

fn linear(what: &str, l: &Linear) -> Result<(), String> {
    if let Weight::Int4(w) = &l.weight
        && ![16, 32, 64, 128, 256].contains(&w.block_size)
    {
        return Err(format!(
            "{what}: 4-bit block size {} (the CUDA kernels take 16, 32, 64, 128 or 256)",
            w.block_size
        ));
    }
    Ok(())
}

/// `Ok` when every layer of the plan fits the CUDA kernels, else the first reason it does not.
pub fn check_plan(plan: &DecoderPlan) -> Result<(), String> {
    let hidden = plan.dims.hidden;
    if hidden == 0 || hidden > MAX_NORM_WIDTH {
        return Err(format!(
            "hidden size {hidden} (the CUDA norm kernel takes 1..={MAX_NORM_WIDTH})"
        ));
    }
    linear("lm_head", &plan.lm_head)?;
    for (i, layer) in plan.layers.iter().enumerate() {
        let a = &layer.attention;
        if a.head_size == 0 || a.head_size > MAX_HEAD_SIZE {
            return Err(format!(
                "layer {i}: head size {} (the CUDA attention kernel takes 1..={MAX_HEAD_SIZE})",
                a.head_size
            ));
        }
        if a.kv_heads == 0 || !a.heads.is_multiple_of(a.kv_heads) {
            return Err(format!(
                "layer {i}: {} kv heads do not divide {} heads",
                a.kv_heads, a.heads
            ));
        }
        if a.rotary && plan.rotary.is_none() {
            return Err(format!("layer {i}: rotary without rotary caches"));
        }
        match &a.qkv {
            Qkv::Fused { linear: l, q, k, v } => {
                let hs = a.head_size;
                if (*q, *k, *v) != (a.heads * hs, a.kv_heads * hs, a.kv_heads * hs) {
                    return Err(format!("layer {i}: fused qkv widths {q}/{k}/{v}"));
                }
                linear("qkv", l)?;
            }
            Qkv::Separate { q, k, v } => {
                for l in [q, k, v] {
                    linear("q/k/v", l)?;
                }
            }
        }
        linear("attention output", &a.output)?;
        let parts: Vec<&Linear> = match &layer.mlp {
            Mlp::Gated { gate, up, down, .. } => vec![gate, up, down],
            Mlp::GatedFused { gate_up, down, .. } => vec![gate_up, down],
            Mlp::Plain { up, down, .. } => vec![up, down],
        };
        for l in parts {
            linear("mlp", l)?;
        }
    }
    Ok(())
}
