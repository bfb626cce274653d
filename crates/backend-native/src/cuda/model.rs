//! The native CUDA model: the lifted plan with every weight prepared once, and where each one
//! lives (device memory, a streaming slot, or mapped host memory), as the residency plan says.

use crate::cuda::host::{HostLinear, table, tensor_f32};
use crate::cuda::memory::DevBuf;
use crate::cuda::pinned::PinnedBuf;
use crate::cuda::span::DevSpan;
use crate::cuda::weights::DevLinear;
use crate::error::Error;
use crate::paging::{WeightKind, WeightUse};
use crate::settings::CudaTuning;
use cudarc::driver::CudaStream;
use genai_frontend::{Activation, DecoderPlan, Mlp, Norm, NormKind, Qkv, Weight, WeightDType};
use genai_onnx::OnnxModel;
use std::sync::Arc;

/// A norm on the device.
pub(crate) struct DevNorm {
    pub rms: bool,
    pub weight: DevBuf<f32>,
    pub bias: Option<DevBuf<f32>>,
    pub eps: f32,
}

impl DevNorm {
    fn load(stream: &Arc<CudaStream>, model: &OnnxModel, n: &Norm) -> Result<Self, Error> {
        Ok(DevNorm {
            rms: n.kind == NormKind::Rms,
            weight: DevBuf::from_host(stream, &tensor_f32(model, &n.weight)?)?,
            bias: match &n.bias {
                Some(b) => Some(DevBuf::from_host(stream, &tensor_f32(model, b)?)?),
                None => None,
            },
            eps: n.epsilon,
        })
    }

    /// The bias as a span, if the norm has one.
    pub fn bias_span(&self) -> Option<DevSpan<'_, f32>> {
        self.bias.as_ref().map(DevBuf::span)
    }
}

/// The projections that fill the fused `[q | k | v]` buffer, with their column offsets.
pub(crate) struct DevQkv {
    pub parts: Vec<(DevLinear, usize)>,
}

/// The feed-forward block. `gate_up` fills `[gate | up]` (`2 * width` wide) or, for a plain
/// MLP, `[up]` (`width` wide).
pub(crate) struct DevMlp {
    pub parts: Vec<(DevLinear, usize)>,
    pub down: DevLinear,
    pub width: usize,
    pub gated: bool,
    /// `parts` is one weight of (gate, up) row pairs: its launch writes act(gate) * up.
    pub glu: bool,
    /// 0 SiLU, 1 GELU (erf), 2 GELU (tanh).
    pub activation: i32,
}

/// One layer.
pub(crate) struct DevLayer {
    pub attn_norm: DevNorm,
    pub qkv: DevQkv,
    pub q_norm: Option<DevNorm>,
    pub k_norm: Option<DevNorm>,
    pub output: DevLinear,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_size: usize,
    pub scale: f32,
    pub rotary: bool,
    pub window: Option<usize>,
    pub softcap: Option<f32>,
    pub mlp_norm: DevNorm,
    pub mlp: DevMlp,
}

impl DevLayer {
    /// Width of the fused qkv buffer.
    pub fn qkv_width(&self) -> usize {
        (self.heads + 2 * self.kv_heads) * self.head_size
    }

    /// The layer's linear layers in the order a forward pass runs them.
    pub fn linears(&self) -> impl Iterator<Item = &DevLinear> {
        let qkv = self.qkv.parts.iter().map(|(p, _)| p);
        let mlp = self.mlp.parts.iter().map(|(p, _)| p);
        qkv.chain([&self.output]).chain(mlp).chain([&self.mlp.down])
    }

    /// [`DevLayer::linears`], to place them.
    pub fn linears_mut(&mut self) -> Vec<&mut DevLinear> {
        let mut out: Vec<&mut DevLinear> = self.qkv.parts.iter_mut().map(|(p, _)| p).collect();
        out.push(&mut self.output);
        out.extend(self.mlp.parts.iter_mut().map(|(p, _)| p));
        out.push(&mut self.mlp.down);
        out
    }

    fn norms(&self) -> impl Iterator<Item = &DevNorm> {
        [
            Some(&self.attn_norm),
            self.q_norm.as_ref(),
            self.k_norm.as_ref(),
        ]
        .into_iter()
        .chain([Some(&self.mlp_norm)])
        .flatten()
    }
}

impl DevNorm {
    fn bytes(&self) -> usize {
        self.weight.bytes() + self.bias.as_ref().map_or(0, DevBuf::bytes)
    }
}

