//! Drop-in test: the official onnxruntime-genai 0.18.0 Python package, run on our libonnxruntime-genai.so, must match the untouched package.
//!
//! What it does:
//! 1. Makes (once, cached under `<target>/dropin/venv-<hash of requirements.txt and python version>`)
//!    a virtual environment with `python3 -m venv` and
//!    `pip install --require-hashes -r tests/dropin/requirements.txt`.
//! 2. Finds the cdylib cargo built for this crate (`libonnxruntime_genai.so` in `target/<profile>/`,
//!    or `GENAI_CAPI_LIB`).
//! 3. Runs `tests/dropin/compare.py` over every fixture in `models/fixtures` and
//!    `../shared/conformance/tiny-random-gpt2-fp32`: once with `GENAI_BRIDGE_BACKEND=ort` at the ONNX
//!    Runtime route's tolerances, once with `GENAI_BRIDGE_BACKEND=native` at the native decoder's
//!    tolerances (and a check of the library's log that the native decoder served every model,
//!    batches included). Token sequences, text and everything else are always compared exactly.
//!
//! A machine without python3, venv or pip fails the test with a "NOT RUN" line: there is no silent skip.
//! Reports and per-run results are kept in `<target>/dropin/work-<mode>/`.

mod common;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};

/// One mode at a time: both share the venv and the cache of official results.
static SERIAL: Mutex<()> = Mutex::new(());

/// Logits tolerances of the ONNX Runtime route (what the official runtime's own kernels give).
const ORT_TOLERANCES: &[(&str, &str)] = &[
    ("fp32", "1e-5"),
    ("int4", "1e-4"),
    ("fp16", "2e-2"),
    ("bf16", "2e-2"),
];
/// Logits tolerances of the native decoder (README, "Parity tolerances").
const NATIVE_TOLERANCES: &[(&str, &str)] = &[
    ("fp32", "1e-4"),
    ("int4", "2e-1"),
    ("fp16", "5e-2"),
    ("bf16", "1e-1"),
];

fn manifest_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn dropin_dir() -> PathBuf {
    manifest_dir().join("tests").join("dropin")
}

/// `<target>/dropin`: `CARGO_TARGET_TMPDIR` is `<target>/tmp`.
fn cache_root() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent()
        .map(Path::to_path_buf)
        .unwrap_or(tmp)
        .join("dropin")
}

/// Fails the test because the environment cannot run it. Loud either way; under CI it is a plain failure.
fn not_run(why: &str) -> ! {
    if env::var_os("CI").is_some() {
        panic!("python drop-in test cannot run in CI: {why}");
    }
    eprintln!("\n==============================================================================");
    eprintln!("NOT RUN: python drop-in test (crates/capi/tests/python_dropin.rs): {why}");
    eprintln!("==============================================================================\n");
    panic!("NOT RUN: {why}");
}

fn run_capture(cmd: &mut Command) -> std::io::Result<Output> {
    cmd.stdin(Stdio::null()).output()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// FNV-1a, 64 bit: a stable cache key (std's hasher is not guaranteed stable across releases).
fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn python3() -> String {
    env::var("GENAI_DROPIN_PYTHON").unwrap_or_else(|_| "python3".to_string())
}

/// The venv's python, creating the venv and installing the pinned packages the first time.
fn venv_python() -> PathBuf {
    let py = python3();
    let version = match run_capture(Command::new(&py).arg("--version")) {
        Ok(o) if o.status.success() => text(&o).trim().to_string(),
        Ok(o) => not_run(&format!("`{py} --version` failed: {}", text(&o))),
        Err(e) => not_run(&format!(
            "no `{py}` on PATH ({e}); install Python 3 with venv and pip"
        )),
    };
    match run_capture(Command::new(&py).args(["-c", "import venv, ensurepip"])) {
        Ok(o) if o.status.success() => {}
        Ok(o) => not_run(&format!(
            "`{py}` has no working venv/ensurepip (Debian/Ubuntu: apt install python3-venv): {}",
            text(&o)
        )),
        Err(e) => not_run(&format!("cannot run `{py}`: {e}")),
    }
    let requirements = dropin_dir().join("requirements.txt");
    let req_bytes = fs::read(&requirements).expect("read tests/dropin/requirements.txt");
    let mut key = req_bytes.clone();
    key.extend_from_slice(version.as_bytes());
    let venv = cache_root().join(format!("venv-{:016x}", fnv1a(&key)));
    let python = venv.join("bin").join("python");
    let marker = venv.join(".installed");
    if marker.exists() && python.exists() {
        return python;
    }
    if venv.exists() {
        fs::remove_dir_all(&venv).expect("remove an incomplete venv");
    }
    fs::create_dir_all(cache_root()).expect("create the dropin cache folder");
    eprintln!("python_dropin: creating {} ({version})", venv.display());
    match run_capture(Command::new(&py).args(["-m", "venv"]).arg(&venv)) {
        Ok(o) if o.status.success() => {}
        Ok(o) => not_run(&format!("`{py} -m venv` failed: {}", text(&o))),
        Err(e) => not_run(&format!("cannot run `{py} -m venv`: {e}")),
    }
    match run_capture(Command::new(&python).args(["-m", "pip", "--version"])) {
        Ok(o) if o.status.success() => {}
        Ok(o) => not_run(&format!("the venv has no pip: {}", text(&o))),
        Err(e) => not_run(&format!("cannot run the venv's python: {e}")),
    }
    eprintln!(
        "python_dropin: pip install --require-hashes -r {}",
        requirements.display()
    );
    let out = run_capture(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--require-hashes",
                "--only-binary=:all:",
                "--no-input",
            ])
            .args(["--disable-pip-version-check", "-r"])
            .arg(&requirements),
    )
    .expect("run pip");
    if !out.status.success() {
        // pip ran but could not install (no network, no matching wheel, hash mismatch): a real failure.
        panic!(
            "pip install --require-hashes -r {} failed:\n{}",
            requirements.display(),
            text(&out)
        );
    }
    fs::write(&marker, &req_bytes).expect("write the venv marker");
    python
}

