//! Hand-edited copies of the fixtures whose attributes, weights or interface break what the
//! plan assumes: each must give `Unsupported` naming the node at fault with a precise reason
//! (and attributes the plan carries must arrive in it).

mod common;

use common::*;

const GQA0: &str = "/model/layers.0/attn/GroupQueryAttention";

#[test]
fn num_heads_mismatch() -> TestResult {
    let dir = broken("llama-fp32-cpu", |m| int_attr(m, GQA0, "num_heads", 3))?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        GQA0,
        "GroupQueryAttention",
        "num_heads 3 does not match the config's num_attention_heads 4",
    );
    assert_eq!(
        e.to_string(),
        format!(
            "{GQA0} (GroupQueryAttention): num_heads 3 does not match the config's num_attention_heads 4"
        )
    );
    Ok(())
}

#[test]
fn kv_heads_mismatch_in_layer_one() -> TestResult {
    let gqa1 = "/model/layers.1/attn/GroupQueryAttention";
    let dir = broken("qwen2-int4-cpu", |m| int_attr(m, gqa1, "kv_num_heads", 4))?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        gqa1,
        "GroupQueryAttention",
        "kv_num_heads 4 does not match the config's num_key_value_heads 2",
    );
    Ok(())
}

#[test]
fn rotary_cache_too_wide_for_the_head() -> TestResult {
    // Same bytes, reshaped: a rotary dim of 32 on heads of 16.
    let dir = broken("llama-fp32-cpu", |m| {
        initializer_dims(m, "cos_cache", &[128, 16]);
        initializer_dims(m, "sin_cache", &[128, 16]);
    })?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        GQA0,
        "GroupQueryAttention",
        "rotary dim 32 exceeds head_size 16",
    );
    Ok(())
}

#[test]
fn caches_without_do_rotary() -> TestResult {
    let dir = broken("mistral-fp32-cpu", |m| int_attr(m, GQA0, "do_rotary", 0))?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        GQA0,
        "GroupQueryAttention",
        "cos/sin caches are given but do_rotary is 0",
    );
    Ok(())
}

#[test]
fn softcap_and_window_are_carried() -> TestResult {
    let dir = broken("llama-fp32-cpu", |m| {
        float_attr(m, GQA0, "softcap", 30.0);
        int_attr(m, GQA0, "local_window_size", 16);
    })?;
    let plan = plan(dir.path())?;
    assert_eq!(plan.layers[0].attention.softcap, Some(30.0));
    assert_eq!(plan.layers[0].attention.window, Some(16));
    assert_eq!(
        (
            plan.layers[1].attention.softcap,
            plan.layers[1].attention.window
        ),
        (None, None)
    );
    assert!(plan.summary().contains("layer 0:\n  attn_norm"));
    Ok(())
}

#[test]
fn unknown_attention_attribute() -> TestResult {
    let dir = broken("llama-fp32-cpu", |m| int_attr(m, GQA0, "smooth_softmax", 1))?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        GQA0,
        "GroupQueryAttention",
        "smooth_softmax 1 is not supported",
    );
    let dir = broken("llama-fp32-cpu", |m| int_attr(m, GQA0, "made_up", 1))?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        GQA0,
        "GroupQueryAttention",
        "attribute `made_up` is not supported",
    );
    Ok(())
}

#[test]
fn epsilon_missing() -> TestResult {
    let norm = "/model/layers.0/input_layernorm/LayerNorm";
    let dir = broken("qwen2-fp32-cpu", |m| {
        named(m, norm).attribute.retain(|a| a.name != "epsilon")
    })?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        norm,
        "SimplifiedLayerNormalization",
        "epsilon attribute missing",
    );
    Ok(())
}

#[test]
fn skip_norm_weight_missing() -> TestResult {
    let skip = "/model/layers.0/post_attention_layernorm/SkipLayerNorm";
    let dir = broken("llama-fp32-cpu", |m| named(m, skip).input.truncate(2))?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        skip,
        "SkipSimplifiedLayerNormalization",
        "weight input missing",
    );
    Ok(())
}

#[test]
fn norm_weight_of_the_wrong_width() -> TestResult {
    let skip = "/model/layers.1/input_layernorm/SkipLayerNorm";
    let dir = broken("llama-fp32-cpu", |m| {
        initializer_dims(m, "model.layers.1.input_layernorm.weight", &[32, 2]);
    })?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        skip,
        "SkipSimplifiedLayerNormalization",
        "has shape [32, 2], expected [64]",
    );
    Ok(())
}

#[test]
fn int4_attributes_checked() -> TestResult {
    let qkv = "/model/layers.0/attn/qkv_proj/MatMul_Q4";
    let dir = broken("llama-int4-cpu", |m| int_attr(m, qkv, "bits", 8))?;
    assert_unsupported(
        &unsupported(dir.path())?,
        qkv,
        "MatMulNBits",
        "bits 8 is not supported (only 4)",
    );
    let dir = broken("llama-int4-cpu", |m| int_attr(m, qkv, "block_size", 64))?;
    assert_unsupported(
        &unsupported(dir.path())?,
        qkv,
        "MatMulNBits",
        "packed weight `model.layers.0.attn.qkv_proj.MatMul.weight_Q4` has shape [128, 2, 16], expected [128, 1, 32]",
    );
    let dir = broken("llama-int4-cpu", |m| int_attr(m, qkv, "K", 128))?;
    assert_unsupported(
        &unsupported(dir.path())?,
        qkv,
        "MatMulNBits",
        "K 128 does not match the input width 64",
    );
    Ok(())
}

