//! Every builder fixture in `models/fixtures/` and the official runtime's gpt2 conformance model
//! lift, with the plan checked value by value.

mod common;

use common::*;
use genai_frontend::{
    Activation, DecoderPlan, KvLayout, Linear, Mlp, NormKind, Qkv, Table, Weight, WeightDType,
};

/// (stored dtype, stored dims, transposed) of a dense linear.
fn dense(l: &Linear) -> (WeightDType, Vec<usize>, bool) {
    match &l.weight {
        Weight::Dense { tensor, transposed } => (tensor.dtype, tensor.dims.clone(), *transposed),
        Weight::Int4(_) => panic!("expected a dense weight, got int4"),
    }
}

/// (k, n, block, scales dims, has zero points, accuracy level) of an int4 linear.
fn int4(l: &Linear) -> (usize, usize, usize, Vec<usize>, bool, i64) {
    match &l.weight {
        Weight::Int4(w) => {
            assert_eq!((w.k, w.n), (l.k, l.n));
            let zp = w.zero_points.is_some();
            (
                w.k,
                w.n,
                w.block_size,
                w.scales.dims.clone(),
                zp,
                w.accuracy_level,
            )
        }
        Weight::Dense { .. } => panic!("expected an int4 weight"),
    }
}

fn gated(plan: &DecoderPlan, layer: usize) -> (&Linear, &Linear, &Linear, Activation) {
    match &plan.layers[layer].mlp {
        Mlp::Gated {
            gate,
            up,
            down,
            activation,
        } => (gate, up, down, *activation),
        other => panic!("expected a gated MLP, got {other:?}"),
    }
}

fn fused_qkv(plan: &DecoderPlan, layer: usize) -> (&Linear, [usize; 3]) {
    match &plan.layers[layer].attention.qkv {
        Qkv::Fused { linear, q, k, v } => (linear, [*q, *k, *v]),
        other => panic!("expected fused q/k/v, got {other:?}"),
    }
}

/// The shape shared by all `models/fixtures` decoders (see models/README.md).
fn check_tiny_llama_shape(plan: &DecoderPlan, dtype: WeightDType) {
    let d = plan.dims;
    assert_eq!(
        (
            d.hidden,
            d.vocab,
            d.layers,
            d.heads,
            d.kv_heads,
            d.head_size,
            d.max_positions
        ),
        (64, 512, 2, 4, 2, 16, 256)
    );
    assert_eq!(plan.kv_layout, KvLayout::Split);
    assert_eq!(plan.embedding.positions, None);
    assert_eq!(plan.embedding.scale, None);
    match &plan.embedding.tokens {
        Table::Dense(t) => {
            assert_eq!(t.name, "model.embed_tokens.weight");
            assert_eq!((t.dtype, t.dims.as_slice()), (dtype, &[512, 64][..]));
        }
        other => panic!("expected a dense table, got {other:?}"),
    }
    let rotary = plan.rotary.as_ref().expect("rotary");
    assert_eq!((rotary.rotary_dim, rotary.interleaved), (16, false));
    assert_eq!(
        (rotary.cos.name.as_str(), rotary.sin.name.as_str()),
        ("cos_cache", "sin_cache")
    );
    assert_eq!(rotary.cos.dims, [256, 8]);
    assert_eq!(rotary.cos.dtype, dtype);
    assert_eq!(plan.layers.len(), 2);
    for (i, layer) in plan.layers.iter().enumerate() {
        for norm in [&layer.attn_norm, &layer.mlp_norm] {
            assert_eq!(norm.kind, NormKind::Rms);
            assert!((norm.epsilon - 1e-6).abs() < 1e-9, "eps {}", norm.epsilon);
            assert_eq!(
                (norm.weight.dtype, norm.weight.dims.as_slice()),
                (dtype, &[64][..])
            );
            assert_eq!(norm.bias, None);
        }
        let a = &layer.attention;
        assert_eq!((a.heads, a.kv_heads, a.head_size), (4, 2, 16));
        assert_eq!(a.scale, 0.25);
        assert!(a.rotary);
        assert_eq!((a.window, a.softcap), (None, None));
        let (qkv, widths) = fused_qkv(plan, i);
        assert_eq!(widths, [64, 32, 32]);
        assert_eq!((qkv.k, qkv.n), (64, 128));
        assert_eq!(
            (a.output.k, a.output.n, a.output.bias.is_none()),
            (64, 64, true)
        );
        let (gate, up, down, act) = gated(plan, i);
        assert_eq!(act, Activation::Silu);
        assert_eq!(
            (gate.k, gate.n, up.k, up.n, down.k, down.n),
            (64, 128, 64, 128, 128, 64)
        );
    }
    assert_eq!(plan.final_norm.kind, NormKind::Rms);
    assert_eq!(
        plan.final_norm.weight.name,
        "model.layers.2.final_norm_layernorm.weight"
    );
    assert_eq!((plan.lm_head.k, plan.lm_head.n), (64, 512));
    assert!(!plan.tied_embeddings());
}

