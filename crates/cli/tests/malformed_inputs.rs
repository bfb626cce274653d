//! A corpus of malformed inputs: each gets a clear one-line error naming the problem, a
//! non-zero exit, and never a panic.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A writable copy of a bundled fp32 fixture.
fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let source = repo_root().join("models/fixtures").join(name);
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for entry in std::fs::read_dir(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()))
    {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, dir.join(path.file_name().expect("name"))).expect("copy");
    }
    (temp, dir)
}

/// Runs the CLI and checks it failed cleanly with a message containing every `needles`.
fn fails_with(args: &[&str], needles: &[&str]) {
    let output = run_cli(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !output.status.success(),
        "{args:?} should fail; stdout: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(!stderr.contains("panicked"), "{args:?} panicked: {stderr}");
    assert!(
        stderr.starts_with("error: "),
        "{args:?}: not one readable error line: {stderr}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: expected one line: {stderr}"
    );
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: {needle:?} not in: {stderr}"
        );
    }
}

fn edit_config(dir: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = dir.join("genai_config.json");
    let mut value: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    edit(&mut value);
    std::fs::write(&path, serde_json::to_string_pretty(&value).expect("json")).expect("write");
}

fn generate_args(dir: &Path) -> Vec<String> {
    [
        "generate",
        dir.to_str().expect("utf-8"),
        "--backend",
        "ort",
        "--json",
        "--prompt-ids",
        "1,2,3",
        "--max-length",
        "8",
    ]
    .map(String::from)
    .to_vec()
}

fn fails_generate(dir: &Path, needles: &[&str]) {
    let args = generate_args(dir);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fails_with(&args, needles);
}

#[test]
fn unknown_config_key_names_its_path() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    edit_config(&dir, |c| {
        c["model"]["decoder"]["sesion_options"] = serde_json::json!({})
    });
    fails_generate(&dir, &["sesion_options", "model.decoder"]);
}

#[test]
fn wrong_config_type_names_its_path() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    edit_config(&dir, |c| {
        c["model"]["context_length"] = serde_json::json!("long")
    });
    fails_generate(&dir, &["model.context_length"]);
}

#[test]
fn invalid_json_says_where() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    std::fs::write(dir.join("genai_config.json"), "{\"model\": {").expect("write");
    fails_generate(&dir, &["genai_config.json"]);
}

#[test]
fn eos_outside_vocabulary_is_rejected() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    edit_config(&dir, |c| {
        c["model"]["eos_token_id"] = serde_json::json!([1, 100000])
    });
    fails_generate(&dir, &["100000", "vocab_size"]);
}

#[test]
fn max_length_above_context_is_rejected() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    edit_config(&dir, |c| {
        c["search"]["max_length"] = serde_json::json!(1_000_000)
    });
    fails_generate(&dir, &["max_length", "context_length"]);
}

#[test]
fn truncated_onnx_is_a_clear_error() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    let model = dir.join("model.onnx");
    let bytes = std::fs::read(&model).expect("read");
    std::fs::write(&model, &bytes[..bytes.len() / 2]).expect("write");
    fails_generate(&dir, &["model.onnx"]);
    fails_with(&["inspect", dir.to_str().expect("utf-8")], &["model.onnx"]);
}

#[test]
fn external_data_past_the_end_of_its_file_is_a_clear_error() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    let data = dir.join("model.onnx.data");
    assert!(data.is_file(), "the fixture stores its weights externally");
    let bytes = std::fs::read(&data).expect("read");
    std::fs::write(&data, &bytes[..bytes.len() / 2]).expect("write");
    fails_with(
        &["inspect", dir.to_str().expect("utf-8")],
        &["model.onnx.data"],
    );
    fails_generate(&dir, &["model.onnx"]);
}

#[test]
fn a_truncated_data_file_prints_its_cause_once() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    let data = dir.join("model.onnx.data");
    let bytes = std::fs::read(&data).expect("read");
    std::fs::write(&data, &bytes[..bytes.len() / 2]).expect("write");
    let path = dir.to_str().expect("utf-8");
    let generate = generate_args(&dir);
    let generate: Vec<&str> = generate.iter().map(String::as_str).collect();
    for args in [generate, vec!["route", path], vec!["inspect", path]] {
        let output = run_cli(&args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{args:?} must fail");
        assert_eq!(
            stderr.matches("lies past the end of").count(),
            1,
            "{args:?}: the cause is not printed exactly once: {stderr}"
        );
        assert!(stderr.contains("model.onnx.data"), "{args:?}: {stderr}");
    }
}

#[test]
fn missing_decoder_file_is_named() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    std::fs::remove_file(dir.join("model.onnx")).expect("rm");
    fails_generate(&dir, &["model.onnx"]);
}

#[test]
fn missing_tokenizer_is_named() {
    let (_t, dir) = copy_fixture("llama-fp32-cpu");
    std::fs::remove_file(dir.join("tokenizer.json")).expect("rm");
    fails_generate(&dir, &["tokenizer.json"]);
}

#[test]
fn token_ids_outside_the_vocabulary_are_rejected() {
    let dir = repo_root().join("models/fixtures/llama-fp32-cpu");
    let dir = dir.to_str().expect("utf-8");
    fails_with(
        &[
            "generate",
            dir,
            "--backend",
            "ort",
            "--prompt-ids",
            "1,99999",
            "--max-length",
            "8",
        ],
        &["99999", "out of range"],
    );
    fails_with(
        &[
            "generate",
            dir,
            "--backend",
            "ort",
            "--prompt-ids",
            "1,-5",
            "--max-length",
            "8",
        ],
        &["-5", "out of range"],
    );
}