/// Our cdylib, as cargo built it for this test run; chosen once, so that both modes test the same file.
fn our_library() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(find_our_library).clone()
}

fn find_our_library() -> PathBuf {
    common::built_library().unwrap_or_else(|e| panic!("{e}"))
}

/// Model folders: every fixture, then the conformance model. The bool says whether the official
/// runtime has a reference for it (a fixture without `expected_ort_genai_0.18.json` could not be run
/// by the official runtime on CPU; see its NOTES.md).
fn models() -> Vec<(PathBuf, bool)> {
    let root = manifest_dir().join("..").join("..");
    let fixtures = root.join("models").join("fixtures");
    let mut out: Vec<(PathBuf, bool)> = fs::read_dir(&fixtures)
        .unwrap_or_else(|e| panic!("read {}: {e}", fixtures.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("genai_config.json").is_file())
        .map(|p| {
            let has_ref = p.join("expected_ort_genai_0.18.json").is_file();
            (p, has_ref)
        })
        .collect();
    out.sort();
    let conformance = root
        .join("..")
        .join("shared")
        .join("conformance")
        .join("tiny-random-gpt2-fp32");
    assert!(
        conformance.join("genai_config.json").is_file(),
        "conformance model missing: {}",
        conformance.display()
    );
    out.push((conformance, true));
    out
}

fn run_mode(
    mode: &str,
    backend: Option<&str>,
    tolerances: &[(&str, &str)],
    only_with_reference: bool,
) {
    let _guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let python = venv_python();
    let lib = our_library();
    let work = cache_root().join(format!("work-{mode}"));
    let report = work.join("differences.json");
    let mut cmd = Command::new(&python);
    cmd.arg(dropin_dir().join("compare.py"))
        .arg("--python")
        .arg(&python)
        .arg("--lib")
        .arg(&lib)
        .arg("--work")
        .arg(&work)
        .arg("--official-cache")
        .arg(cache_root().join("official-cache"))
        .arg("--report")
        .arg(&report)
        .arg("--known")
        .arg(dropin_dir().join("known_differences.json"))
        .arg("--mode")
        .arg(mode);
    for (prec, tol) in tolerances {
        cmd.arg("--atol-for").arg(format!("{prec}={tol}"));
    }
    // No GENAI_BRIDGE_BACKEND but the mode's own; the library logs its routes.
    cmd.env_remove("GENAI_BRIDGE_BACKEND");
    if let Some(b) = backend {
        cmd.arg("--env").arg(format!("GENAI_BRIDGE_BACKEND={b}"));
    }
    cmd.arg("--env").arg("GENAI_BRIDGE_LOG=1");
    for (dir, has_ref) in models() {
        if only_with_reference && !has_ref {
            println!(
                "python_dropin[{mode}]: leaving out {} (the official runtime cannot run it on CPU, so there is no reference)",
                dir.display()
            );
            continue;
        }
        cmd.arg(dir);
    }
    println!("python_dropin[{mode}]: {cmd:?}");
    let out = run_capture(&mut cmd).expect("run compare.py");
    let log = text(&out);
    println!("{log}");
    match out.status.code() {
        Some(0) => {}
        Some(1) => panic!(
            "python drop-in [{mode}]: our library differs from the official onnxruntime-genai 0.18.0 \
             (differences listed above; JSON in {}; results in {})",
            report.display(),
            work.display()
        ),
        other => panic!(
            "python drop-in [{mode}]: compare.py failed (exit {other:?}); see the output above"
        ),
    }
}

/// ONNX Runtime route: the same kernels as the official runtime, so the tight tolerances.
#[test]
fn dropin_matches_official_on_ort_backend() {
    run_mode("ort", Some("ort"), ORT_TOLERANCES, false);
}

/// The native decoder (GENAI_BRIDGE_BACKEND=native), batches included. How the test knows the
/// native decoder served every generation: the library's log (GENAI_BRIDGE_LOG=1, kept per model
/// in `<work>/ours/<model>.log`) names the route of every model it opens ("native decoder on
/// cpu") and every batch it hands to ONNX Runtime ("... runs on ONNX Runtime"); the first must
/// appear in every model's log, the second in none.
#[test]
fn dropin_matches_official_on_the_native_decoder() {
    run_mode("native", Some("native"), NATIVE_TOLERANCES, true);
    let logs = cache_root().join("work-native").join("ours");
    let mut checked = 0;
    for entry in fs::read_dir(&logs).unwrap_or_else(|e| panic!("read {}: {e}", logs.display())) {
        let path = entry.expect("a log").path();
        if path.extension().is_none_or(|e| e != "log") {
            continue;
        }
        let log = fs::read_to_string(&path).expect("read a log");
        assert!(
            log.contains("genai-bridge: native decoder on cpu"),
            "{}: no generation routed to the native CPU decoder",
            path.display()
        );
        let handed: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("runs on ONNX Runtime"))
            .collect();
        assert!(
            handed.is_empty(),
            "{}: batches handed to ONNX Runtime: {handed:?}",
            path.display()
        );
        checked += 1;
    }
    assert!(
        checked >= 5,
        "only {checked} model logs under {}",
        logs.display()
    );
}
