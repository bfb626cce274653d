//! Hand-edited copies of the fixtures whose dataflow differs from the decoder the plan
//! describes (unknown ops, extra consumers, nodes with no role) must give `Unsupported` naming
//! the node at fault; forms that compute the same decoder (float casts around a norm, a tied
//! lm_head through a transposed embedding table) must still lift.

mod common;

use common::*;
use genai_frontend::{Table, Weight};
use genai_onnx::proto::AttributeProto;
use genai_onnx::proto::attribute_proto::AttributeType;

#[test]
fn unknown_activation() -> TestResult {
    let sigmoid = "/model/layers.0/mlp/act_fn/Sigmoid";
    let dir = broken("llama-fp32-cpu", |m| {
        named(m, sigmoid).op_type = "Tanh".into()
    })?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        sigmoid,
        "Tanh",
        "activation Tanh after the gate projection is not a known activation",
    );
    Ok(())
}

#[test]
fn extra_consumer_of_an_intermediate_value() -> TestResult {
    let dir = broken("llama-fp32-cpu", |m| {
        let probe = node(
            "probe",
            "Identity",
            &["/model/layers.0/mlp/act_fn/Sigmoid/output_0"],
            &["probe_out"],
        );
        nodes(m).push(probe);
        add_output(m, "probe_out");
    })?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        "probe",
        "Identity",
        "unexpected extra consumer of `/model/layers.0/mlp/act_fn/Sigmoid/output_0`",
    );
    Ok(())
}

#[test]
fn extra_consumer_of_the_residual_stream_unnamed() -> TestResult {
    let mut index = 0;
    let dir = broken("qwen3-fp32-cpu", |m| {
        let probe = node(
            "",
            "Identity",
            &["/model/layers.0/post_attention_layernorm/output_3"],
            &["probe_out"],
        );
        index = nodes(m).len();
        nodes(m).push(probe);
        add_output(m, "probe_out");
    })?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        &format!("Identity #{index}"),
        "Identity",
        "unexpected extra consumer",
    );
    Ok(())
}

#[test]
fn intermediate_value_exposed_as_graph_output() -> TestResult {
    let o_proj = "/model/layers.1/attn/o_proj/MatMul";
    let dir = broken("llama-fp32-cpu", |m| {
        add_output(m, "/model/layers.1/attn/o_proj/MatMul/output_0")
    })?;
    let e = unsupported(dir.path())?;
    assert_unsupported(&e, o_proj, "MatMul", "is also the graph output");
    Ok(())
}

#[test]
fn unknown_op_in_the_residual_stream() -> TestResult {
    let skip = "/model/layers.0/post_attention_layernorm/SkipLayerNorm";
    let dir = broken("llama-fp32-cpu", |m| {
        let o_out = "/model/layers.0/attn/o_proj/MatMul/output_0";
        nodes(m).push(node("inserted_relu", "Relu", &[o_out], &["relu_out"]));
        named(m, skip).input[1] = "relu_out".into();
    })?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        "inserted_relu",
        "Relu",
        "where the plan expects a SkipSimplifiedLayerNormalization or SkipLayerNormalization adding the attention output to the residual stream",
    );
    Ok(())
}

#[test]
fn node_with_no_role() -> TestResult {
    let dir = broken("llama-fp32-cpu", |m| {
        nodes(m).push(node("stray", "Shape", &["attention_mask"], &["stray_out"]));
    })?;
    let e = unsupported(dir.path())?;
    assert_unsupported(
        &e,
        "stray",
        "Shape",
        "is not part of the decoder the plan describes",
    );
    Ok(())
}

#[test]
fn duplicate_producer() -> TestResult {
    let dir = broken("llama-fp32-cpu", |m| {
        nodes(m).push(node(
            "dup",
            "Identity",
            &["input_ids"],
            &["/model/embed_tokens/Gather/output_0"],
        ));
    })?;
    assert_unsupported(
        &unsupported(dir.path())?,
        "dup",
        "Identity",
        "is also produced by /model/embed_tokens/Gather",
    );
    Ok(())
}

#[test]
fn op_after_the_lm_head() -> TestResult {
    let dir = broken("llama-fp32-cpu", |m| {
        named(m, "/lm_head/MatMul").output[0] = "raw_logits".into();
        nodes(m).push(node("softcap_tanh", "Tanh", &["raw_logits"], &["logits"]));
    })?;
    assert_unsupported(
        &unsupported(dir.path())?,
        "softcap_tanh",
        "Tanh",
        "Tanh after the lm_head is not supported",
    );
    Ok(())
}

