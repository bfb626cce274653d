//! Runtime settings on the command line: read from the environment once, reported as the
//! `settings` object of `route --json` and `bench --json`, a malformed value refused with one
//! error naming the variable, and the variables listed in the help.

mod common;

use common::*;
use serde_json::Value;
use std::process::{Command, Output};

fn fixture(name: &str) -> String {
    repo_root()
        .join("models/fixtures")
        .join(name)
        .to_str()
        .expect("utf-8")
        .to_string()
}

/// Runs the CLI with exactly `env` of the settings' variables set (every `GENAI_BRIDGE_*` of
/// this process removed).
fn run_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_genai-bridge"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("GENAI_BRIDGE_") {
            command.env_remove(name);
        }
    }
    command
        .args(args)
        .envs(env.iter().copied())
        .output()
        .expect("running genai-bridge")
}

fn json_of(args: &[&str], env: &[(&str, &str)]) -> Value {
    let output = run_with(args, env);
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

#[test]
fn route_reports_every_setting_defaults_included() {
    let dir = fixture("qwen2-fp32-cpu");
    let out = json_of(&["route", &dir, "--json"], &[]);
    let settings = &out["settings"];
    assert_eq!(settings["backend"], "auto", "{out}");
    assert_eq!(settings["vram_budget"], "none", "{out}");
    assert_eq!(settings["log"], "0", "{out}");
    // The native decoders' tuning, every variable with its default.
    assert_eq!(settings["GENAI_BRIDGE_CUDA_GRAPH"], "1", "{out}");
    assert_eq!(settings["GENAI_BRIDGE_DECODE_GEMV"], "auto", "{out}");
    let count = settings.as_object().map_or(0, |o| o.len());
    assert_eq!(count, 3 + 23 + 2, "{out}");
}

#[test]
fn the_environment_picks_the_backend_unless_the_flag_does() {
    let dir = fixture("qwen2-fp32-cpu");
    let env = [("GENAI_BRIDGE_BACKEND", "ort")];
    let out = json_of(&["route", &dir, "--json"], &env);
    assert_eq!(out["backend"], "ort", "{out}");
    assert_eq!(out["settings"]["backend"], "ort", "{out}");
    let out = json_of(&["route", &dir, "--backend", "native", "--json"], &env);
    assert_eq!(out["backend"], "native", "{out}");
    assert_eq!(out["settings"]["backend"], "native", "{out}");
}

#[test]
fn a_malformed_setting_is_one_error_naming_the_variable() {
    let dir = fixture("qwen2-fp32-cpu");
    let cases = [
        (
            ("GENAI_BRIDGE_BACKEND", "x"),
            "error: GENAI_BRIDGE_BACKEND=\"x\" is not one of auto, ort, native",
        ),
        (
            ("GENAI_BRIDGE_VRAM_BUDGET", "lots"),
            "error: GENAI_BRIDGE_VRAM_BUDGET=\"lots\" is not a VRAM budget: ",
        ),
        (
            ("GENAI_BRIDGE_LOG", "yes"),
            "error: GENAI_BRIDGE_LOG=\"yes\" is not one of 0, 1",
        ),
        (
            ("GENAI_BRIDGE_CUDA_GRAPH", "maybe"),
            "error: GENAI_BRIDGE_CUDA_GRAPH=\"maybe\" is not accepted: expected ",
        ),
    ];
    for (variable, start) in cases {
        for args in [
            vec!["route", dir.as_str()],
            vec![
                "generate",
                dir.as_str(),
                "--prompt-ids",
                "1,2",
                "--max-length",
                "4",
            ],
        ] {
            let output = run_with(&args, &[variable]);
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(!output.status.success(), "{args:?} {variable:?} must fail");
            assert!(stderr.starts_with(start), "{args:?} {variable:?}: {stderr}");
            assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        }
    }
}

#[test]
fn bench_reports_the_settings_in_effect() {
    let dir = fixture("qwen2-fp32-cpu");
    let args = [
        "bench",
        dir.as_str(),
        "--backend",
        "ort",
        "--runs",
        "1",
        "--prompt-tokens",
        "2",
        "--decode-tokens",
        "2",
        "--json",
    ];
    let env = [
        ("GENAI_BRIDGE_VRAM_BUDGET", "2GB"),
        ("GENAI_BRIDGE_CPU_ISA", "scalar"),
    ];
    let out = json_of(&args, &env);
    let settings = &out["settings"];
    assert_eq!(settings["backend"], "ort", "{out}");
    assert_eq!(
        settings["vram_budget"], "2GB from GENAI_BRIDGE_VRAM_BUDGET",
        "{out}"
    );
    assert_eq!(settings["log"], "0", "{out}");
    assert_eq!(settings["GENAI_BRIDGE_CPU_ISA"], "scalar", "{out}");
}

#[test]
fn the_help_lists_the_settings() {
    let output = run_with(&["--help"], &[]);
    let help = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{help}");
    let listed = [
        "GENAI_BRIDGE_BACKEND",
        "GENAI_BRIDGE_VRAM_BUDGET",
        "GENAI_BRIDGE_LOG",
        "GENAI_BRIDGE_CPU_ISA",
        "GENAI_BRIDGE_MEMORY_LIMIT",
        "GENAI_BRIDGE_DEVICE_MEMORY_LIMIT",
        "GENAI_BRIDGE_KERNEL_CACHE",
        "ORT_DYLIB_PATH",
        "ORT_LIB_PATH",
    ];
    for name in listed {
        assert!(help.contains(name), "{name} not in: {help}");
    }
    assert!(help.contains("`settings` object"), "{help}");
}
