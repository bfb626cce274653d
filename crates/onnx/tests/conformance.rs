//! Loads ORT GenAI's own `tiny-random-gpt2-fp32/past.onnx` (written by
//! the official tools, weights inline) and checks what is decoded.

use std::path::PathBuf;

use genai_onnx::{DataType, OnnxModel};

mod common;
use common::TestResult;

fn past_onnx() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/tiny-random-gpt2-fp32/past.onnx");
    assert!(
        path.is_file(),
        "conformance model missing: {} (the shared conformance folder must sit beside the workspace)",
        path.display()
    );
    path
}

#[test]
fn gpt2_interface() -> TestResult {
    let model = OnnxModel::load(&past_onnx())?;
    let report = model.report();
    assert_eq!(report.ir_version, 6);
    assert_eq!(report.producer, "onnxruntime.transformers 1.17.0");
    assert_eq!(
        report.opsets,
        vec![
            ("ai.onnx".to_string(), 11),
            ("com.microsoft".to_string(), 1)
        ]
    );
    assert_eq!(model.opset(""), Some(11));
    assert_eq!(model.opset("ai.onnx"), Some(11));

    let inputs: Vec<(&str, &str)> = report
        .inputs
        .iter()
        .map(|v| (v.name.as_str(), v.dtype.as_str()))
        .collect();
    let mut expected = vec![
        ("input_ids", "int32"),
        ("position_ids", "int32"),
        ("attention_mask", "int32"),
    ];
    let past: Vec<String> = (0..5).map(|i| format!("past_{i}")).collect();
    expected.extend(past.iter().map(|p| (p.as_str(), "float")));
    assert_eq!(inputs, expected);
    assert_eq!(report.inputs[0].shape, ["batch_size", "seq_len"]);
    assert_eq!(
        report.inputs[3].shape,
        ["2", "batch_size", "4", "past_seq_len", "8"]
    );

    let outputs: Vec<(&str, &str)> = report
        .outputs
        .iter()
        .map(|v| (v.name.as_str(), v.dtype.as_str()))
        .collect();
    let present: Vec<String> = (0..5).map(|i| format!("present_{i}")).collect();
    let mut expected = vec![("logits", "float")];
    expected.extend(present.iter().map(|p| (p.as_str(), "float")));
    assert_eq!(outputs, expected);
    assert_eq!(report.outputs[0].shape, ["batch_size", "seq_len", "1000"]);
    Ok(())
}

#[test]
fn gpt2_nodes_and_weights() -> TestResult {
    let model = OnnxModel::load(&past_onnx())?;
    let report = model.report();
    assert_eq!(report.node_count, 39);
    assert_eq!(report.node_count, model.graph().node.len());
    let sum: usize = report.op_histogram.iter().map(|o| o.count).sum();
    assert_eq!(sum, report.node_count);
    let count = |domain: &str, op: &str| {
        report
            .op_histogram
            .iter()
            .find(|o| o.domain == domain && o.op_type == op)
            .map(|o| o.count)
    };
    assert_eq!(count("ai.onnx", "MatMul"), Some(16));
    assert_eq!(count("com.microsoft", "Attention"), Some(5));
    assert_eq!(report.op_histogram[0].op_type, "MatMul");

    // Weight bytes: per-tensor dims agree with the totals and the stored bytes.
    let mut total = 0;
    for t in model.initializers() {
        assert_eq!(t.dtype, DataType::Float, "{}", t.name);
        let bytes = t.bytes()?;
        assert_eq!(bytes.len() as u64, t.num_elements()? * 4, "{}", t.name);
        total += bytes.len() as u64;
    }
    assert_eq!(total, 568_448);
    assert_eq!(report.total_weight_bytes, total);
    assert_eq!(report.weights.len(), 1);
    assert_eq!(report.weights[0].dtype, "float");
    assert_eq!(report.weights[0].count, 27);
    assert_eq!(report.weights[0].bytes, total);
    assert!(report.external_files.is_empty());
    // The model file is the weights plus a little graph.
    let file_size = std::fs::metadata(past_onnx())?.len();
    assert!(total < file_size && file_size - total < 16 * 1024);
    Ok(())
}

#[test]
fn gpt2_weight_values() -> TestResult {
    let model = OnnxModel::load(&past_onnx())?;
    let ln = model
        .initializer("transformer.h.0.ln_1.weight")
        .ok_or("ln_1.weight")?;
    assert_eq!(ln.dims, [32]);
    assert_eq!(ln.to_f32_vec()?, vec![1.0; 32]);
    let bias = model
        .initializer("transformer.h.0.ln_1.bias")
        .ok_or("ln_1.bias")?;
    assert_eq!(bias.to_f32_vec()?, vec![0.0; 32]);

    // The tied LM head is the embedding table transposed.
    let wte = model.initializer("transformer.wte.weight").ok_or("wte")?;
    let head = model.initializer("onnx::MatMul_1400").ok_or("lm head")?;
    assert_eq!((wte.dims, head.dims), (&[1000, 32][..], &[32, 1000][..]));
    let (wte, head) = (wte.to_f32_vec()?, head.to_f32_vec()?);
    for row in 0..1000 {
        for col in 0..32 {
            assert_eq!(
                wte[row * 32 + col],
                head[col * 1000 + row],
                "({row}, {col})"
            );
        }
    }
    assert_eq!(wte[0], -0.020_643_14);
    assert!(model.initializer("no.such.weight").is_none());
    Ok(())
}

#[test]
fn gpt2_truncated_is_a_decode_error_naming_the_file() -> TestResult {
    let bytes = std::fs::read(past_onnx())?;
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("cut.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2])?;
    let err = OnnxModel::load(&path)
        .err()
        .ok_or("truncated model loaded")?;
    assert!(
        matches!(&err, genai_onnx::Error::Decode { path: p, .. } if *p == path),
        "{err}"
    );
    assert!(err.to_string().contains("cut.onnx"), "{err}");
    Ok(())
}

#[test]
fn gpt2_report_text_and_json() -> TestResult {
    let report = OnnxModel::load(&past_onnx())?.report();
    let text = report.to_string();
    for needle in [
        "IR version: 6",
        "ai.onnx 11, com.microsoft 1",
        "inputs (8):",
        "past_seq_len",
        "outputs (6):",
        "nodes: 39",
        "com.microsoft  SkipLayerNormalization",
        "weights: 27 tensors",
        "568448 bytes",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    let json = serde_json::to_value(&report)?;
    assert_eq!(json["node_count"], 39);
    assert_eq!(json["opsets"][1][0], "com.microsoft");
    assert_eq!(json["inputs"][0]["name"], "input_ids");
    Ok(())
}
