//! One forward pass of the native CPU decoder over new tokens of one or more sequences, each
//! appended at the end of its KV blocks: the linear layers run once over every sequence's rows.

use crate::cpu::kernels::{
    self, AttentionHeads, SeqSpan, Table, attention_blocks, gather_rows, gelu, gelu_tanh,
    layer_norm, linear, rms_norm, rotary, silu_mul,
};
use crate::cpu::kv::{BLOCK_SIZE, KvStore, LayerKv};
use crate::cpu::model::{Activations, Layer, Linear, Mlp, NativeModel, Norm, Qkv};
use crate::cpu::threads::ThreadPool;
use crate::error::Error;
use genai_engine::batch::LogitsWanted;
use genai_frontend::{Activation, NormKind};

/// One sequence's part of a pass: its blocks (enough for `past_len + ids.len()` positions), the
/// positions it holds, its new tokens and which logits it wants.
pub(crate) struct SeqRows<'a> {
    pub blocks: &'a [usize],
    pub past_len: usize,
    pub ids: &'a [i64],
    pub logits: LogitsWanted,
}

/// Runs every sequence's new tokens through the model, writing their keys and values into the
/// blocks, and returns the logits the sequences asked for, in order (`[rows, vocab]`).
pub(crate) fn forward(
    model: &NativeModel,
    kv: &mut KvStore,
    seqs: &[SeqRows<'_>],
    pool: &ThreadPool,
) -> Result<Vec<f32>, Error> {
    let hidden = model.hidden;
    let mut positions = Vec::new();
    let mut ids = Vec::new();
    for seq in seqs {
        let end = seq.past_len + seq.ids.len();
        if end > seq.blocks.len() * BLOCK_SIZE {
            return Err(Error::Invalid {
                what: "sequence",
                why: format!(
                    "{end} positions exceed its {} blocks of {BLOCK_SIZE}",
                    seq.blocks.len()
                ),
            });
        }
        if end > model.max_positions {
            return Err(Error::Invalid {
                what: "sequence",
                why: format!(
                    "{end} positions exceed the model's {} position embeddings",
                    model.max_positions
                ),
            });
        }
        positions.extend(seq.past_len..end);
        ids.extend_from_slice(seq.ids);
    }
    let spans: Vec<SeqSpan<'_>> = seqs
        .iter()
        .map(|seq| SeqSpan {
            blocks: seq.blocks,
            past_len: seq.past_len,
            new_tokens: seq.ids.len(),
        })
        .collect();
    let m = ids.len();
    if m == 0 {
        return Ok(Vec::new());
    }

    let mut x = vec![0.0f32; m * hidden];
    gather_rows(Table::F32(&model.embedding), hidden, &ids, &mut x)?;
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
    for (layer, cache) in model.layers.iter().zip(kv.layers.iter_mut()) {
        apply_norm(&layer.attn_norm, &x, &mut normed)?;
        act.round(&mut x);
        act.round(&mut normed);
        let attn = attention_block(model, layer, cache, &spans, &positions, &normed, pool)?;
        let out = run_linear(&layer.output, &attn, m, act, pool)?;
        kernels::add_in_place(&mut x, &out)?;
        apply_norm(&layer.mlp_norm, &x, &mut normed)?;
        act.round(&mut x);
        act.round(&mut normed);
        let mut down = mlp_block(&layer.mlp, &normed, m, pool)?;
        act.round(&mut down);
        kernels::add_in_place(&mut x, &down)?;
    }
    let mut kept = Vec::new();
    let mut row = 0;
    for seq in seqs {
        let n = seq.ids.len();
        let wanted = seq.logits.rows(n);
        kept.extend_from_slice(&x[(row + n - wanted) * hidden..(row + n) * hidden]);
        row += n;
    }
    let rows = kept.len() / hidden;
    if rows == 0 {
        return Ok(Vec::new());
    }
    let mut final_normed = vec![0.0f32; rows * hidden];
    apply_norm(&model.final_norm, &kept, &mut final_normed)?;
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

/// Self-attention of every sequence's new rows (`x`, `[rows, hidden]`; `positions` per row),
/// after writing their keys and values into the layer's blocks.
fn attention_block(
    model: &NativeModel,
    layer: &Layer,
    cache: &mut LayerKv,
    spans: &[SeqSpan<'_>],
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
    let width = layer.kv_heads * hs;
    let mut row = 0;
    for seq in spans {
        for pos in seq.past_len..seq.past_len + seq.new_tokens {
            let block = seq.blocks[pos / BLOCK_SIZE];
            let (kr, vr) = (&k[row * width..][..width], &v[row * width..][..width]);
            cache.write(block, pos % BLOCK_SIZE, kr, vr);
            row += 1;
        }
    }
    let heads = AttentionHeads {
        num_heads: layer.heads,
        num_kv_heads: layer.kv_heads,
        head_size: hs,
        scale: layer.scale,
        window: layer.window,
        softcap: layer.softcap,
    };
    let mut out = vec![0.0f32; m * layer.heads * hs];
    attention_blocks(&heads, spans, &q, &cache.view(), &mut out, pool)?;
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
