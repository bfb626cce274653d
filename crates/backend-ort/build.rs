//! Build script: makes sure a fresh clone has the pinned ONNX Runtime library.
//!
//! It downloads the official `onnxruntime==1.31.1` wheel from the Python package index with
//! `python3 -m pip download`, checks its sha256, and unpacks the shared library into a cache under
//! the cargo target directory (`<target>/onnxruntime/1.31.1/`). The cache path is compiled into the
//! crate (`GENAI_BRIDGE_ORT_CACHE`) as one of the places the runtime looks. Nothing is linked: the
//! library is loaded at run time. A failed download is a warning, never a build failure; set
//! `GENAI_BRIDGE_NO_ORT_DOWNLOAD=1` to skip it.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;

const VERSION: &str = "1.31.1";

/// One pinned wheel per platform we can fetch for.
struct Pinned {
    target: &'static str,
    pip_platform: &'static str,
    wheel: &'static str,
    sha256: &'static str,
    library_in_wheel: &'static str,
}

const PINNED: &[Pinned] = &[Pinned {
    target: "x86_64-unknown-linux-gnu",
    pip_platform: "manylinux_2_28_x86_64",
    wheel: "onnxruntime-1.31.1-cp312-cp312-manylinux_2_28_x86_64.whl",
    sha256: "1f3dea47f2f0e5117c2404cea7d21fd253ae7836a3bf167a501cdfbb2600d536",
    library_in_wheel: "onnxruntime/capi/libonnxruntime.so.1.31.1",
}];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=GENAI_BRIDGE_NO_ORT_DOWNLOAD");
    let cache = cache_dir();
    println!("cargo:rustc-env=GENAI_BRIDGE_ORT_CACHE={}", cache.display());
    if std::env::var_os("GENAI_BRIDGE_NO_ORT_DOWNLOAD").is_some() {
        return;
    }
    let target = std::env::var("TARGET").unwrap_or_default();
    let Some(pinned) = PINNED.iter().find(|p| p.target == target) else {
        println!(
            "cargo:warning=no pinned ONNX Runtime wheel for {target}; set ORT_DYLIB_PATH to an ONNX Runtime {VERSION} library"
        );
        return;
    };
    let library = cache.join(file_name(pinned.library_in_wheel));
    if library.is_file() {
        return;
    }
    if let Err(message) = fetch(pinned, &cache, &library) {
        println!(
            "cargo:warning=could not fetch ONNX Runtime {VERSION}: {message}; the ONNX Runtime backend will look for it at run time (ORT_DYLIB_PATH, beside the executable, Python site-packages)"
        );
    }
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `<target dir>/onnxruntime/<version>`, found from OUT_DIR (`<target>/<profile>/build/<pkg>/out`).
fn cache_dir() -> PathBuf {
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default());
    let profile_dir = out
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(Path::parent);
    let target_dir = profile_dir.and_then(Path::parent).unwrap_or(&out);
    target_dir.join("onnxruntime").join(VERSION)
}

fn fetch(pinned: &Pinned, cache: &Path, library: &Path) -> Result<(), String> {
    let staging = cache.with_extension(format!("partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging)
        .map_err(|e| format!("creating {}: {e}", staging.display()))?;
    let result = download_and_unpack(pinned, &staging, library);
    let _ = std::fs::remove_dir_all(&staging);
    result
}

fn download_and_unpack(pinned: &Pinned, staging: &Path, library: &Path) -> Result<(), String> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let status = Command::new(&python)
        .args([
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
        ])
        .args([
            "--python-version",
            "3.12",
            "--implementation",
            "cp",
            "--platform",
            pinned.pip_platform,
        ])
        .arg("--dest")
        .arg(staging)
        .arg(format!("onnxruntime=={VERSION}"))
        .status()
        .map_err(|e| format!("running {python} -m pip: {e}"))?;
    if !status.success() {
        return Err(format!("{python} -m pip download failed ({status})"));
    }
    let wheel = staging.join(pinned.wheel);
    let bytes = std::fs::read(&wheel).map_err(|e| format!("reading {}: {e}", wheel.display()))?;
    let digest: String = Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if digest != pinned.sha256 {
        return Err(format!(
            "{} has sha256 {digest}, expected {}",
            pinned.wheel, pinned.sha256
        ));
    }
    // A wheel is a zip archive; Python's zipfile module unpacks the one member we need.
    let script = "import sys, zipfile\nwith zipfile.ZipFile(sys.argv[1]) as z:\n    \
                  data = z.read(sys.argv[2])\nopen(sys.argv[3], 'wb').write(data)\n";
    let unpacked = staging.join(file_name(pinned.library_in_wheel));
    let status = Command::new(&python)
        .args(["-c", script])
        .arg(&wheel)
        .arg(pinned.library_in_wheel)
        .arg(&unpacked)
        .status()
        .map_err(|e| format!("unpacking the wheel: {e}"))?;
    if !status.success() {
        return Err(format!(
            "unpacking {} from the wheel failed",
            pinned.library_in_wheel
        ));
    }
    let cache = library.parent().ok_or("cache path has no parent")?;
    std::fs::create_dir_all(cache).map_err(|e| format!("creating {}: {e}", cache.display()))?;
    // Rename is atomic, so a concurrent build never sees a half-written library.
    std::fs::rename(&unpacked, library)
        .map_err(|e| format!("moving the library into {}: {e}", cache.display()))
}
