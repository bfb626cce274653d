//! The `route` and `parity` commands: decisions with reasons, verdicts with exit codes.

mod common;

use common::*;

fn fixture(name: &str) -> String {
    repo_root()
        .join("models/fixtures")
        .join(name)
        .to_str()
        .expect("utf-8")
        .to_string()
}

#[test]
fn route_explains_auto_and_explicit_choices() {
    let dir = fixture("qwen2-int4-cpu");
    let auto = run_cli_json(&["route", &dir, "--json"]);
    assert_eq!(auto["backend"], "native");
    assert_eq!(auto["device"], "cpu");
    assert_eq!(auto["facts"]["lift"]["ok"], true);
    assert!(
        auto["plan"]
            .as_str()
            .expect("plan summary")
            .contains("int4"),
        "{auto}"
    );
    let ort = run_cli_json(&["route", &dir, "--backend", "ort", "--json"]);
    assert_eq!(ort["backend"], "ort");
    assert!(
        ort["reasons"]
            .as_array()
            .expect("reasons")
            .iter()
            .any(|r| r.as_str().unwrap_or("").contains("ort requested"))
    );
}

#[test]
fn route_falls_back_from_a_configured_cuda_device_without_cuda() {
    let out = run_cli_json(&["route", &fixture("llama-fp16-cuda"), "--json"]);
    assert_eq!(out["facts"]["configured_device"], "cuda");
    assert_eq!(
        out["facts"]["onnxruntime_cuda"]["ok"], false,
        "this test runs where ONNX Runtime has no CUDA: {out}"
    );
    assert_eq!(out["device"], "cpu");
    assert!(
        out["reasons"][0]
            .as_str()
            .expect("reason")
            .contains("asks for cuda"),
        "{out}"
    );
}

#[test]
fn parity_passes_in_tolerance_and_reports_the_fields() {
    let out = run_cli_json(&[
        "parity",
        &fixture("qwen2-fp32-cpu"),
        "--a",
        "ort",
        "--b",
        "native",
        "--tokens",
        "16",
        "--json",
    ]);
    assert_eq!(out["pass"], true, "{out}");
    assert!(out["max_abs_logit_diff"].as_f64().expect("number") < 1e-4);
    assert_eq!(out["top1_agreement"], 1.0);
    assert!(out["kl_max"].as_f64().expect("number") < 1e-6);
    assert!(out["first_divergence"].is_null());
}

#[test]
fn parity_reads_prompt_files_and_rejects_bad_ids() {
    let temp = tempfile::tempdir().expect("tmp");
    let prompts = temp.path().join("prompts.txt");
    std::fs::write(&prompts, "1,2,3\nOnce upon a time\n").expect("write");
    let dir = fixture("llama-fp32-cpu");
    let p = prompts.to_str().expect("utf-8");
    let out = run_cli_json(&["parity", &dir, "--prompts", p, "--tokens", "8", "--json"]);
    // 2 prompts × (1 prompt step + 8 generated tokens).
    assert_eq!(out["steps"], 18, "{out}");
    std::fs::write(&prompts, "1,999999\n").expect("write");
    let output = run_cli(&["parity", &dir, "--prompts", p]);
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("out of range"));
}

#[test]
fn generate_with_verify_keeps_a_matching_native_decoder() {
    let out = run_cli_json(&[
        "generate",
        &fixture("mistral-fp32-cpu"),
        "--prompt-ids",
        "1,5,9",
        "--max-length",
        "12",
        "--verify",
        "--json",
    ]);
    assert_eq!(out["route"]["backend"], "native");
    // The CPU decoder captures no graph: its counters are present and zero.
    assert_eq!(out["counters"]["graph_captures"], 0, "{out}");
    assert_eq!(out["counters"]["graph_fallbacks"], 0, "{out}");
    let reasons = out["route"]["reasons"].as_array().expect("reasons");
    assert!(
        reasons.iter().any(|r| r
            .as_str()
            .unwrap_or("")
            .starts_with("verify: native matches")),
        "{reasons:?}"
    );
}
