//! Every kernel family of `kernels/` compiles with NVRTC for sm_90 — no GPU needed, only the
//! NVRTC library (CI installs the pinned `nvidia-cuda-nvrtc` wheel with `.ci/nvrtc.sh` and puts
//! it on `LD_LIBRARY_PATH`). In CI (`CI` set) a missing library fails the test; elsewhere the
//! test says loudly that it did not run.
#![cfg(feature = "cuda")]

use genai_backend_native::cuda::compile::{self, SOURCES};

const ARCH: &str = "sm_90";

fn nvrtc_or_skip() -> bool {
    match compile::nvrtc_available() {
        Ok(()) => true,
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!(
                "CI must compile the CUDA kernels, but {why}: run .ci/nvrtc.sh and set LD_LIBRARY_PATH"
            )
        }
        Err(why) => {
            eprintln!("NOT RUN: kernel compilation check skipped: {why} (run .ci/nvrtc.sh)");
            false
        }
    }
}

#[test]
fn every_kernel_family_compiles_for_sm_90() {
    if !nvrtc_or_skip() {
        return;
    }
    let version = compile::nvrtc_version().expect("NVRTC version");
    assert!(version.0 >= 13, "NVRTC {version:?}: CUDA 13 expected");
    let mut failures = Vec::new();
    for source in SOURCES {
        let start = std::time::Instant::now();
        match compile::compile(source, ARCH, &[]) {
            Ok(cubin) => {
                assert!(
                    cubin.starts_with(b"\x7fELF"),
                    "{}: not an ELF cubin",
                    source.family
                );
                eprintln!(
                    "kernels/{}.cu: {} bytes of sm_90 cubin in {:.1} s",
                    source.family,
                    cubin.len(),
                    start.elapsed().as_secs_f64()
                );
            }
            Err(e) => failures.push(e.to_string()),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_compile_error_keeps_the_nvrtc_log() {
    if !nvrtc_or_skip() {
        return;
    }
    let broken = compile::Source {
        family: "broken",
        code: "extern \"C\" __global__ void broken_f32(float* x) { x[0] = undefined_name; }",
        symbols: &["broken_f32"],
    };
    let err = compile::compile(&broken, ARCH, &[]).expect_err("must not compile");
    let text = err.to_string();
    assert!(text.contains("undefined_name"), "log missing from: {text}");
}

#[test]
fn a_compiled_family_is_read_back_from_the_disk_cache() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("genai-kernel-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let source = &SOURCES[0];
    let build = compile::Build {
        defines: Vec::new(),
        cache: Some(dir.clone()),
    };
    let (first, origin) = compile::cubin(source, ARCH, &build).expect("compiles");
    assert_eq!(origin, compile::Origin::Compiled);
    let (again, origin) = compile::cubin(source, ARCH, &build).expect("cached");
    assert_eq!(origin, compile::Origin::Cache);
    assert_eq!(first, again);
    // Another architecture is another key.
    let (_, origin) = compile::cubin(source, "sm_80", &build).expect("compiles");
    assert_eq!(origin, compile::Origin::Compiled);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The decode-attention family also compiles where clusters (sm_90) or cp.async (sm_80) do not
/// exist: those GPUs take its plain-copy and global-merge paths.
#[test]
fn decode_attention_compiles_for_older_gpus() {
    if !nvrtc_or_skip() {
        return;
    }
    let source = compile::family("decode_attention").expect("the decode attention family");
    for arch in ["sm_75", "sm_80"] {
        let cubin = compile::compile(source, arch, &[]).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(cubin.starts_with(b"\x7fELF"), "{arch}: not an ELF cubin");
    }
}

/// The persistent-step timing prototype (`benches/step_proto.cu`, part of the `lab` feature)
/// compiles like the families.
#[cfg(feature = "lab")]
#[test]
fn the_step_prototype_compiles_for_sm_90() {
    if !nvrtc_or_skip() {
        return;
    }
    let source = &genai_backend_native::cuda::step_timing::STEP_PROTO;
    let cubin = compile::compile(source, ARCH, &[]).unwrap_or_else(|e| panic!("{e}"));
    assert!(cubin.starts_with(b"\x7fELF"), "not an ELF cubin");
}
