//! The CUDA kernels against the CPU kernels, one check per kernel and variant (see
//! `genai_backend_native::cuda::selftest`). Needs a GPU: with none (as in CI) it prints a loud
//! NOT RUN line.
#![cfg(feature = "cuda")]

use genai_backend_native::cuda::{probe, selftest};

#[test]
fn cuda_kernels_match_the_cpu_kernels() {
    if let Err(why) = probe() {
        eprintln!("NOT RUN: cuda_kernels_match_the_cpu_kernels: no usable CUDA device: {why}");
        return;
    }
    // The kernels under this process's tuning variables (the GPU scripts run the checks
    // under each switch), with its kernel cache.
    let tuning = genai_backend_native::NativeTuning::from_lookup(&|name| std::env::var(name).ok())
        .expect("the tuning variables");
    let checks = selftest::run(0, &tuning.cuda).expect("the checks run");
    let mut failed = Vec::new();
    for c in &checks {
        println!(
            "{:<48} rel diff {:.3e} (limit {:.0e}) {}",
            c.name,
            c.rel_diff,
            c.limit,
            if c.pass() { "ok" } else { "FAIL" }
        );
        if !c.pass() {
            failed.push(c.name.clone());
        }
    }
    assert!(failed.is_empty(), "failed: {failed:?}");
}

/// With no driver or no GPU (as in CI), probing and loading are errors with a reason, never a
/// panic; with a GPU, loading a fixture works.
#[test]
fn a_missing_gpu_is_an_error_not_a_panic() {
    use genai_backend_native::{CudaDecoder, CudaOptions};
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/fixtures/qwen2-fp32-cpu");
    let config = genai_config::Config::load(&dir).expect("fixture config");
    let model = genai_onnx::OnnxModel::load(&config.decoder_path()).expect("fixture model");
    let plan = genai_frontend::lift(&model, &config).expect("the fixture lifts");
    let loaded = CudaDecoder::load(&model, &plan, &CudaOptions::default());
    match probe() {
        Ok(device) => assert!(loaded.is_ok(), "{device}: {:?}", loaded.err()),
        Err(why) => {
            assert!(!why.is_empty());
            let err = loaded.err().expect("no device: loading must fail");
            assert_eq!(err.to_string(), why);
        }
    }
}

/// Every fixture's plan fits the CUDA kernels; plans past their limits are refused with the
/// reason (the router then falls back), before any device work.
#[test]
fn plans_past_the_kernel_limits_are_refused_with_a_reason() {
    use genai_backend_native::cuda::check_plan;
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/fixtures");
    let mut plans = Vec::new();
    for entry in std::fs::read_dir(&root).expect("fixtures") {
        let dir = entry.expect("fixture").path();
        if !dir.join("genai_config.json").is_file() {
            continue;
        }
        let config = genai_config::Config::load(&dir).expect("config");
        let model = genai_onnx::OnnxModel::load(&config.decoder_path()).expect("model");
        let plan = genai_frontend::lift(&model, &config).expect("the fixture lifts");
        assert_eq!(check_plan(&plan), Ok(()), "{}", dir.display());
        plans.push(plan);
    }
    let mut wide = plans[0].clone();
    wide.layers[0].attention.head_size = 512;
    assert!(check_plan(&wide).is_err_and(|why| why.contains("head size 512")));
    let mut big = plans[0].clone();
    big.dims.hidden = 12_288;
    assert!(check_plan(&big).is_err_and(|why| why.contains("hidden size 12288")));
    let mut odd = plans[0].clone();
    odd.layers[0].attention.kv_heads = 3;
    odd.layers[0].attention.heads = 4;
    assert!(check_plan(&odd).is_err_and(|why| why.contains("do not divide")));
}
