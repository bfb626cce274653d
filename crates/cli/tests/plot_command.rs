//! `genai-bridge plot`: the budget-sweep SVG from recorded JSON lines, and its errors.

mod common;

use common::run_cli;

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.to_str().expect("utf-8").to_string()
}

#[test]
fn a_sweep_file_becomes_an_svg_with_one_point_per_budget() {
    let temp = tempfile::tempdir().expect("temp dir");
    let lines = [
        r#"{"model":"m","precision":"fp16","commit":"abc","budget_fraction":null,"decode_tok_s":200.0}"#,
        r#"{"model":"m","precision":"fp16","commit":"abc","budget_fraction":1.0,"decode_tok_s":198.0,"pcie_limit_tok_s":null}"#,
        r#"{"model":"m","precision":"fp16","commit":"abc","budget_fraction":0.5,"decode_tok_s":6.8,"pcie_limit_tok_s":7.1}"#,
        r#"{"model":"other","precision":"int4","commit":"abc","budget_fraction":0.5,"decode_tok_s":20.0,"pcie_limit_tok_s":22.9}"#,
    ];
    let file = write(temp.path(), "sweep.jsonl", &lines.join("\n"));
    let out = temp.path().join("m.svg");
    let out_arg = out.to_str().expect("utf-8");
    let run = run_cli(&["plot", &file, "--model", "m", "--out", out_arg]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let svg = std::fs::read_to_string(&out).expect("svg written");
    assert!(svg.contains("m fp16 (commit abc)"), "{svg}");
    // Two sweep points of m (the resident line and the other model are not drawn) and one limit.
    assert_eq!(svg.matches("<circle").count(), 3, "{svg}");
    // Without --model the choice is ambiguous.
    let run = run_cli(&["plot", &file, "--out", out_arg]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && stderr.contains("--model"),
        "{stderr}"
    );
}

#[test]
fn broken_or_empty_files_are_clear_errors() {
    let temp = tempfile::tempdir().expect("temp dir");
    let out = temp.path().join("x.svg");
    let out_arg = out.to_str().expect("utf-8");
    let broken = write(temp.path(), "broken.jsonl", "{\"budget_fraction\":0.5,\n");
    let run = run_cli(&["plot", &broken, "--out", out_arg]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && stderr.contains("line 1"),
        "{stderr}"
    );
    let empty = write(temp.path(), "empty.jsonl", "{\"budget_fraction\":null}\n");
    let run = run_cli(&["plot", &empty, "--out", out_arg]);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && stderr.contains("no budget-sweep lines"),
        "{stderr}"
    );
    assert!(!out.exists(), "nothing is written on an error");
}