#[test]
fn every_fixture_lifts() -> TestResult {
    let names = all_fixtures();
    assert!(names.len() >= 11, "fixtures found: {names:?}");
    for name in names {
        let plan = plan(&fixture(&name))?;
        assert_eq!(plan.layers.len(), 2, "{name}");
        assert!(
            plan.summary().contains("layers 0-1 (× 2 layers):"),
            "{name}"
        );
    }
    Ok(())
}

#[test]
fn llama_mistral_phi3_fp32() -> TestResult {
    for name in ["llama-fp32-cpu", "mistral-fp32-cpu", "phi3-fp32-cpu"] {
        let plan = plan(&fixture(name))?;
        check_tiny_llama_shape(&plan, WeightDType::F32);
        let (qkv, _) = fused_qkv(&plan, 1);
        assert_eq!(dense(qkv), (WeightDType::F32, vec![64, 128], false));
        assert_eq!(qkv.bias, None);
        assert_eq!(
            dense(&plan.lm_head),
            (WeightDType::F32, vec![64, 512], false)
        );
        let (_, _, down, _) = gated(&plan, 0);
        match &down.weight {
            Weight::Dense { tensor, .. } => {
                assert_eq!(tensor.name, "model.layers.0.mlp.down_proj.MatMul.weight")
            }
            Weight::Int4(_) => panic!("dense expected"),
        }
    }
    Ok(())
}

#[test]
fn half_precision_fixtures() -> TestResult {
    for (name, dtype) in [
        ("llama-fp16-cuda", WeightDType::F16),
        ("llama-bf16-cuda", WeightDType::BF16),
    ] {
        let plan = plan(&fixture(name))?;
        check_tiny_llama_shape(&plan, dtype);
        assert_eq!(dense(&plan.lm_head), (dtype, vec![64, 512], false));
        let (gate, _, _, _) = gated(&plan, 1);
        assert_eq!(dense(gate).0, dtype);
    }
    Ok(())
}

#[test]
fn qwen2_has_qkv_bias() -> TestResult {
    let plan = plan(&fixture("qwen2-fp32-cpu"))?;
    check_tiny_llama_shape(&plan, WeightDType::F32);
    for layer in 0..2 {
        let (qkv, _) = fused_qkv(&plan, layer);
        let bias = qkv.bias.as_ref().expect("qkv bias");
        assert_eq!(
            bias.name,
            format!("model.layers.{layer}.attn.qkv_proj.Add.bias")
        );
        assert_eq!(bias.dims, [128]);
        assert!(plan.layers[layer].attention.output.bias.is_none());
    }
    Ok(())
}

#[test]
fn qwen3_has_per_head_qk_norms() -> TestResult {
    let plan = plan(&fixture("qwen3-fp32-cpu"))?;
    check_tiny_llama_shape(&plan, WeightDType::F32);
    for (i, layer) in plan.layers.iter().enumerate() {
        let q = layer.attention.q_norm.as_ref().expect("q_norm");
        let k = layer.attention.k_norm.as_ref().expect("k_norm");
        assert_eq!((q.kind, k.kind), (NormKind::Rms, NormKind::Rms));
        assert_eq!(
            (q.weight.dims.as_slice(), k.weight.dims.as_slice()),
            (&[16][..], &[16][..])
        );
        assert_eq!(
            q.weight.name,
            format!("model.layers.{i}.attn.q_norm.layernorm.weight")
        );
        assert_eq!(
            k.weight.name,
            format!("model.layers.{i}.attn.k_norm.layernorm.weight")
        );
        assert!((q.epsilon - 1e-6).abs() < 1e-9);
    }
    // The other fixtures have none.
    let llama = plan_of("llama-fp32-cpu")?;
    assert!(llama.layers[0].attention.q_norm.is_none());
    Ok(())
}

