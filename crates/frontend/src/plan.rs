//! The typed transformer decoder that the front end lifts out of an ONNX graph: what the native
//! backends execute. Weights are referenced by initializer name; the backend reads them from the
//! loaded [`genai_onnx::OnnxModel`].
//!
//! Semantics are those of a pre-norm decoder, whatever fusions the graph used:
//! ```text
//! x = embed(ids) (+ positions(pos))            // embedding table, optional learned positions
//! for layer: h = x + attention(attn_norm(x))   // output projection bias included
//!            x = h + mlp(mlp_norm(h))
//! logits = lm_head(final_norm(x))
//! ```

use serde::Serialize;

/// A whole decoder.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecoderPlan {
    pub dims: Dims,
    pub embedding: Embedding,
    pub layers: Vec<Layer>,
    pub final_norm: Norm,
    pub lm_head: Linear,
    /// Rotary position embedding, when the attention applies it.
    pub rotary: Option<Rotary>,
    /// How the graph's KV cache inputs are laid out (for reports and parity with the graph).
    pub kv_layout: KvLayout,
}

/// Sizes, checked against the weights and the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Dims {
    pub hidden: usize,
    pub vocab: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_size: usize,
    /// Longest sequence the position tables (rotary caches or learned positions) cover.
    pub max_positions: usize,
}

/// Element type of a stored weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum WeightDType {
    F32,
    F16,
    BF16,
}

/// A dense tensor stored in the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Tensor {
    /// Initializer name.
    pub name: String,
    pub dtype: WeightDType,
    pub dims: Vec<usize>,
}

/// Token (and position) embeddings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Embedding {
    pub tokens: Table,
    /// Learned absolute position embeddings `[max_positions, hidden]` (gpt2).
    pub positions: Option<Tensor>,
    /// Multiplier applied to the gathered rows (some families scale by sqrt(hidden)).
    pub scale: Option<f32>,
}

/// A lookup table `[rows, width]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Table {
    Dense(Tensor),
    /// com.microsoft GatherBlockQuantized: 4-bit rows quantized in blocks along the width.
    Int4(Int4Weight),
    /// Added by the front end: the table stored transposed, `[width, rows]`, and read through a
    /// `Transpose` (the builder's tied float embeddings: `Gather(Transpose(lm_head weight))`,
    /// where the lm_head weight is MatMul's B `[hidden, vocab]`). Row `r` is column `r`.
    Transposed(Tensor),
}

/// One decoder layer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Layer {
    pub attn_norm: Norm,
    pub attention: Attention,
    pub mlp_norm: Norm,
    pub mlp: Mlp,
}

/// Normalisation over the hidden (or head) dimension.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Norm {
    pub kind: NormKind,
    pub weight: Tensor,
    /// LayerNorm's beta.
    pub bias: Option<Tensor>,
    pub epsilon: f32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NormKind {
    /// x / sqrt(mean(x²) + eps) * weight
    Rms,
    /// (x - mean) / sqrt(var + eps) * weight + bias
    Layer,
}

/// Self-attention over the KV cache.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Attention {
    pub qkv: Qkv,
    /// Per-head norms applied to q and k before rotary (qwen3).
    pub q_norm: Option<Norm>,
    pub k_norm: Option<Norm>,
    pub output: Linear,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_size: usize,
    /// Multiplier of q·k (usually 1/sqrt(head_size)).
    pub scale: f32,
    /// Whether the plan's [`Rotary`] applies to q and k.
    pub rotary: bool,
    /// Sliding-window attention: attend to at most this many most recent positions.
    pub window: Option<usize>,
    /// softcap * tanh(scores / softcap) before the softmax.
    pub softcap: Option<f32>,
}

/// The q, k, v projections.
// Plain (unboxed) variants keep the plan easy to match on; it is built once per model.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Qkv {
    /// One projection whose output is `[q | k | v]` with these widths.
    Fused {
        linear: Linear,
        q: usize,
        k: usize,
        v: usize,
    },
    Separate {
        q: Linear,
        k: Linear,
        v: Linear,
    },
}

/// The feed-forward block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Mlp {
    /// down(act(gate(x)) * up(x))
    Gated {
        gate: Linear,
        up: Linear,
        down: Linear,
        activation: Activation,
    },
    /// One projection whose output is `[gate | up]`, each `width` wide (phi3).
    GatedFused {
        gate_up: Linear,
        width: usize,
        down: Linear,
        activation: Activation,
    },
    /// down(act(up(x)))
    Plain {
        up: Linear,
        down: Linear,
        activation: Activation,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Activation {
    /// x * sigmoid(x)
    Silu,
    /// The erf form.
    Gelu,
    /// The tanh approximation (FastGelu, gelu_new).
    GeluTanh,
}

/// y = x · W + bias, x `[.., k]`, y `[.., n]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Linear {
    pub weight: Weight,
    pub bias: Option<Tensor>,
    pub k: usize,
    pub n: usize,
}

/// How a linear layer's weight is stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Weight {
    /// MatMul's B `[k, n]`; `transposed` when the stored tensor is `[n, k]` (a tied embedding
    /// table used through a Transpose).
    Dense { tensor: Tensor, transposed: bool },
    /// com.microsoft MatMulNBits with 4 bits.
    Int4(Int4Weight),
}

/// 4-bit block-quantized weight in ONNX Runtime's MatMulNBits layout: `packed` uint8
/// `[n, ceil(k / block_size), block_size / 2]`, `scales` `[n, blocks]`, optional packed
/// `zero_points` (default 8).
///
/// Front-end notes: `scales` may also be stored flat, `[n * blocks]` (its `dims` say which), and
/// `zero_points` likewise `[n, ceil(blocks / 2)]` or flat, two per byte, low nibble first. As a
/// [`Table::Int4`] (GatherBlockQuantized) `n` is the rows, `k` the unpadded width (a padded last
/// block is sliced off) and `accuracy_level` is 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Int4Weight {
    pub packed: String,
    pub scales: Tensor,
    pub zero_points: Option<String>,
    pub k: usize,
    pub n: usize,
    pub block_size: usize,
    pub accuracy_level: i64,
}

/// Rotary position embedding from cos/sin caches `[max_positions, rotary_dim / 2]`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rotary {
    pub cos: Tensor,
    pub sin: Tensor,
    pub rotary_dim: usize,
    /// Rotate (2i, 2i+1) pairs instead of (i, i + rotary_dim/2).
    pub interleaved: bool,
}

/// The graph's KV cache layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum KvLayout {
    /// `past_key_values.%d.key/value` `[batch, kv_heads, seq, head]`.
    Split,
    /// `past_%d` `[2, batch, heads, seq, head]` (gpt2).
    Combined,
}
