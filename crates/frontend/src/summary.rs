//! `DecoderPlan::summary`: a readable description of a lifted plan for `genai-bridge inspect`
//! (sizes, embedding, the layer structure once for each run of identical layers, norms,
//! attention and rotary, MLP and activation, weight formats, lm_head).

use std::fmt::Write as _;

use crate::plan::{
    Activation, DecoderPlan, Embedding, Int4Weight, KvLayout, Layer, Linear, Mlp, Norm, NormKind,
    Qkv, Table, Tensor, Weight, WeightDType,
};

impl DecoderPlan {
    /// Every linear layer of the plan, the lm_head last.
    pub fn linears(&self) -> Vec<&Linear> {
        let mut all = Vec::new();
        for layer in &self.layers {
            match &layer.attention.qkv {
                crate::Qkv::Fused { linear, .. } => all.push(linear),
                crate::Qkv::Separate { q, k, v } => all.extend([q, k, v]),
            }
            all.push(&layer.attention.output);
            match &layer.mlp {
                Mlp::Gated { gate, up, down, .. } => all.extend([gate, up, down]),
                Mlp::GatedFused { gate_up, down, .. } => all.extend([gate_up, down]),
                Mlp::Plain { up, down, .. } => all.extend([up, down]),
            }
        }
        all.push(&self.lm_head);
        all
    }

    /// Whether the lm_head reads the same stored tensor as the token embedding.
    pub fn tied_embeddings(&self) -> bool {
        match (&self.embedding.tokens, &self.lm_head.weight) {
            (
                Table::Dense(t),
                Weight::Dense {
                    tensor,
                    transposed: true,
                },
            )
            | (
                Table::Transposed(t),
                Weight::Dense {
                    tensor,
                    transposed: false,
                },
            ) => t.name == tensor.name,
            (Table::Int4(a), Weight::Int4(b)) => a.packed == b.packed,
            _ => false,
        }
    }

    /// A multi-line description of the plan.
    pub fn summary(&self) -> String {
        let d = &self.dims;
        let mut s = format!(
            "decoder plan: {} layers, hidden {}, vocab {}, {} heads / {} kv heads × {}, positions up to {}\n",
            d.layers, d.hidden, d.vocab, d.heads, d.kv_heads, d.head_size, d.max_positions
        );
        let _ = writeln!(s, "embedding: {}", embedding(&self.embedding));
        let mut start = 0;
        while start < self.layers.len() {
            let lines = layer_lines(&self.layers[start]);
            let run = self.layers[start..]
                .iter()
                .take_while(|l| layer_lines(l) == lines)
                .count();
            let end = start + run - 1;
            let _ = match run {
                1 => writeln!(s, "layer {start}:"),
                _ => writeln!(s, "layers {start}-{end} (× {run} layers):"),
            };
            for line in lines {
                let _ = writeln!(s, "  {line}");
            }
            start += run;
        }
        let _ = writeln!(s, "final_norm: {}", norm(&self.final_norm));
        let tied = if self.tied_embeddings() {
            " (tied: the embedding table)"
        } else {
            ""
        };
        let _ = writeln!(s, "lm_head: {}{tied}", linear(&self.lm_head));
        match &self.rotary {
            Some(r) => {
                let part = if r.rotary_dim < d.head_size {
                    "partial"
                } else {
                    "full"
                };
                let layout = if r.interleaved {
                    "interleaved pairs"
                } else {
                    "rotate-half, not interleaved"
                };
                let _ = writeln!(
                    s,
                    "rotary: dim {} of head {} ({part}), {layout}, cos/sin {}",
                    r.rotary_dim,
                    d.head_size,
                    tensor(&r.cos)
                );
            }
            None => s.push_str("rotary: none\n"),
        }
        s.push_str(match self.kv_layout {
            KvLayout::Split => {
                "kv cache: key and value apart per layer, [batch, kv_heads, seq, head]\n"
            }
            KvLayout::Combined => {
                "kv cache: key and value stacked per layer, [2, batch, heads, seq, head]\n"
            }
        });
        s
    }
}

fn dtype(d: WeightDType) -> &'static str {
    match d {
        WeightDType::F32 => "f32",
        WeightDType::F16 => "f16",
        WeightDType::BF16 => "bf16",
    }
}

fn tensor(t: &Tensor) -> String {
    format!("{} {:?}", dtype(t.dtype), t.dims)
}

/// `1e-6` rather than `9.9999997e-7`.
fn small(v: f32) -> String {
    let s = format!("{v:.3e}");
    match s.split_once('e') {
        Some((m, e)) => format!("{}e{e}", m.trim_end_matches('0').trim_end_matches('.')),
        None => s,
    }
}

/// Block size, zero points and scales of a 4-bit weight.
fn blocks(w: &Int4Weight) -> String {
    let zp = if w.zero_points.is_some() {
        "zero points"
    } else {
        "symmetric"
    };
    format!(
        "block {}, {zp}, {} scales",
        w.block_size,
        dtype(w.scales.dtype)
    )
}