/// Where the embedding table is.
pub(crate) enum TableHome {
    /// Built on the host, not placed yet.
    Pending(Vec<f32>),
    Device(DevBuf<f32>),
    /// Page-locked host memory mapped into the device's address space: a step reads its rows
    /// over the link.
    Mapped(PinnedBuf),
}

/// The embedding table `[vocab, hidden]` as f32.
pub(crate) struct DevTable {
    pub home: TableHome,
    pub bytes: usize,
}

impl DevTable {
    /// The placed table as a span of its `[vocab, hidden]` values.
    pub fn span(&self) -> Result<DevSpan<'_, f32>, Error> {
        match &self.home {
            TableHome::Device(b) => Ok(b.span()),
            TableHome::Mapped(p) => {
                let values = p.len() / std::mem::size_of::<f32>();
                // SAFETY: the mapped allocation holds the table's f32 values (`place` copied
                // them, `len` bytes at least their size) and lives as long as `self`, which
                // the span borrows.
                Ok(unsafe { DevSpan::from_raw(p.device_ptr()?, values) })
            }
            TableHome::Pending(_) => Err(Error::Invalid {
                what: "embedding",
                why: "used before it was placed".into(),
            }),
        }
    }

    /// Moves a pending table to device memory, or to mapped host memory.
    pub fn place(&mut self, stream: &Arc<CudaStream>, device: bool) -> Result<(), Error> {
        if let TableHome::Pending(values) = &self.home {
            self.home = if device {
                TableHome::Device(DevBuf::from_host(stream, values)?)
            } else {
                TableHome::Mapped(PinnedBuf::from_slice(stream.context(), values, true)?)
            };
        }
        Ok(())
    }
}

/// What one entry of [`DevModel::step_weights`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepItem {
    Table,
    /// Index into [`DevModel::linears_mut`].
    Linear(usize),
    /// Always resident, already on the device.
    Fixed,
}

/// Rotary caches `[max_positions, rotary_dim / 2]`.
pub(crate) struct DevRotary {
    pub cos: DevBuf<f32>,
    pub sin: DevBuf<f32>,
    pub rotary_dim: usize,
    pub interleaved: bool,
}

/// The whole model.
pub(crate) struct DevModel {
    /// 0 f32, 1 f16, 2 bf16 activations.
    pub act: i32,
    pub hidden: usize,
    pub vocab: usize,
    pub max_positions: usize,
    pub embedding: DevTable,
    pub positions: Option<DevBuf<f32>>,
    pub embedding_scale: Option<f32>,
    pub layers: Vec<DevLayer>,
    pub final_norm: DevNorm,
    pub lm_head: DevLinear,
    pub rotary: Option<DevRotary>,
}

fn activation_code(a: Activation) -> i32 {
    match a {
        Activation::Silu => 0,
        Activation::Gelu => 1,
        Activation::GeluTanh => 2,
    }
}

/// The activation precision the graph computes in (the CPU decoder's rule).
pub(crate) fn act_of(plan: &DecoderPlan) -> i32 {
    let dtype = match &plan.lm_head.weight {
        Weight::Dense { tensor, .. } => tensor.dtype,
        Weight::Int4(w) => w.scales.dtype,
    };
    match dtype {
        WeightDType::F32 => 0,
        WeightDType::F16 => 1,
        WeightDType::BF16 => 2,
    }
}

/// Projections of one input, uploaded as one stacked weight when they are compatible (one
/// launch), else one by one; with their first output column.
fn stacked(
    model: &OnnxModel,
    linears: &[&genai_frontend::Linear],
    half_scales: bool,
) -> Result<Vec<(DevLinear, usize)>, Error> {
    let host = linears
        .iter()
        .map(|l| HostLinear::load(model, l))
        .collect::<Result<Vec<_>, _>>()?;
    match HostLinear::concat(host) {
        Ok(one) => Ok(vec![(DevLinear::prepare(one, half_scales), 0)]),
        Err(parts) => {
            let mut col = 0;
            let mut out = Vec::new();
            for p in parts {
                let n = p.n;
                out.push((DevLinear::prepare(p, half_scales), col));
                col += n;
            }
            Ok(out)
        }
    }
}