#[test]
fn weight_shape_against_the_config() -> TestResult {
    let qkv = "/model/layers.0/attn/qkv_proj/MatMul";
    let dir = broken("llama-fp32-cpu", |m| {
        initializer_dims(
            m,
            "model.layers.0.attn.qkv_proj.MatMul.weight",
            &[64, 128, 1],
        );
    })?;
    assert_unsupported(
        &unsupported(dir.path())?,
        qkv,
        "MatMul",
        "has shape [64, 128, 1], expected [64, n]",
    );
    let dir = broken("llama-fp32-cpu", |m| {
        initializer_dims(m, "model.layers.0.attn.qkv_proj.MatMul.weight", &[128, 64]);
    })?;
    assert_unsupported(&unsupported(dir.path())?, qkv, "MatMul", "expected [64, n]");
    Ok(())
}

#[test]
fn past_input_of_another_layer() -> TestResult {
    let dir = broken("llama-fp32-cpu", |m| {
        named(m, GQA0).input[3] = "past_key_values.1.key".into()
    })?;
    assert_unsupported(
        &unsupported(dir.path())?,
        GQA0,
        "GroupQueryAttention",
        "past input `past_key_values.1.key` is not the graph input `past_key_values.0.key` the config names for layer 0",
    );
    Ok(())
}

#[test]
fn layer_count_against_the_config() -> TestResult {
    let dir = broken_dir(
        &fixture("llama-fp32-cpu"),
        |_| {},
        |c| c.replace("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3"),
    )?;
    let e = unsupported(dir.path())?;
    assert_eq!((e.node.as_str(), e.op_type.as_str()), ("graph", "graph"));
    assert!(
        e.reason
            .contains("2 decoder layers, but the config's num_hidden_layers is 3"),
        "{e}"
    );
    let dir = broken_dir(
        &fixture("llama-fp32-cpu"),
        |_| {},
        |c| c.replace("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1"),
    )?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        "/model/layers.1/input_layernorm/SkipLayerNorm",
        "SkipSimplifiedLayerNormalization",
        "starts decoder layer 1, but the config's num_hidden_layers is 1",
    );
    Ok(())
}

#[test]
fn seqlens_not_from_the_mask() -> TestResult {
    let sub = "/model/attn_mask_reformat/attn_mask_subgraph/Sub";
    let dir = broken("llama-fp32-cpu", |m| named(m, sub).op_type = "Add".into())?;
    assert_unsupported(
        &unsupported(dir.path())?,
        "/model/attn_mask_reformat/attn_mask_subgraph/Sub/Cast",
        "Cast",
        "seqlens_k: the value cast to int32 is not `x - 1`",
    );
    Ok(())
}

#[test]
fn gpt2_bidirectional_attention() -> TestResult {
    let dir = broken_dir(
        &conformance_gpt2(),
        |m| int_attr(m, "GptAttention_2", "unidirectional", 0),
        |c| c,
    )?;
    assert_unsupported(
        &unsupported(dir.path())?,
        "GptAttention_2",
        "Attention",
        "unidirectional 0",
    );
    Ok(())
}

#[test]
fn gpt2_without_position_ids() -> TestResult {
    let eln = "EmbedLayerNormalization_0";
    let dir = broken_dir(
        &conformance_gpt2(),
        |m| named(m, eln).input.truncate(8),
        |c| c,
    )?;
    assert_unsupported(
        &unsupported(dir.path())?,
        eln,
        "EmbedLayerNormalization",
        "no position_ids input",
    );
    Ok(())
}

#[test]
fn interleaved_rotary() -> TestResult {
    let gqa1 = "/model/layers.1/attn/GroupQueryAttention";
    let dir = broken("llama-fp32-cpu", |m| {
        int_attr(m, GQA0, "rotary_interleaved", 1);
        int_attr(m, gqa1, "rotary_interleaved", 1);
    })?;
    let plan = plan(dir.path())?;
    assert_eq!(
        plan.rotary.as_ref().map(|r| (r.interleaved, r.rotary_dim)),
        Some((true, 16))
    );
    assert!(plan.summary().contains("interleaved pairs"));
    // Layers must agree on one rotary.
    let dir = broken("llama-fp32-cpu", |m| {
        int_attr(m, gqa1, "rotary_interleaved", 1)
    })?;
    let e = unsupported(dir.path())?;
    assert_eq!(e.node, "graph");
    assert!(
        e.reason
            .contains("layer 1 applies a different rotary embedding"),
        "{e}"
    );
    Ok(())
}
