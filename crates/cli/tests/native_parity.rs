//! The native CPU decoder against ONNX Runtime on every fixture and the conformance model,
//! through the parity harness: greedy tokens identical for 64 tokens, logits within the
//! tolerance of the weights' precision (fp32: 1e-4).

mod common;

use common::*;
use genai_backend_native::{CpuDecoder, CpuOptions};
use genai_backend_ort::{Device, OrtDecoder, OrtOptions};
use genai_config::Config;
use genai_onnx::OnnxModel;
use genai_parity::{ParityOptions, Tolerance, compare};

/// The native CPU decoder and ONNX Runtime's CPU provider on one model.
fn native_and_ort_cpu(
    config: &Config,
    model: &OnnxModel,
    plan: &genai_frontend::DecoderPlan,
) -> (CpuDecoder, OrtDecoder) {
    let native = CpuDecoder::load(
        model,
        plan,
        &CpuOptions {
            threads: Some(2),
            ..CpuOptions::default()
        },
    )
    .expect("native");
    let ort = OrtDecoder::load(
        config,
        &OrtOptions {
            device: Some(Device::Cpu),
            threads: Some(1),
        },
    )
    .expect("ort");
    (native, ort)
}

#[test]
fn native_cpu_matches_onnx_runtime_on_every_model() {
    let mut failures = Vec::new();
    for dir in native_cpu_models() {
        let config = Config::load(&dir).expect("config");
        let model = OnnxModel::load(&config.decoder_path()).expect("model");
        let plan = genai_frontend::lift(&model, &config)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let precision = genai_runtime::precision_of(&plan);
        let (native, ort) = native_and_ort_cpu(&config, &model, &plan);
        let vocab = config.model.vocab_size.min(512) as i32;
        let options = ParityOptions {
            prompts: vec![vec![1, 17 % vocab, 42 % vocab, 99 % vocab, 7], vec![5]],
            tokens: 64,
            tolerance: Tolerance::for_precision(precision),
        };
        let report = compare(&ort, &native, &config.model, &options).expect("parity");
        eprintln!(
            "{}: {:?} pass={} max_abs={:e} top1={:.4} kl_max={:e} divergence={:?}",
            dir.file_name().unwrap_or_default().to_string_lossy(),
            precision,
            report.pass,
            report.max_abs_logit_diff,
            report.top1_agreement,
            report.kl_max,
            report.first_divergence
        );
        if !report.pass {
            failures.push(format!("{}: {:?}", dir.display(), report.failures));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// On a half-precision model the native decoder rounds where ONNX Runtime does, the rotated q
/// and k included (the graph's attention rotates half-precision values into a half-precision
/// cache). Without that rounding this fp16 fixture's logits sit 4.7e-2 from ONNX Runtime's on
/// these prompts and the greedy tokens part at step 60 (docs/cuda.md, round 28); with it, 8.8e-3.
/// The harness's fp16 limit (5e-2) alone would not notice the rounding go missing.
#[test]
fn half_precision_rounds_where_onnx_runtime_does() {
    let dir = fixture_dirs()
        .into_iter()
        .find(|d| d.ends_with("llama-fp16-cuda"))
        .expect("the llama-fp16-cuda fixture");
    let config = Config::load(&dir).expect("config");
    let model = OnnxModel::load(&config.decoder_path()).expect("model");
    let plan = genai_frontend::lift(&model, &config).expect("the fixture lifts");
    let (native, ort) = native_and_ort_cpu(&config, &model, &plan);
    let vocab = config.model.vocab_size as i32;
    let options = ParityOptions {
        prompts: vec![
            (0..40).map(|i| (i * 104_729 + 13) % vocab).collect(),
            vec![1, 17, 42, 99, 7],
        ],
        tokens: 64,
        tolerance: Tolerance::for_precision(genai_parity::Precision::Fp16),
    };
    let report = compare(&ort, &native, &config.model, &options).expect("parity");
    eprintln!(
        "llama-fp16-cuda: max_abs={:e} kl_max={:e} top1={:.4}",
        report.max_abs_logit_diff, report.kl_max, report.top1_agreement
    );
    assert!(report.pass, "{:?}", report.failures);
    assert!(
        report.max_abs_logit_diff <= 2e-2,
        "max |Δlogit| {:e} against ONNX Runtime: a rounding point is missing",
        report.max_abs_logit_diff
    );
}
