//! Shared by the integration tests: where the library under test is, and the C functions.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub mod ffi;

use std::path::PathBuf;
use std::process::Command;

/// The file name cargo gives the cdylib on this platform.
pub fn library_file_name() -> &'static str {
    if cfg!(target_os = "macos") {
        "libonnxruntime_genai.dylib"
    } else if cfg!(windows) {
        "onnxruntime_genai.dll"
    } else {
        "libonnxruntime_genai.so"
    }
}

/// The built library: `GENAI_CAPI_LIB` if set, else the newer of `<target>/<profile>/deps/` (where
/// `cargo test` leaves it) and `<target>/<profile>/` (where `cargo build` copies it), so a stale
/// copy from an older build is never tested.
pub fn built_library() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("GENAI_CAPI_LIB") {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!("GENAI_CAPI_LIB={} is not a file", p.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // <target>/<profile>/deps/<test>-<hash>
    let deps = exe.parent().ok_or("no deps folder")?;
    let profile = deps.parent().ok_or("no profile folder")?;
    let name = library_file_name();
    [deps, profile]
        .iter()
        .map(|d| d.join(name))
        .filter_map(|p| Some((std::fs::metadata(&p).ok()?.modified().ok()?, p)))
        .max_by_key(|(t, _)| *t)
        .map(|(_, p)| p)
        .ok_or_else(|| {
            format!(
                "{name} not found in {} or {} (cargo builds it as genai-capi's cdylib; run \
                 `cargo build -p genai-capi`, or point GENAI_CAPI_LIB at it)",
                profile.display(),
                deps.display()
            )
        })
}

/// Installs the library under its official name (`libonnxruntime-genai.so`, the soname it
/// carries) in `<profile>/<folder>/`, as a user would, and compiles `tests/c/smoke.c` against
/// the generated header and that library. Returns the program.
pub fn build_c_smoke(folder: &str) -> Result<PathBuf, String> {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let built = built_library()?;
    let lib_dir = built.parent().ok_or("no library folder")?.join(folder);
    std::fs::create_dir_all(&lib_dir).map_err(|e| e.to_string())?;
    let installed =
        lib_dir.join(library_file_name().replace("onnxruntime_genai", "onnxruntime-genai"));
    std::fs::copy(&built, &installed).map_err(|e| e.to_string())?;
    let out = lib_dir.join("smoke");
    let status = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-std=c11", "-Wall", "-Werror", "-g", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("tests/c/smoke.c"))
        .arg("-o")
        .arg(&out)
        .arg(format!("-L{}", lib_dir.display()))
        .arg("-lonnxruntime-genai")
        .arg(format!("-Wl,-rpath,{}", lib_dir.display()))
        .status()
        .map_err(|e| format!("running the C compiler (set CC, or install cc): {e}"))?;
    if !status.success() {
        return Err("the C program did not compile".into());
    }
    Ok(out)
}
