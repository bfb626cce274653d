//! Helpers shared by the CLI's integration tests: paths to fixtures and running the binary.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// ONNX Runtime GenAI's own conformance model, beside the repository.
pub fn conformance_dir() -> PathBuf {
    let dir = repo_root().join("../shared/conformance/tiny-random-gpt2-fp32");
    assert!(
        dir.is_dir(),
        "conformance model missing at {}: ../shared must sit beside the repository",
        dir.display()
    );
    dir
}

/// Every bundled fixture folder (each has genai_config.json).
pub fn fixture_dirs() -> Vec<PathBuf> {
    let root = repo_root().join("models/fixtures");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("genai_config.json").is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 5,
        "expected the bundled fixtures under {}, found {dirs:?}",
        root.display()
    );
    dirs
}

/// The models the native CPU decoder is checked on: every fixture but llama-bf16-cuda (the CPU
/// checks have always left the bf16 model to the CUDA ones), and the conformance model.
pub fn native_cpu_models() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fixture_dirs()
        .into_iter()
        .filter(|d| !d.ends_with("llama-bf16-cuda"))
        .collect();
    dirs.push(conformance_dir());
    dirs
}

/// The official runtime's outputs stored beside a model, if any.
pub fn official_expectations(dir: &Path) -> Option<Value> {
    let path = dir.join("expected_ort_genai_0.18.json");
    let text = std::fs::read_to_string(&path).ok()?;
    Some(serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Runs `genai-bridge` with arguments.
pub fn run_cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_genai-bridge"))
        .args(args)
        .output()
        .expect("running genai-bridge")
}

/// Runs `genai-bridge` and parses its JSON output, failing with stderr when it fails.
pub fn run_cli_json(args: &[&str]) -> Value {
    let output = run_cli(args);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "genai-bridge {args:?} failed: {stderr}"
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| panic!("bad JSON from {args:?}: {e}"))
}

/// A JSON array of integers as i64s.
pub fn ints(value: &Value) -> Vec<i64> {
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| v.as_i64().expect("an integer"))
        .collect()
}

/// A JSON array of numbers as f64s.
pub fn floats(value: &Value) -> Vec<f64> {
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|v| v.as_f64().expect("a number"))
        .collect()
}
