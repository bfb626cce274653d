//! The ONNX Runtime route reproduces the official ONNX Runtime GenAI 0.18 outputs: greedy
//! sequences exactly, through `genai-bridge generate --json --backend ort`, on every bundled
//! fixture and the conformance model; first-step logits within 1e-5 for fp32 models.

mod common;

use common::*;
use genai_backend_ort::{Device, OrtDecoder, OrtOptions};
use genai_config::Config;
use genai_engine::{Decoder, Generator};
use std::path::Path;

/// Every model with official expectations, and how many we checked.
fn models_with_expectations() -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<_> = fixture_dirs()
        .into_iter()
        .filter(|d| official_expectations(d).is_some())
        .collect();
    dirs.push(conformance_dir());
    assert!(
        dirs.len() >= 5,
        "too few models with official expectations: {dirs:?}"
    );
    dirs
}

#[test]
fn cli_greedy_sequences_equal_the_official_runtime() {
    for dir in models_with_expectations() {
        let expected = official_expectations(&dir).expect("expectations");
        let cases = expected["cases"].as_array().expect("cases");
        assert!(!cases.is_empty());
        for case in cases {
            let prompt: Vec<String> = ints(&case["prompt_ids"])
                .iter()
                .map(i64::to_string)
                .collect();
            let max_length = case["max_length"].as_i64().expect("max_length").to_string();
            let dir_arg = dir.to_str().expect("utf-8 path");
            let out = run_cli_json(&[
                "generate",
                dir_arg,
                "--backend",
                "ort",
                "--device",
                "cpu",
                "--json",
                "--prompt-ids",
                &prompt.join(","),
                "--max-length",
                &max_length,
            ]);
            assert_eq!(out["route"]["backend"], "ort");
            assert_eq!(
                ints(&out["sequence"]),
                ints(&case["greedy_sequence"]),
                "{}: prompt {prompt:?}",
                dir.display()
            );
            if let Some(reason) = case.get("finish_reason") {
                assert_eq!(
                    &out["stop_reason"],
                    reason,
                    "{}: prompt {prompt:?}",
                    dir.display()
                );
            }
        }
    }
}

/// Logits tolerance by the model's weight precision (fp32 must match to 1e-5).
fn tolerance(dir: &Path) -> f64 {
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if name.contains("fp16") || name.contains("bf16") {
        2e-2
    } else if name.contains("int4") {
        1e-4
    } else {
        1e-5
    }
}

#[test]
fn first_step_logits_match_the_official_runtime() {
    for dir in models_with_expectations() {
        let expected = official_expectations(&dir).expect("expectations");
        let config = Config::load(&dir).expect("config");
        // The official references were made on CPU with the providers cleared.
        let options = OrtOptions {
            device: Some(Device::Cpu),
            threads: None,
        };
        let decoder = OrtDecoder::load(&config, &options).expect("session");
        let tol = tolerance(&dir);
        for case in expected["cases"].as_array().expect("cases") {
            let prompt: Vec<i32> = ints(&case["prompt_ids"])
                .iter()
                .map(|&i| i as i32)
                .collect();
            let mut search = config.search.clone();
            search.max_length = case["max_length"].as_u64().expect("max_length") as usize;
            let mut generator =
                Generator::new(&decoder, &config.model, &search).expect("generator");
            generator.append_tokens(&prompt).expect("prompt");
            if dir == conformance_dir() {
                // The conformance file's logits are those of the first generated step: read with
                // get_logits() after one generate_next_token(), which runs that decode step.
                generator.generate_next_token().expect("first token");
            }
            let logits = generator.logits().expect("logits").to_vec();
            assert_eq!(logits.len(), decoder.vocab_size());
            let reference = case
                .get("first_step_logits")
                .unwrap_or(&case["first_step_logits_head"]);
            let reference = floats(reference);
            assert!(reference.len() >= 16);
            for (i, (&got, &want)) in logits.iter().zip(&reference).enumerate() {
                let diff = (f64::from(got) - want).abs();
                assert!(
                    diff <= tol,
                    "{}: logit {i}: {got} vs {want} (diff {diff}, tolerance {tol})",
                    dir.display()
                );
            }
        }
    }
}