fn plan_of(name: &str) -> Result<DecoderPlan, Box<dyn std::error::Error>> {
    plan(&fixture(name))
}

#[test]
fn int4_block_sizes() -> TestResult {
    for (name, block) in [
        ("llama-int4-cpu", 32),
        ("qwen2-int4-cpu", 32),
        ("qwen2-int4-bs16-cpu", 16),
        ("qwen2-int4-bs64-cpu", 64),
    ] {
        let plan = plan_of(name)?;
        check_tiny_llama_shape(&plan, WeightDType::F32);
        let blocks = |k: usize| k.div_ceil(block);
        for layer in 0..2 {
            let (qkv, _) = fused_qkv(&plan, layer);
            assert_eq!(
                int4(qkv),
                (64, 128, block, vec![128, blocks(64)], false, 4),
                "{name}"
            );
            let (gate, up, down, _) = gated(&plan, layer);
            assert_eq!(
                int4(gate),
                (64, 128, block, vec![128, blocks(64)], false, 4)
            );
            assert_eq!(int4(up).1, 128);
            assert_eq!(
                int4(down),
                (128, 64, block, vec![64, blocks(128)], false, 4)
            );
            assert_eq!(int4(&plan.layers[layer].attention.output).2, block);
            assert_eq!(qkv.bias.is_some(), name.starts_with("qwen2"), "{name}");
        }
        assert_eq!(
            int4(&plan.lm_head),
            (64, 512, block, vec![512, blocks(64)], false, 4)
        );
        match &plan.lm_head.weight {
            Weight::Int4(w) => {
                assert_eq!(w.packed, "lm_head.MatMul.weight_Q4");
                assert_eq!(w.scales.name, "lm_head.MatMul.weight_scales");
            }
            Weight::Dense { .. } => unreachable!(),
        }
        assert!(
            plan.summary()
                .contains(&format!("block {block}, symmetric")),
            "{name}"
        );
    }
    Ok(())
}