#[test]
fn gpt2_skip_bias_on_a_linear_that_has_one() -> TestResult {
    // Give the first c_proj its own bias Add: the SkipLayerNormalization bias would be a second one.
    let skip = "SkipLayerNorm_AddBias_0";
    let dir = broken_dir(
        &conformance_gpt2(),
        |m| {
            named(m, "GptAttention_0_matmul").output[0] = "c_proj_raw".into();
            nodes(m).push(node(
                "c_proj_bias",
                "Add",
                &["c_proj_raw", "transformer.h.0.ln_1.bias"],
                &["GptAttention_0_matmul_output"],
            ));
        },
        |c| c,
    )?;
    assert_unsupported(
        &unsupported(dir.path())?,
        skip,
        "SkipLayerNormalization",
        "already has a bias",
    );
    Ok(())
}

#[test]
fn float_casts_around_a_norm_change_nothing() -> TestResult {
    // What the builder writes when a norm runs in fp32 inside an fp16 graph.
    let skip = "/model/layers.0/post_attention_layernorm/SkipLayerNorm";
    let dir = broken("llama-fp16-cuda", |m| {
        let (a, b) = {
            let n = named(m, skip);
            let (a, b) = (n.input[0].clone(), n.input[1].clone());
            n.input[0] = "a32".into();
            n.input[1] = "b32".into();
            n.output[0] = "y32".into();
            n.output[3] = "s32".into();
            (a, b)
        };
        let cast = |name: &str, from: &str, to_value: &str, to: i64| {
            let mut c = node(name, "Cast", &[from], &[to_value]);
            c.attribute.push(AttributeProto {
                name: "to".into(),
                r#type: AttributeType::Int as i32,
                i: to,
                ..Default::default()
            });
            c
        };
        let y = "/model/layers.0/post_attention_layernorm/output_0";
        let s = "/model/layers.0/post_attention_layernorm/output_3";
        nodes(m).extend([
            cast("c_a", &a, "a32", 1),
            cast("c_b", &b, "b32", 1),
            cast("c_y", "y32", y, 10),
            cast("c_s", "s32", s, 10),
        ]);
    })?;
    let with_casts = plan(dir.path())?;
    let without = plan(&fixture("llama-fp16-cuda"))?;
    assert_eq!(with_casts, without);
    Ok(())
}

#[test]
fn int_cast_in_the_residual_stream_is_not_transparent() -> TestResult {
    let skip = "/model/layers.0/post_attention_layernorm/SkipLayerNorm";
    let dir = broken("llama-fp32-cpu", |m| {
        let a = named(m, skip).input[1].clone();
        named(m, skip).input[1] = "as_int".into();
        let mut c = node("to_int", "Cast", &[&a], &["as_int"]);
        c.attribute.push(AttributeProto {
            name: "to".into(),
            r#type: AttributeType::Int as i32,
            i: 7,
            ..Default::default()
        });
        nodes(m).push(c);
    })?;
    assert_unsupported(
        &unsupported(dir.path())?,
        "to_int",
        "Cast",
        "where the plan expects",
    );
    Ok(())
}

#[test]
fn lm_head_through_a_transposed_embedding_table() -> TestResult {
    // The older tied form: the lm_head multiplies by Transpose(embedding table).
    let dir = broken("llama-fp32-cpu", |m| {
        nodes(m).push(node(
            "tie",
            "Transpose",
            &["model.embed_tokens.weight"],
            &["embed_t"],
        ));
        let perm = AttributeProto {
            name: "perm".into(),
            r#type: AttributeType::Ints as i32,
            ints: vec![1, 0],
            ..Default::default()
        };
        named(m, "tie").attribute.push(perm);
        named(m, "/lm_head/MatMul").input[1] = "embed_t".into();
    })?;
    let plan = plan(dir.path())?;
    match &plan.lm_head.weight {
        Weight::Dense { tensor, transposed } => {
            assert_eq!(
                (tensor.name.as_str(), *transposed),
                ("model.embed_tokens.weight", true)
            );
            assert_eq!(tensor.dims, [512, 64]);
        }
        Weight::Int4(_) => panic!("dense expected"),
    }
    assert_eq!((plan.lm_head.k, plan.lm_head.n), (64, 512));
    assert!(matches!(plan.embedding.tokens, Table::Dense(_)));
    assert!(plan.tied_embeddings());
    assert!(plan.summary().contains(
        "lm_head: f32 64 → 512 (stored transposed [512, 64]) (tied: the embedding table)"
    ));
    Ok(())
}
