//! `--verify`: a short teacher-forced parity check of a native decoder (CPU or CUDA) against
//! ONNX Runtime at load, so `auto` never keeps a native decoder that disagrees with the reference.

use crate::precision::precision_of;
use genai_backend_ort::{OrtDecoder, OrtOptions};
use genai_config::Config;
use genai_engine::{Decoder, RouteFacts};
use genai_frontend::DecoderPlan;
use genai_parity::{ParityOptions, Tolerance, compare};

/// What the check found.
pub(crate) enum Outcome {
    Passed(String),
    Skipped(String),
    /// Out of tolerance: use this ONNX Runtime decoder instead.
    Failed(String, Box<dyn Decoder>),
}

/// Tokens generated per prompt by the check.
const VERIFY_TOKENS: usize = 8;

pub(crate) fn against_ort(
    config: &Config,
    native: &dyn Decoder,
    plan: &DecoderPlan,
    facts: &RouteFacts,
    ort_options: &OrtOptions,
) -> Outcome {
    if !matches!(facts.ort, Some(Ok(_))) {
        return Outcome::Skipped(
            "verify skipped: ONNX Runtime is not available as a reference".into(),
        );
    }
    let ort = match OrtDecoder::load(config, ort_options) {
        Ok(ort) => ort,
        Err(e) => {
            return Outcome::Skipped(format!(
                "verify skipped: ONNX Runtime could not load the model: {e}"
            ));
        }
    };
    let vocab = native.vocab_size().min(config.model.vocab_size).max(2) as i32;
    // A fixed prompt spread over the vocabulary.
    let prompt: Vec<i32> = (1..=6).map(|i| (i * 7919) % vocab).collect();
    let tolerance = Tolerance::for_precision(precision_of(plan));
    let options = ParityOptions {
        prompts: vec![prompt],
        tokens: VERIFY_TOKENS,
        tolerance,
    };
    match compare(&ort, native, &config.model, &options) {
        Ok(report) if report.pass => Outcome::Passed(format!(
            "verify: native matches ONNX Runtime over {} steps (max abs logit diff {:.2e}, tolerance {:.0e})",
            report.steps, report.max_abs_logit_diff, tolerance.max_abs_logit_diff
        )),
        Ok(report) => Outcome::Failed(
            format!(
                "verify: native out of tolerance ({}); falling back to ONNX Runtime",
                report.failures.join("; ")
            ),
            Box::new(ort),
        ),
        Err(e) => Outcome::Failed(
            format!("verify: the check failed to run ({e}); falling back to ONNX Runtime"),
            Box::new(ort),
        ),
    }
}
