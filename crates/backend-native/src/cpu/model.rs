//! The native CPU model: the lifted plan with every weight prepared for the kernels.

use crate::cpu::kernels::Weight;
use crate::cpu::weights::{self, f32_values};
use crate::error::Error;
use genai_frontend::{
    Activation, DecoderPlan, Linear as PlanLinear, Mlp as PlanMlp, Norm as PlanNorm, NormKind,
    Qkv as PlanQkv,
};
use genai_onnx::OnnxModel;

/// A linear layer ready to run.
pub(crate) struct Linear {
    pub weight: Weight,
    pub bias: Option<Vec<f32>>,
}

impl Linear {
    fn load(model: &OnnxModel, plan: &PlanLinear) -> Result<Self, Error> {
        let (weight, bias) = weights::linear(model, plan)?;
        Ok(Linear { weight, bias })
    }

    pub fn n(&self) -> usize {
        self.weight.n()
    }

    /// Bytes of weight data (for reports).
    pub fn weight_bytes(&self) -> usize {
        match &self.weight {
            Weight::Dense(w) => w.k() * w.n() * 4,
            Weight::Int4(w) => w.size_bytes(),
        }
    }
}

/// A norm ready to run.
pub(crate) struct Norm {
    pub kind: NormKind,
    pub weight: Vec<f32>,
    pub bias: Option<Vec<f32>>,
    pub epsilon: f32,
}

impl Norm {
    fn load(model: &OnnxModel, plan: &PlanNorm) -> Result<Self, Error> {
        Ok(Norm {
            kind: plan.kind,
            weight: f32_values(model, &plan.weight)?,
            bias: plan
                .bias
                .as_ref()
                .map(|b| f32_values(model, b))
                .transpose()?,
            epsilon: plan.epsilon,
        })
    }
}

/// The q, k, v projections.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Qkv {
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
#[allow(clippy::large_enum_variant)]
pub(crate) enum Mlp {
    Gated {
        gate: Linear,
        up: Linear,
        down: Linear,
        activation: Activation,
    },
    GatedFused {
        gate_up: Linear,
        width: usize,
        down: Linear,
        activation: Activation,
    },
    Plain {
        up: Linear,
        down: Linear,
        activation: Activation,
    },
}

/// One layer.
pub(crate) struct Layer {
    pub attn_norm: Norm,
    pub qkv: Qkv,
    pub q_norm: Option<Norm>,
    pub k_norm: Option<Norm>,
    pub output: Linear,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_size: usize,
    pub scale: f32,
    pub rotary: bool,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
    pub mlp_norm: Norm,
    pub mlp: Mlp,
}

/// Rotary caches as f32.
pub(crate) struct Rotary {
    pub cos: Vec<f32>,
    pub sin: Vec<f32>,
    pub rotary_dim: usize,
    pub interleaved: bool,
}

/// The element type of the graph's activations. With half precision, ONNX Runtime rounds every
/// op's output to 16 bits; the forward pass rounds at the same places so that it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activations {
    F32,
    F16,
    BF16,
}

impl Activations {
    /// Rounds values to the activation type (no-op for f32).
    pub fn round(self, x: &mut [f32]) {
        match self {
            Activations::F32 => {}
            Activations::F16 => x
                .iter_mut()
                .for_each(|v| *v = half::f16::from_f32(*v).to_f32()),
            Activations::BF16 => x
                .iter_mut()
                .for_each(|v| *v = half::bf16::from_f32(*v).to_f32()),
        }
    }
}

/// The whole model.
pub(crate) struct NativeModel {
    pub activations: Activations,
    pub hidden: usize,
    pub vocab: usize,
    pub max_positions: usize,
    /// `[vocab, hidden]` f32 rows.
    pub embedding: Vec<f32>,
    pub positions: Option<Vec<f32>>,
    pub embedding_scale: Option<f32>,
    pub layers: Vec<Layer>,
    pub final_norm: Norm,
    pub lm_head: Linear,
    pub rotary: Option<Rotary>,
}

impl NativeModel {
    /// Bytes the prepared weights take: linear layers as f32 panels or repacked int4, and the
    /// embedding table as f32 (norms and biases are small and left out).
    pub fn estimated_bytes(plan: &DecoderPlan) -> u64 {
        // f32 panels; int4 blocks keep an f32 scale and a zero point byte.
        crate::estimate::prepared_bytes(plan, |_| 4, 5)
    }