#[test]
fn a_prompt_longer_than_the_context_is_rejected() {
    let dir = repo_root().join("models/fixtures/llama-fp32-cpu");
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("genai_config.json")).expect("read"),
    )
    .expect("json");
    let context = config["model"]["context_length"]
        .as_u64()
        .expect("context_length") as usize;
    let prompt = vec!["5"; context + 1].join(",");
    let dir = dir.to_str().expect("utf-8");
    fails_with(
        &["generate", dir, "--backend", "ort", "--prompt-ids", &prompt],
        &["exceeds"],
    );
    fails_with(
        &[
            "generate",
            dir,
            "--backend",
            "ort",
            "--prompt-ids",
            "1,2",
            "--max-new-tokens",
            &context.to_string(),
        ],
        &["context_length"],
    );
}

#[test]
fn a_missing_model_folder_is_named() {
    fails_with(
        &["generate", "/nonexistent/model", "--prompt-ids", "1"],
        &["/nonexistent/model"],
    );
}

#[test]
fn a_kv_cache_larger_than_memory_is_refused_before_it_is_allocated() {
    // A config may declare a context of 2^31 - 1 positions: the caches for it would need a
    // terabyte. Both backends must say so instead of aborting on a failed allocation.
    let (_t, dir) = copy_fixture("qwen2-fp32-cpu");
    edit_config(&dir, |c| {
        c["model"]["context_length"] = serde_json::json!(i32::MAX);
        c["search"]["max_length"] = serde_json::json!(i32::MAX);
    });
    let path = dir.to_str().expect("utf-8");
    let native = [
        "generate",
        path,
        "--backend",
        "native",
        "--prompt-ids",
        "1,2",
    ];
    fails_with(&native, &["KV cache", "max_length", "available"]);
    let ort = ["generate", path, "--backend", "ort", "--prompt-ids", "1,2"];
    fails_with(&ort, &["KV"]);
}

#[test]
fn native_weights_over_the_memory_limit_hand_over_to_onnx_runtime_under_auto() {
    let (_t, dir) = copy_fixture("qwen2-fp32-cpu");
    let path = dir.to_str().expect("utf-8");
    let run = |backend: &str| {
        Command::new(env!("CARGO_BIN_EXE_genai-bridge"))
            .args([
                "generate",
                path,
                "--prompt-ids",
                "1,2",
                "--max-new-tokens",
                "2",
            ])
            .args(["--backend", backend, "--json"])
            .env("GENAI_BRIDGE_MEMORY_LIMIT", "4096")
            .output()
            .expect("run genai-bridge")
    };
    let native = run("native");
    let stderr = String::from_utf8_lossy(&native.stderr);
    assert!(!native.status.success(), "native must refuse: {stderr}");
    assert!(stderr.contains("prepared weights"), "{stderr}");
    let auto = run("auto");
    let stdout = String::from_utf8_lossy(&auto.stdout);
    assert!(
        auto.status.success(),
        "auto must fall back: {}",
        String::from_utf8_lossy(&auto.stderr)
    );
    let json: serde_json::Value = serde_json::from_str(stdout.trim()).expect("json");
    assert_eq!(json["route"]["backend"], "ort", "{json}");
    assert!(
        json["route"]["reasons"]
            .to_string()
            .contains("could not load"),
        "{json}"
    );
}

#[test]
fn a_malformed_vram_budget_is_a_clear_error() {
    let (_temp, dir) = copy_fixture("qwen2-fp32-cpu");
    let mut args = generate_args(&dir);
    args.extend(["--vram-budget".to_string(), "150%".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fails_with(&args, &["--vram-budget \"150%\"", "(0, 100]"]);
    // The same from genai_config.json's cuda provider options.
    edit_config(&dir, |c| {
        c["model"]["decoder"]["session_options"]["provider_options"] =
            serde_json::json!([{ "cuda": { "vram_budget": "12XB" } }]);
    });
    let mut args = generate_args(&dir);
    args.extend(["--device".to_string(), "cpu".to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    fails_with(&args, &["\"12XB\""]);
}

#[test]
fn a_vram_budget_off_the_native_cuda_decoder_is_reported_as_ignored() {
    let (_temp, dir) = copy_fixture("qwen2-fp32-cpu");
    let mut args = generate_args(&dir);
    args.extend(["--vram-budget".to_string(), "2GB".to_string()]);
    let output = run_cli(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    let reasons = json["route"]["reasons"].to_string();
    assert!(
        reasons.contains("VRAM budget 2GB from the caller ignored"),
        "{reasons}"
    );
}

#[test]
fn a_budget_sweep_off_the_native_cuda_decoder_is_refused() {
    let (_temp, dir) = copy_fixture("qwen2-fp32-cpu");
    let dir = dir.to_str().expect("utf-8");
    fails_with(
        &[
            "bench",
            dir,
            "--device",
            "cpu",
            "--budget-sweep",
            "50",
            "--runs",
            "1",
            "--decode-tokens",
            "2",
            "--prompt-tokens",
            "2",
        ],
        &["--budget-sweep", "native CUDA decoder", "cpu"],
    );
}
