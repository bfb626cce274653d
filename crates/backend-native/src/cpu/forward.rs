//! One forward pass of the native CPU decoder over new tokens at the end of the KV cache.

use crate::cpu::kernels::{
    self, AttentionParams, Table, attention, gather_rows, gelu, gelu_tanh, layer_norm, linear,
    rms_norm, rotary, silu_mul,
};
use crate::cpu::model::{Activations, Layer, Linear, Mlp, NativeModel, Norm, Qkv};
use crate::cpu::threads::ThreadPool;
use crate::error::Error;
use genai_frontend::{Activation, NormKind};

/// The KV cache of one layer: `[kv_heads, capacity, head_size]` for keys and for values.
pub(crate) struct LayerCache {
    pub k: Vec<f32>,
    pub v: Vec<f32>,
}

/// Which positions' logits a forward pass returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogitsOf {
    Last,
    Every,
}

/// Runs `ids` (positions `past_len..`) through the model, filling the cache, and returns the
/// logits of the last position, or of every position (`[ids.len(), vocab]`).
pub(crate) fn forward(
    model: &NativeModel,
    caches: &mut [LayerCache],
    capacity: usize,
    past_len: usize,
    ids: &[i64],
    logits_of: LogitsOf,
    pool: &ThreadPool,
) -> Result<Vec<f32>, Error> {
    let m = ids.len();
    let hidden = model.hidden;
    if past_len + m > capacity {
        return Err(Error::Invalid {
            what: "sequence",
            why: format!("{} positions exceed the cache's {capacity}", past_len + m),
        });
    }
    if past_len + m > model.max_positions {
        return Err(Error::Invalid {
            what: "sequence",
            why: format!(
                "{} positions exceed the model's {} position embeddings",
                past_len + m,
                model.max_positions
            ),
        });
    }
    let positions: Vec<usize> = (past_len..past_len + m).collect();

    let mut x = vec![0.0f32; m * hidden];
    gather_rows(Table::F32(&model.embedding), hidden, ids, &mut x)?;
    if let Some(scale) = model.embedding_scale {
        x.iter_mut().for_each(|v| *v *= scale);
    }
    if let Some(table) = &model.positions {
        for (row, &pos) in x.chunks_mut(hidden).zip(&positions) {
            kernels::add_in_place(row, &table[pos * hidden..(pos + 1) * hidden])?;
        }
    }

    let act = model.activations;
    act.round(&mut x);
    let mut normed = vec![0.0f32; m * hidden];
    // With half-precision activations, ONNX Runtime's fused skip-norms normalise the f32 sum and
    // hand on the sum rounded to half precision as the residual: norm first, then round.
    for (layer, cache) in model.layers.iter().zip(caches.iter_mut()) {
        apply_norm(&layer.attn_norm, &x, &mut normed)?;
        act.round(&mut x);
        act.round(&mut normed);
        let attn = attention_block(
            model, layer, cache, capacity, past_len, &positions, &normed, pool,
        )?;
        let out = run_linear(&layer.output, &attn, m, act, pool)?;
        kernels::add_in_place(&mut x, &out)?;
        apply_norm(&layer.mlp_norm, &x, &mut normed)?;
        act.round(&mut x);
        act.round(&mut normed);
        let mut down = mlp_block(&layer.mlp, &normed, m, pool)?;
        act.round(&mut down);
        kernels::add_in_place(&mut x, &down)?;
    }
    let rows = match logits_of {
        LogitsOf::Last => 1,
        LogitsOf::Every => m,
    };
    let kept = &x[(m - rows) * hidden..];
    let mut final_normed = vec![0.0f32; rows * hidden];
    apply_norm(&model.final_norm, kept, &mut final_normed)?;
    act.round(&mut final_normed);
    run_linear(&model.lm_head, &final_normed, rows, act, pool)
}

fn apply_norm(norm: &Norm, x: &[f32], out: &mut [f32]) -> Result<(), Error> {
    match norm.kind {
        NormKind::Rms => rms_norm(x, &norm.weight, norm.epsilon, out),
        NormKind::Layer => layer_norm(x, &norm.weight, norm.bias.as_deref(), norm.epsilon, out),
    }
}

/// A linear layer; with half-precision activations the product and the bias add each round,
/// as the graph's MatMul and Add do.
fn run_linear(
    layer: &Linear,
    x: &[f32],
    m: usize,
    act: Activations,
    pool: &ThreadPool,
) -> Result<Vec<f32>, Error> {
    let mut y = vec![0.0f32; m * layer.n()];
    if act == Activations::F32 {
        linear(x, m, &layer.weight, layer.bias.as_deref(), &mut y, pool)?;
        return Ok(y);
    }
    linear(x, m, &layer.weight, None, &mut y, pool)?;
    act.round(&mut y);
    if let Some(bias) = &layer.bias {
        for row in y.chunks_mut(bias.len()) {
            kernels::add_in_place(row, bias)?;
        }
        act.round(&mut y);
    }
    Ok(y)
}

/// q, k and v rows.
type Projected = (Vec<f32>, Vec<f32>, Vec<f32>);

