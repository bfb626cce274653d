//! The crates below genai-runtime never read the process environment: their settings arrive as
//! typed values (`genai_backend_native::NativeTuning`, read once by the runtime's
//! `settings.rs`). This walks `crates/*/src` of every crate but runtime, cli and capi
//! (build scripts and `tests/` folders are not `src`) and names each read by file and line.

use std::path::{Path, PathBuf};

/// The crates allowed to read the environment: the runtime and the programs above it.
const ABOVE: &[&str] = &["runtime", "cli", "capi"];

/// Reads of the environment, as written in Rust source.
const READS: &[&str] = &["std::env::var", "env::var(", "env::var_os(", "env::vars"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_crate_below_the_runtime_reads_the_environment() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    let mut checked_crates = 0;
    for entry in std::fs::read_dir(&crates)
        .expect("the crates folder")
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let src = entry.path().join("src");
        if ABOVE.contains(&name.as_str()) || !src.is_dir() {
            continue;
        }
        checked_crates += 1;
        rust_files(&src, &mut files);
    }
    assert!(
        checked_crates >= 5,
        "only {checked_crates} crates found under {crates:?}"
    );
    let mut found = Vec::new();
    for file in &files {
        let shown = file
            .strip_prefix(&crates)
            .unwrap_or(file)
            .display()
            .to_string();
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            if READS.iter().any(|r| code.contains(r)) {
                found.push(format!("crates/{shown}:{}: {}", i + 1, code));
            }
        }
    }
    assert!(
        found.is_empty(),
        "environment reads below genai-runtime (take a typed setting instead):\n{}",
        found.join("\n")
    );
}
