//! Builds `tests/c/smoke.c` against the generated header, links it to the drop-in library and
//! runs it on models with official reference outputs: the sequence it prints must equal the
//! official ONNX Runtime GenAI 0.18 sequence, and its error checks must pass.

mod common;

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn first_case(model: &Path) -> Result<(Vec<i64>, u64, Vec<i64>)> {
    let text = std::fs::read_to_string(model.join("expected_ort_genai_0.18.json"))?;
    let json: Value = serde_json::from_str(&text)?;
    let case = &json["cases"][0];
    let ids = |v: &Value| -> Vec<i64> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_i64)
            .collect()
    };
    let max_length = case["max_length"].as_u64().context("max_length")?;
    Ok((
        ids(&case["prompt_ids"]),
        max_length,
        ids(&case["greedy_sequence"]),
    ))
}

fn run(program: &Path, model: &Path, backend: &str) -> Result<()> {
    let (prompt, max_length, want) = first_case(model)?;
    let joined = |v: &[i64]| v.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    let output = Command::new(program)
        .arg(model)
        .arg(max_length.to_string())
        .arg(joined(&prompt))
        .env("GENAI_BRIDGE_BACKEND", backend)
        .output()?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        bail!(
            "{} ({backend}): exit {:?}\n{stdout}\n{stderr}",
            model.display(),
            output.status
        );
    }
    let sequence = stdout
        .lines()
        .find_map(|l| l.strip_prefix("sequence: "))
        .context("no sequence line")?;
    ensure!(
        sequence == joined(&want),
        "{} ({backend}): sequence {sequence} != official {}",
        model.display(),
        joined(&want)
    );
    for label in [
        "bad-path",
        "null-path",
        "unsupported",
        "unknown-option",
        "bad-token",
    ] {
        ensure!(
            stdout.contains(&format!("{label}: ")),
            "{label} line missing:\n{stdout}"
        );
    }
    ensure!(stdout.contains("not supported by genai-bridge"), "{stdout}");
    ensure!(stdout.trim_end().ends_with("ok"), "{stdout}");
    Ok(())
}

#[test]
fn c_program_generates_the_official_sequence() -> Result<()> {
    let program = common::build_c_smoke("capi-c-test").map_err(anyhow::Error::msg)?;
    let root = crate_dir().join("../..");
    let models = [
        root.join("models/fixtures/qwen2-fp32-cpu"),
        root.join("models/fixtures/llama-int4-cpu"),
        root.join("../shared/conformance/tiny-random-gpt2-fp32"),
    ];
    for model in &models {
        ensure!(
            model.is_dir(),
            "model folder {} is missing",
            model.display()
        );
        for backend in ["ort", "auto"] {
            run(&program, model, backend)?;
        }
    }
    Ok(())
}
