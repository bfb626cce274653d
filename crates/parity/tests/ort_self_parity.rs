//! The harness on real sessions: ONNX Runtime against itself passes with zero difference, and a
//! decoder whose logits are nudged is caught with the right measurements.

use genai_backend_ort::{Device, OrtDecoder, OrtOptions};
use genai_config::Config;
use genai_engine::{BackendInfo, DecodeBackend, Decoder, StartOptions, StepInput};
use genai_parity::{ParityOptions, Precision, Tolerance, compare};
use std::path::Path;

fn load(name: &str) -> (Config, OrtDecoder) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/fixtures")
        .join(name);
    let config = Config::load(&dir).expect("config");
    let decoder = OrtDecoder::load(
        &config,
        &OrtOptions {
            device: Some(Device::Cpu),
            threads: Some(1),
        },
    )
    .expect("session");
    (config, decoder)
}

fn options(precision: Precision) -> ParityOptions {
    ParityOptions {
        prompts: vec![vec![1, 20, 30], vec![7]],
        tokens: 24,
        tolerance: Tolerance::for_precision(precision),
    }
}

#[test]
fn a_backend_matches_itself_exactly() {
    let (config, decoder) = load("qwen2-fp32-cpu");
    let (_, again) = load("qwen2-fp32-cpu");
    let report =
        compare(&decoder, &again, &config.model, &options(Precision::Fp32)).expect("parity");
    assert!(report.pass, "{report:?}");
    assert_eq!(report.max_abs_logit_diff, 0.0);
    assert_eq!(report.top1_agreement, 1.0);
    assert_eq!(report.first_divergence, None);
    // 2 prompts × (1 prompt step + 24 generated tokens).
    assert_eq!(report.steps, 2 * 25);
}

/// Adds `delta` to one logit after `after` forward passes.
struct Nudged<'a> {
    inner: &'a OrtDecoder,
    token: usize,
    delta: f32,
    info: BackendInfo,
}

struct NudgedState {
    inner: Box<dyn DecodeBackend>,
    token: usize,
    delta: f32,
}

impl Decoder for Nudged<'_> {
    fn start(&self, options: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
        Ok(Box::new(NudgedState {
            inner: self.inner.start(options)?,
            token: self.token,
            delta: self.delta,
        }))
    }
    fn info(&self) -> &BackendInfo {
        &self.info
    }
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }
}

impl DecodeBackend for NudgedState {
    fn forward(&mut self, input: &StepInput<'_>) -> genai_engine::Result<Vec<f32>> {
        let mut logits = self.inner.forward(input)?;
        logits[self.token] += self.delta;
        Ok(logits)
    }
    fn rewind_to(&mut self, len: usize) -> genai_engine::Result<()> {
        self.inner.rewind_to(len)
    }
    fn cached_len(&self) -> usize {
        self.inner.cached_len()
    }
}

#[test]
fn a_nudged_backend_is_caught() {
    let (config, decoder) = load("qwen2-fp32-cpu");
    let info = BackendInfo {
        backend: "nudged".into(),
        device: "cpu".into(),
        reasons: vec![],
    };
    let small = Nudged {
        inner: &decoder,
        token: 3,
        delta: 1e-3,
        info: info.clone(),
    };
    let report =
        compare(&decoder, &small, &config.model, &options(Precision::Fp32)).expect("parity");
    assert!(!report.pass);
    assert!(
        (report.max_abs_logit_diff - 1e-3).abs() < 1e-5,
        "{}",
        report.max_abs_logit_diff
    );
    assert!(
        report.failures.iter().any(|f| f.contains("max abs")),
        "{:?}",
        report.failures
    );

    // A huge boost makes token 3 win every step: greedy diverges at once and top-1 collapses.
    let huge = Nudged {
        inner: &decoder,
        token: 3,
        delta: 1e4,
        info,
    };
    let report =
        compare(&decoder, &huge, &config.model, &options(Precision::Fp32)).expect("parity");
    let divergence = report.first_divergence.clone().expect("diverges");
    assert_eq!(
        (divergence.prompt, divergence.step, divergence.b_token),
        (0, 0, Some(3))
    );
    assert!(report.top1_agreement < 0.1, "{}", report.top1_agreement);
    assert!(report.kl_max > 1.0);
}