fn load_layer(
    s: &Arc<CudaStream>,
    model: &OnnxModel,
    layer: &genai_frontend::Layer,
    half_scales: bool,
) -> Result<DevLayer, Error> {
    let a = &layer.attention;
    let hs = a.head_size;
    let qkv = match &a.qkv {
        Qkv::Fused { linear, q, k, v } => {
            if (*q, *k, *v) != (a.heads * hs, a.kv_heads * hs, a.kv_heads * hs) {
                return Err(Error::Invalid {
                    what: "fused qkv",
                    why: format!("widths {q}/{k}/{v} do not match the heads"),
                });
            }
            vec![(DevLinear::read(model, linear, half_scales)?, 0)]
        }
        Qkv::Separate { q, k, v } => stacked(model, &[q, k, v], half_scales)?,
    };
    let mlp = match &layer.mlp {
        Mlp::Gated {
            gate,
            up,
            down,
            activation,
        } => {
            let host = vec![HostLinear::load(model, gate)?, HostLinear::load(model, up)?];
            let (parts, glu) = match HostLinear::concat(host) {
                Ok(one) => (
                    vec![(DevLinear::prepare(one.interleave_halves(), half_scales), 0)],
                    true,
                ),
                Err(parts) => {
                    let mut out = Vec::new();
                    let mut col = 0;
                    for p in parts {
                        let n = p.n;
                        out.push((DevLinear::prepare(p, half_scales), col));
                        col += n;
                    }
                    (out, false)
                }
            };
            DevMlp {
                parts,
                down: DevLinear::read(model, down, half_scales)?,
                width: gate.n,
                gated: true,
                glu,
                activation: activation_code(*activation),
            }
        }
        Mlp::GatedFused {
            gate_up,
            width,
            down,
            activation,
        } => {
            let host = HostLinear::load(model, gate_up)?;
            if host.n != 2 * width {
                return Err(Error::Invalid {
                    what: "gate_up",
                    why: format!("{} outputs, expected 2 x {width}", host.n),
                });
            }
            DevMlp {
                parts: vec![(DevLinear::prepare(host.interleave_halves(), half_scales), 0)],
                down: DevLinear::read(model, down, half_scales)?,
                width: *width,
                gated: true,
                glu: true,
                activation: activation_code(*activation),
            }
        }
        Mlp::Plain {
            up,
            down,
            activation,
        } => DevMlp {
            parts: vec![(DevLinear::read(model, up, half_scales)?, 0)],
            down: DevLinear::read(model, down, half_scales)?,
            width: up.n,
            gated: false,
            glu: false,
            activation: activation_code(*activation),
        },
    };
    let norm = |n: &Option<Norm>| n.as_ref().map(|n| DevNorm::load(s, model, n)).transpose();
    Ok(DevLayer {
        attn_norm: DevNorm::load(s, model, &layer.attn_norm)?,
        qkv: DevQkv { parts: qkv },
        q_norm: norm(&a.q_norm)?,
        k_norm: norm(&a.k_norm)?,
        output: DevLinear::read(model, &a.output, half_scales)?,
        heads: a.heads,
        kv_heads: a.kv_heads,
        head_size: hs,
        scale: a.scale,
        rotary: a.rotary,
        window: a.window,
        softcap: a.softcap,
        mlp_norm: DevNorm::load(s, model, &layer.mlp_norm)?,
        mlp,
    })
}

/// Device bytes the plan's weights take in this decoder's layout (dense weights as stored,
/// int4 with f32 scales and unpacked zero points, the embedding table as f32), before reading
/// them: decides whether the model may need streaming.
pub(crate) fn estimated_bytes(plan: &DecoderPlan) -> u64 {
    let dense = |dtype| if dtype == WeightDType::F32 { 4 } else { 2 };
    // An f32 scale, an f32 and a u8 zero point per int4 block.
    crate::estimate::prepared_bytes(plan, dense, 9)
}

