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
use std::path::PathBuf;

fn models() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = fixture_dirs()
        .into_iter()
        .filter(|d| !d.ends_with("llama-bf16-cuda"))
        .collect();
    dirs.push(conformance_dir());
    dirs
}

#[test]
fn native_cpu_matches_onnx_runtime_on_every_model() {
    let mut failures = Vec::new();
    for dir in models() {
        let config = Config::load(&dir).expect("config");
        let model = OnnxModel::load(&config.decoder_path()).expect("model");
        let plan = genai_frontend::lift(&model, &config)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let precision = genai_runtime::precision_of(&plan);
        let native =
            CpuDecoder::load(&model, &plan, &CpuOptions { threads: Some(2) }).expect("native");
        let ort = OrtDecoder::load(
            &config,
            &OrtOptions {
                device: Some(Device::Cpu),
                threads: Some(1),
            },
        )
        .expect("ort");
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