fn int4(w: &Int4Weight) -> String {
    format!(
        "int4 {} → {}, {}, accuracy level {}",
        w.k,
        w.n,
        blocks(w),
        w.accuracy_level
    )
}

fn linear(l: &Linear) -> String {
    let w = match &l.weight {
        Weight::Dense {
            tensor: t,
            transposed: false,
        } => format!("{} {} → {}", dtype(t.dtype), l.k, l.n),
        Weight::Dense {
            tensor: t,
            transposed: true,
        } => {
            format!(
                "{} {} → {} (stored transposed {:?})",
                dtype(t.dtype),
                l.k,
                l.n,
                t.dims
            )
        }
        Weight::Int4(w) => int4(w),
    };
    match &l.bias {
        Some(b) => format!("{w} + bias {}", dtype(b.dtype)),
        None => w,
    }
}

fn norm(n: &Norm) -> String {
    let kind = match n.kind {
        NormKind::Rms => "rms",
        NormKind::Layer => "layernorm",
    };
    let bias = if n.bias.is_some() { " + bias" } else { "" };
    format!(
        "{kind}, eps {}, weight {}{bias}",
        small(n.epsilon),
        tensor(&n.weight)
    )
}

fn embedding(e: &Embedding) -> String {
    let mut s = match &e.tokens {
        Table::Dense(t) => format!("table {}", tensor(t)),
        Table::Transposed(t) => format!("table stored transposed {}", tensor(t)),
        Table::Int4(w) => format!("table int4 [{}, {}], {}", w.n, w.k, blocks(w)),
    };
    if let Some(p) = &e.positions {
        let _ = write!(s, "; learned positions {}", tensor(p));
    }
    if let Some(k) = e.scale {
        let _ = write!(s, "; scaled by {k}");
    }
    s
}

fn activation(a: Activation) -> &'static str {
    match a {
        Activation::Silu => "silu",
        Activation::Gelu => "gelu (erf)",
        Activation::GeluTanh => "gelu (tanh)",
    }
}

/// One layer's description, free of tensor names so that identical layers compare equal.
fn layer_lines(l: &Layer) -> Vec<String> {
    let a = &l.attention;
    let mut attn = format!(
        "attention: {} heads / {} kv heads × {}, scale {}",
        a.heads, a.kv_heads, a.head_size, a.scale
    );
    if a.rotary {
        attn.push_str(", rotary");
    }
    if let Some(w) = a.window {
        let _ = write!(attn, ", window {w}");
    }
    if let Some(c) = a.softcap {
        let _ = write!(attn, ", softcap {c}");
    }
    let mut lines = vec![format!("attn_norm: {}", norm(&l.attn_norm)), attn];
    match &a.qkv {
        Qkv::Fused {
            linear: lin,
            q,
            k,
            v,
        } => {
            lines.push(format!(
                "  qkv fused [q {q} | k {k} | v {v}]: {}",
                linear(lin)
            ));
        }
        Qkv::Separate { q, k, v } => {
            for (role, lin) in [("q", q), ("k", k), ("v", v)] {
                lines.push(format!("  {role}: {}", linear(lin)));
            }
        }
    }
    if let (Some(q), Some(k)) = (&a.q_norm, &a.k_norm) {
        lines.push(format!("  q_norm: {}", norm(q)));
        lines.push(format!("  k_norm: {}", norm(k)));
    }
    lines.push(format!("  output: {}", linear(&a.output)));
    lines.push(format!("mlp_norm: {}", norm(&l.mlp_norm)));
    match &l.mlp {
        Mlp::Gated {
            gate,
            up,
            down,
            activation: act,
        } => {
            lines.push(format!("mlp: gated, {}", activation(*act)));
            lines.push(format!("  gate: {}", linear(gate)));
            lines.push(format!("  up: {}", linear(up)));
            lines.push(format!("  down: {}", linear(down)));
        }
        Mlp::GatedFused {
            gate_up,
            width,
            down,
            activation: act,
        } => {
            lines.push(format!(
                "mlp: gated, {}, gate and up fused ({width} each)",
                activation(*act)
            ));
            lines.push(format!("  gate_up: {}", linear(gate_up)));
            lines.push(format!("  down: {}", linear(down)));
        }
        Mlp::Plain {
            up,
            down,
            activation: act,
        } => {
            lines.push(format!("mlp: plain, {}", activation(*act)));
            lines.push(format!("  up: {}", linear(up)));
            lines.push(format!("  down: {}", linear(down)));
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::small;

    #[test]
    fn epsilons_print_short() {
        assert_eq!(small(1e-6), "1e-6");
        // The gpt2 epsilon as stored (f32 nearest to 1e-5).
        assert_eq!(small(9.999_999_747_378_752e-6_f64 as f32), "1e-5");
        assert_eq!(small(2.5e-5), "2.5e-5");
    }
}