impl DevModel {
    /// Reads and prepares every weight the plan names. With `upload`, every weight goes to
    /// device memory as it is read (the whole model is resident); without, the linear layers
    /// and the embedding table stay on the host until [`DevModel::linears_mut`] and
    /// [`DevTable::place`] place them as a residency plan says.
    pub fn load(
        stream: &Arc<CudaStream>,
        model: &OnnxModel,
        plan: &DecoderPlan,
        upload: bool,
        tuning: &CudaTuning,
    ) -> Result<Self, Error> {
        let dims = plan.dims;
        // f16 scales kept beside the f32 ones where a layer suits them (`host.rs`).
        let half_scales = tuning.int4_half_scales;
        let layers = plan
            .layers
            .iter()
            .map(|l| {
                let mut layer = load_layer(stream, model, l, half_scales)?;
                if upload {
                    for linear in layer.linears_mut() {
                        linear.upload(stream)?;
                    }
                }
                Ok(layer)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        for l in &layers {
            if l.head_size > 256 || l.kv_heads == 0 || !l.heads.is_multiple_of(l.kv_heads) {
                return Err(Error::Invalid {
                    what: "attention",
                    why: format!(
                        "the CUDA kernels take head_size <= 256 and kv_heads dividing heads \
                         (got {}, {} / {})",
                        l.head_size, l.heads, l.kv_heads
                    ),
                });
            }
        }
        let rotary = match &plan.rotary {
            Some(r) => Some(DevRotary {
                cos: DevBuf::from_host(stream, &tensor_f32(model, &r.cos)?)?,
                sin: DevBuf::from_host(stream, &tensor_f32(model, &r.sin)?)?,
                rotary_dim: r.rotary_dim,
                interleaved: r.interleaved,
            }),
            None => None,
        };
        let embedding = table(model, &plan.embedding.tokens, dims.vocab, dims.hidden)?;
        let positions = match &plan.embedding.positions {
            Some(p) => Some(DevBuf::from_host(stream, &tensor_f32(model, p)?)?),
            None => None,
        };
        let mut lm_head = DevLinear::read(model, &plan.lm_head, half_scales)?;
        lm_head.upload(stream)?;
        let mut embedding = DevTable {
            bytes: embedding.len() * 4,
            home: TableHome::Pending(embedding),
        };
        if upload {
            embedding.place(stream, true)?;
        }
        Ok(DevModel {
            act: act_of(plan),
            hidden: dims.hidden,
            vocab: dims.vocab,
            max_positions: dims.max_positions,
            embedding,
            positions,
            embedding_scale: plan.embedding.scale,
            layers,
            final_norm: DevNorm::load(stream, model, &plan.final_norm)?,
            lm_head,
            rotary,
        })
    }

    /// Every linear layer but the lm_head (always resident), in the order a pass runs them.
    pub fn linears_mut(&mut self) -> Vec<&mut DevLinear> {
        self.layers
            .iter_mut()
            .flat_map(DevLayer::linears_mut)
            .collect()
    }

    /// The weights a decode step reads, in step order, for the residency planner; with what
    /// each entry is.
    pub fn step_weights(&self) -> (Vec<WeightUse>, Vec<StepItem>) {
        let mut uses = Vec::new();
        let mut items = Vec::new();
        let mut push = |name: String, bytes: usize, kind: WeightKind, item: StepItem| {
            uses.push(WeightUse {
                name,
                bytes: bytes as u64,
                kind,
            });
            items.push(item);
        };
        push(
            "embedding".into(),
            self.embedding.bytes,
            WeightKind::Embedding,
            StepItem::Table,
        );
        let fixed: usize = self.positions.as_ref().map_or(0, DevBuf::bytes)
            + self
                .rotary
                .as_ref()
                .map_or(0, |r| r.cos.bytes() + r.sin.bytes());
        push("tables".into(), fixed, WeightKind::Norm, StepItem::Fixed);
        let mut index = 0;
        for (l, layer) in self.layers.iter().enumerate() {
            let norms: usize = layer.norms().map(DevNorm::bytes).sum();
            push(
                format!("{l}.norms"),
                norms,
                WeightKind::Norm,
                StepItem::Fixed,
            );
            for (i, linear) in layer.linears().enumerate() {
                let bytes = linear.weight_bytes();
                push(
                    format!("{l}.linear{i}"),
                    bytes,
                    WeightKind::Linear,
                    StepItem::Linear(index),
                );
                index += 1;
            }
        }
        push(
            "final_norm".into(),
            self.final_norm.bytes(),
            WeightKind::Norm,
            StepItem::Fixed,
        );
        push(
            "lm_head".into(),
            self.lm_head.weight_bytes(),
            WeightKind::LmHead,
            StepItem::Fixed,
        );
        (uses, items)
    }

    /// Bytes of weights read per decoded token (every linear layer, the parts its one-row
    /// kernel reads; not the embedding table).
    pub fn weight_bytes_per_token(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .flat_map(DevLayer::linears)
            .map(DevLinear::step_bytes)
            .sum();
        layers + self.lm_head.step_bytes()
    }
}