    /// Prepares every weight the plan names, after checking they fit in the memory available
    /// (capped by `memory_limit` bytes when given).
    pub fn load(
        model: &OnnxModel,
        plan: &DecoderPlan,
        memory_limit: Option<u64>,
    ) -> Result<Self, Error> {
        let dims = plan.dims;
        genai_engine::memory::ensure_fits(
            "the native decoder's prepared weights",
            Self::estimated_bytes(plan),
            memory_limit,
        )
        .map_err(|e| Error::Invalid {
            what: "model",
            why: e.to_string(),
        })?;
        let layers = plan
            .layers
            .iter()
            .map(|layer| load_layer(model, layer))
            .collect::<Result<Vec<_>, _>>()?;
        let rotary = match &plan.rotary {
            Some(r) => Some(Rotary {
                cos: f32_values(model, &r.cos)?,
                sin: f32_values(model, &r.sin)?,
                rotary_dim: r.rotary_dim,
                interleaved: r.interleaved,
            }),
            None => None,
        };
        let activations = match &plan.lm_head.weight {
            genai_frontend::Weight::Dense { tensor, .. } => match tensor.dtype {
                genai_frontend::WeightDType::F16 => Activations::F16,
                genai_frontend::WeightDType::BF16 => Activations::BF16,
                genai_frontend::WeightDType::F32 => Activations::F32,
            },
            genai_frontend::Weight::Int4(w) => match w.scales.dtype {
                genai_frontend::WeightDType::F16 => Activations::F16,
                genai_frontend::WeightDType::BF16 => Activations::BF16,
                genai_frontend::WeightDType::F32 => Activations::F32,
            },
        };
        Ok(NativeModel {
            activations,
            hidden: dims.hidden,
            vocab: dims.vocab,
            max_positions: dims.max_positions,
            embedding: weights::table(model, &plan.embedding.tokens, dims.vocab, dims.hidden)?,
            positions: plan
                .embedding
                .positions
                .as_ref()
                .map(|p| f32_values(model, p))
                .transpose()?,
            embedding_scale: plan.embedding.scale,
            layers,
            final_norm: Norm::load(model, &plan.final_norm)?,
            lm_head: Linear::load(model, &plan.lm_head)?,
            rotary,
        })
    }

    /// Bytes of weights read per decoded token (every linear layer; one embedding row).
    pub fn weight_bytes_per_token(&self) -> usize {
        let mut total = self.lm_head.weight_bytes();
        for layer in &self.layers {
            total += layer.output.weight_bytes();
            total += match &layer.qkv {
                Qkv::Fused { linear, .. } => linear.weight_bytes(),
                Qkv::Separate { q, k, v } => q.weight_bytes() + k.weight_bytes() + v.weight_bytes(),
            };
            total += match &layer.mlp {
                Mlp::Gated { gate, up, down, .. } => {
                    gate.weight_bytes() + up.weight_bytes() + down.weight_bytes()
                }
                Mlp::GatedFused { gate_up, down, .. } => {
                    gate_up.weight_bytes() + down.weight_bytes()
                }
                Mlp::Plain { up, down, .. } => up.weight_bytes() + down.weight_bytes(),
            };
        }
        total
    }
}

fn load_layer(model: &OnnxModel, layer: &genai_frontend::Layer) -> Result<Layer, Error> {
    let a = &layer.attention;
    let qkv = match &a.qkv {
        PlanQkv::Fused { linear, q, k, v } => Qkv::Fused {
            linear: Linear::load(model, linear)?,
            q: *q,
            k: *k,
            v: *v,
        },
        PlanQkv::Separate { q, k, v } => Qkv::Separate {
            q: Linear::load(model, q)?,
            k: Linear::load(model, k)?,
            v: Linear::load(model, v)?,
        },
    };
    let mlp = match &layer.mlp {
        PlanMlp::Gated {
            gate,
            up,
            down,
            activation,
        } => Mlp::Gated {
            gate: Linear::load(model, gate)?,
            up: Linear::load(model, up)?,
            down: Linear::load(model, down)?,
            activation: *activation,
        },
        PlanMlp::GatedFused {
            gate_up,
            width,
            down,
            activation,
        } => Mlp::GatedFused {
            gate_up: Linear::load(model, gate_up)?,
            width: *width,
            down: Linear::load(model, down)?,
            activation: *activation,
        },
        PlanMlp::Plain {
            up,
            down,
            activation,
        } => Mlp::Plain {
            up: Linear::load(model, up)?,
            down: Linear::load(model, down)?,
            activation: *activation,
        },
    };
    Ok(Layer {
        attn_norm: Norm::load(model, &layer.attn_norm)?,
        qkv,
        q_norm: a
            .q_norm
            .as_ref()
            .map(|n| Norm::load(model, n))
            .transpose()?,
        k_norm: a
            .k_norm
            .as_ref()
            .map(|n| Norm::load(model, n))
            .transpose()?,
        output: Linear::load(model, &a.output)?,
        heads: a.heads,
        kv_heads: a.kv_heads,
        head_size: a.head_size,
        scale: a.scale,
        rotary: a.rotary,
        window: a.window,
        softcap: a.softcap,
        mlp_norm: Norm::load(model, &layer.mlp_norm)?,
        mlp,
    })
}