#[test]
fn gpt2_combined_layout() -> TestResult {
    let plan = plan(&conformance_gpt2())?;
    let d = plan.dims;
    assert_eq!(
        (
            d.hidden,
            d.vocab,
            d.layers,
            d.heads,
            d.kv_heads,
            d.head_size,
            d.max_positions
        ),
        (32, 1000, 5, 4, 4, 8, 512)
    );
    assert_eq!(plan.kv_layout, KvLayout::Combined);
    assert_eq!(plan.rotary, None);
    let positions = plan
        .embedding
        .positions
        .as_ref()
        .expect("learned positions");
    assert_eq!(
        (positions.name.as_str(), positions.dims.as_slice()),
        ("transformer.wpe.weight", &[512, 32][..])
    );
    match &plan.embedding.tokens {
        Table::Dense(t) => assert_eq!(
            (t.name.as_str(), t.dims.as_slice()),
            ("transformer.wte.weight", &[1000, 32][..])
        ),
        other => panic!("expected a dense table, got {other:?}"),
    }
    for (i, layer) in plan.layers.iter().enumerate() {
        for norm in [&layer.attn_norm, &layer.mlp_norm] {
            assert_eq!(norm.kind, NormKind::Layer);
            assert!(norm.bias.is_some());
            assert!((norm.epsilon - 1e-5).abs() < 1e-9);
        }
        let a = &layer.attention;
        assert_eq!(
            (a.heads, a.kv_heads, a.head_size, a.rotary),
            (4, 4, 8, false)
        );
        assert!((a.scale - 8f32.sqrt().recip()).abs() < 1e-7);
        let (qkv, widths) = fused_qkv(&plan, i);
        assert_eq!(widths, [32, 32, 32]);
        assert_eq!(dense(qkv), (WeightDType::F32, vec![32, 96], false));
        assert_eq!(qkv.bias.as_ref().map(|b| b.dims.clone()), Some(vec![96]));
        match &qkv.weight {
            Weight::Dense { tensor, .. } => {
                assert_eq!(tensor.name, format!("transformer.h.{i}.attn.c_attn.weight"))
            }
            Weight::Int4(_) => unreachable!(),
        }
        // The SkipLayerNormalization bias inputs are the c_proj biases.
        assert_eq!(
            a.output.bias.as_ref().map(|b| b.dims.clone()),
            Some(vec![32])
        );
        match &layer.mlp {
            Mlp::Plain {
                up,
                down,
                activation,
            } => {
                assert_eq!(*activation, Activation::GeluTanh);
                assert_eq!((up.k, up.n, down.k, down.n), (32, 128, 128, 32));
                // FastGelu's bias input is the c_fc bias.
                assert_eq!(
                    up.bias.as_ref().map(|b| b.name.as_str()),
                    Some("transformer.h.0.mlp.c_fc.bias")
                );
                assert_eq!(down.bias.as_ref().map(|b| b.dims.clone()), Some(vec![32]));
            }
            other => panic!("expected a plain MLP, got {other:?}"),
        }
    }
    assert_eq!(
        plan.layers[0].attn_norm.weight.name,
        "transformer.h.0.ln_1.weight"
    );
    assert_eq!(plan.final_norm.kind, NormKind::Layer);
    assert_eq!(
        dense(&plan.lm_head),
        (WeightDType::F32, vec![32, 1000], false)
    );
    assert!(!plan.tied_embeddings());
    let summary = plan.summary();
    for line in [
        "decoder plan: 5 layers, hidden 32, vocab 1000, 4 heads / 4 kv heads × 8, positions up to 512",
        "layers 0-4 (× 5 layers):",
        "mlp: plain, gelu (tanh)",
        "learned positions f32 [512, 32]",
        "rotary: none",
        "kv cache: key and value stacked per layer",
    ] {
        assert!(summary.contains(line), "summary lacks {line:?}:\n{summary}");
    }
    Ok(())
}

#[test]
fn summary_of_llama() -> TestResult {
    let plan = plan_of("llama-fp32-cpu")?;
    let summary = plan.summary();
    let expected = "\
decoder plan: 2 layers, hidden 64, vocab 512, 4 heads / 2 kv heads × 16, positions up to 256
embedding: table f32 [512, 64]
layers 0-1 (× 2 layers):
  attn_norm: rms, eps 1e-6, weight f32 [64]
  attention: 4 heads / 2 kv heads × 16, scale 0.25, rotary
    qkv fused [q 64 | k 32 | v 32]: f32 64 → 128
    output: f32 64 → 64
  mlp_norm: rms, eps 1e-6, weight f32 [64]
  mlp: gated, silu
    gate: f32 64 → 128
    up: f32 64 → 128
    down: f32 128 → 64
final_norm: rms, eps 1e-6, weight f32 [64]
lm_head: f32 64 → 512
rotary: dim 16 of head 16 (full), rotate-half, not interleaved, cos/sin f32 [256, 8]
kv cache: key and value apart per layer, [batch, kv_heads, seq, head]
";
    assert_eq!(summary, expected);
    Ok(())
}

#[test]
fn summary_splits_layers_that_differ() -> TestResult {
    let mut plan = plan_of("qwen2-int4-cpu")?;
    plan.layers[1].attention.window = Some(8);
    let summary = plan.summary();
    assert!(summary.contains("layer 0:\n"), "{summary}");
    assert!(summary.contains("layer 1:\n"), "{summary}");
    assert!(
        summary.contains("scale 0.25, rotary, window 8\n"),
        "{summary}"
    );
    assert!(!summary.contains("× 2 layers"), "{summary}");
    assert!(
        summary.contains(
            "int4 64 → 128, block 32, symmetric, f32 scales, accuracy level 4 + bias f32"
        )
    );
    Ok(())
}
