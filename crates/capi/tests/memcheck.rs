//! Valgrind's memcheck over a short C ABI session (the C smoke program on the native route):
//! no invalid read or write, no use of uninitialised memory, no definite or indirect leak.
//! Errors inside ONNX Runtime's own code (which the router loads to probe it) are suppressed
//! by `tests/valgrind.supp`; ours are not.

mod common;

use std::path::PathBuf;
use std::process::Command;

#[test]
#[cfg(target_os = "linux")]
fn a_c_abi_session_is_clean_under_memcheck() {
    if Command::new("valgrind").arg("--version").output().is_err() {
        let message = "NOT RUN: valgrind is not installed (apt-get install valgrind)";
        eprintln!("{message}");
        panic!("{message}");
    }
    let program = common::build_c_smoke("capi-memcheck").unwrap_or_else(|e| panic!("{e}"));
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let model = crate_dir.join("../../models/fixtures/qwen2-fp32-cpu");
    let output = Command::new("valgrind")
        .args([
            "--tool=memcheck",
            "--leak-check=full",
            "--show-leak-kinds=definite,indirect",
            "--errors-for-leak-kinds=definite,indirect",
            "--error-exitcode=99",
        ])
        .arg(format!(
            "--suppressions={}",
            crate_dir.join("tests/valgrind.supp").display()
        ))
        .arg(&program)
        .arg(&model)
        .arg("12")
        .arg("1,2,3")
        .env("GENAI_BRIDGE_BACKEND", "native")
        .output()
        .expect("run valgrind");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let summary: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("ERROR SUMMARY") || l.contains("lost:"))
        .collect();
    println!("{}", summary.join("\n"));
    assert!(
        output.status.success() && stdout.trim_end().ends_with("ok"),
        "memcheck found errors (exit {:?}):\n{stderr}\n{stdout}",
        output.status.code()
    );
    assert!(
        stderr.contains("ERROR SUMMARY: 0 errors"),
        "memcheck reported errors:\n{stderr}"
    );
}