/// q, k, v for `m` tokens as `[m, heads * head]`, `[m, kv_heads * head]`, `[m, kv_heads * head]`.
fn project_qkv(
    qkv: &Qkv,
    x: &[f32],
    m: usize,
    act: Activations,
    pool: &ThreadPool,
) -> Result<Projected, Error> {
    match qkv {
        Qkv::Separate { q, k, v } => Ok((
            run_linear(q, x, m, act, pool)?,
            run_linear(k, x, m, act, pool)?,
            run_linear(v, x, m, act, pool)?,
        )),
        Qkv::Fused { linear, q, k, v } => {
            let fused = run_linear(linear, x, m, act, pool)?;
            let width = q + k + v;
            let (mut qs, mut ks, mut vs) = (
                Vec::with_capacity(m * q),
                Vec::with_capacity(m * k),
                Vec::with_capacity(m * v),
            );
            for row in fused.chunks(width) {
                qs.extend_from_slice(&row[..*q]);
                ks.extend_from_slice(&row[*q..q + k]);
                vs.extend_from_slice(&row[q + k..]);
            }
            Ok((qs, ks, vs))
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn attention_block(
    model: &NativeModel,
    layer: &Layer,
    cache: &mut LayerCache,
    capacity: usize,
    past_len: usize,
    positions: &[usize],
    x: &[f32],
    pool: &ThreadPool,
) -> Result<Vec<f32>, Error> {
    let m = positions.len();
    let hs = layer.head_size;
    let act = model.activations;
    let (mut q, mut k, v) = project_qkv(&layer.qkv, x, m, act, pool)?;
    if let Some(norm) = &layer.q_norm {
        let input = q.clone();
        apply_norm(norm, &input, &mut q)?;
    }
    if let Some(norm) = &layer.k_norm {
        let input = k.clone();
        apply_norm(norm, &input, &mut k)?;
    }
    // The attention of a half-precision graph takes half-precision q, k and v.
    act.round(&mut q);
    act.round(&mut k);
    if layer.rotary {
        let r = model.rotary.as_ref().ok_or(Error::Invalid {
            what: "rotary",
            why: "the plan has no rotary caches".into(),
        })?;
        rotary(
            &mut q,
            positions,
            hs,
            &r.cos,
            &r.sin,
            r.rotary_dim,
            r.interleaved,
        )?;
        rotary(
            &mut k,
            positions,
            hs,
            &r.cos,
            &r.sin,
            r.rotary_dim,
            r.interleaved,
        )?;
        // The graph's attention rotates half-precision q and k into half-precision values (its
        // KV cache holds them so): the rotated values round too.
        act.round(&mut q);
        act.round(&mut k);
    }
    for t in 0..m {
        for h in 0..layer.kv_heads {
            let dst = (h * capacity + past_len + t) * hs;
            let src = (t * layer.kv_heads + h) * hs;
            cache.k[dst..dst + hs].copy_from_slice(&k[src..src + hs]);
            cache.v[dst..dst + hs].copy_from_slice(&v[src..src + hs]);
        }
    }
    let params = AttentionParams {
        num_heads: layer.heads,
        num_kv_heads: layer.kv_heads,
        head_size: hs,
        capacity,
        past_len,
        new_tokens: m,
        scale: layer.scale,
        window: layer.window,
        softcap: layer.softcap,
    };
    let mut out = vec![0.0f32; m * layer.heads * hs];
    attention(&params, &q, &cache.k, &cache.v, &mut out, pool)?;
    act.round(&mut out);
    Ok(out)
}

fn activate(activation: Activation, x: &mut [f32]) {
    match activation {
        Activation::Silu => kernels::silu(x),
        Activation::Gelu => gelu(x),
        Activation::GeluTanh => gelu_tanh(x),
    }
}

/// act(gate) * up in f32 (the MLP block does not round inside, see [`mlp_block`]).
fn gated(activation: Activation, gate: &mut [f32], up: &[f32]) -> Result<Vec<f32>, Error> {
    let mut out = vec![0.0f32; up.len()];
    if activation == Activation::Silu {
        silu_mul(gate, up, &mut out)?;
        return Ok(out);
    }
    activate(activation, gate);
    for ((o, g), u) in out.iter_mut().zip(gate.iter()).zip(up) {
        *o = g * u;
    }
    Ok(out)
}

/// The feed-forward block in f32. ONNX Runtime's CPU provider runs a half-precision graph's MLP
/// (MatMul, the fused activation, Mul, MatMul) in f32 too, rounding only the block's output.
fn mlp_block(mlp: &Mlp, x: &[f32], m: usize, pool: &ThreadPool) -> Result<Vec<f32>, Error> {
    let act = Activations::F32;
    match mlp {
        Mlp::Gated {
            gate,
            up,
            down,
            activation,
        } => {
            let mut g = run_linear(gate, x, m, act, pool)?;
            let u = run_linear(up, x, m, act, pool)?;
            let h = gated(*activation, &mut g, &u)?;
            run_linear(down, &h, m, act, pool)
        }
        Mlp::GatedFused {
            gate_up,
            width,
            down,
            activation,
        } => {
            let fused = run_linear(gate_up, x, m, act, pool)?;
            let (mut g, mut u) = (Vec::with_capacity(m * width), Vec::with_capacity(m * width));
            for row in fused.chunks(2 * width) {
                g.extend_from_slice(&row[..*width]);
                u.extend_from_slice(&row[*width..]);
            }
            let h = gated(*activation, &mut g, &u)?;
            run_linear(down, &h, m, act, pool)
        }
        Mlp::Plain {
            up,
            down,
            activation,
        } => {
            let mut h = run_linear(up, x, m, act, pool)?;
            activate(*activation, &mut h);
            run_linear(down, &h, m, act, pool)
        }
    }
}
