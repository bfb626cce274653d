//! The parity harness: compares two decoders on the same model — teacher-forced per-step logits
//! over one token stream, and free-running greedy generation — against tolerances set by the
//! weights' precision. Used by `genai-bridge parity`, by `--verify` at load, and by tests.

mod metrics;
mod tolerance;

pub use metrics::{StepMetrics, compare_logits};
pub use tolerance::{Precision, Tolerance};

use genai_config::Model;
use genai_engine::{DecodeBackend, Decoder, Generator, StartOptions, StepInput};
use serde::Serialize;

/// What to compare.
#[derive(Debug, Clone)]
pub struct ParityOptions {
    /// Prompts as token ids.
    pub prompts: Vec<Vec<i32>>,
    /// Tokens to generate after each prompt.
    pub tokens: usize,
    pub tolerance: Tolerance,
}

/// Where two free-running greedy generations first differ.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Divergence {
    pub prompt: usize,
    /// Index into the generated tokens (0 = the first generated token).
    pub step: usize,
    pub a_token: Option<i32>,
    pub b_token: Option<i32>,
}

/// The comparison's result; `pass` is the verdict against the tolerance.
#[derive(Debug, Clone, Serialize)]
pub struct ParityReport {
    pub pass: bool,
    pub precision: Precision,
    pub tolerance: Tolerance,
    pub steps: usize,
    pub max_abs_logit_diff: f32,
    pub max_rel_logit_diff: f32,
    /// The share of steps that agree: identical picks, exact ties of the reference, and for half
    /// precisions picks within one rounding step of the reference's top logit
    /// ([`Precision::rounding_step`]). This is the figure the tolerance checks.
    pub top1_agreement: f64,
    /// The same with identical picks and exact ties only.
    pub top1_strict_agreement: f64,
    /// Steps whose top-1 tokens differ beyond the reference's rounding (counted against), and
    /// the largest reference margin among every step whose picks differ
    /// ([`StepMetrics::top1_margin`]; 0 with none).
    pub top1_disagreements: usize,
    pub top1_max_margin: f32,
    /// Steps where b picked another token that the reference's logits tie exactly with its own
    /// pick: counted as agreeing ([`StepMetrics::top1_equal`]).
    pub top1_exact_ties: usize,
    /// Steps where b's pick is within one rounding step of the reference's pick in the
    /// reference's own logits ([`Precision::rounding_step`]): counted as agreeing.
    pub top1_rounding_ties: usize,
    pub top5_overlap: f64,
    pub kl_max: f64,
    pub kl_mean: f64,
    /// First divergence of the free-running greedy comparison; `None` when identical.
    pub first_divergence: Option<Divergence>,
    /// Why the verdict is a failure (empty on pass).
    pub failures: Vec<String>,
}

/// Parity failed to run (not: parity ran and failed).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Engine(#[from] genai_engine::Error),
    #[error("{0}")]
    Input(String),
}

/// Compares decoder `b` against decoder `a` (the reference).
pub fn compare(
    a: &dyn Decoder,
    b: &dyn Decoder,
    model: &Model,
    options: &ParityOptions,
) -> Result<ParityReport, Error> {
    if a.vocab_size() != b.vocab_size() {
        return Err(Error::Input(format!(
            "vocabularies differ: {} vs {}",
            a.vocab_size(),
            b.vocab_size()
        )));
    }
    if options.prompts.is_empty() || options.prompts.iter().any(Vec::is_empty) {
        return Err(Error::Input(
            "parity needs at least one non-empty prompt".into(),
        ));
    }
    let mut steps = Vec::new();
    let mut first_divergence = None;
    for (index, prompt) in options.prompts.iter().enumerate() {
        let max_length = (prompt.len() + options.tokens).min(model.context_length);
        let stream_a = greedy(a, model, prompt, max_length)?;
        let stream_b = greedy(b, model, prompt, max_length)?;
        if first_divergence.is_none() {
            first_divergence =
                divergence(index, &stream_a[prompt.len()..], &stream_b[prompt.len()..]);
        }
        steps.extend(teacher_forced(
            a,
            b,
            prompt,
            &stream_a[prompt.len()..],
            max_length,
        )?);
    }
    Ok(summarize(&steps, first_divergence, options.tolerance))
}

/// Greedy generation; the returned ids include the prompt and any final EOS.
fn greedy(
    decoder: &dyn Decoder,
    model: &Model,
    prompt: &[i32],
    max_length: usize,
) -> Result<Vec<i32>, Error> {
    let mut search = genai_config::Search {
        max_length,
        ..Default::default()
    };
    search.past_present_share_buffer = true;
    let mut generator = Generator::new(decoder, model, &search)?;
    generator.append_tokens(prompt)?;
    while !generator.is_done() {
        generator.generate_next_token()?;
    }
    let mut ids = generator.sequence(0).unwrap_or_default().to_vec();
    if generator.finished_by_eos() {
        ids.extend_from_slice(generator.next_tokens());
    }
    Ok(ids)
}

fn divergence(prompt: usize, a: &[i32], b: &[i32]) -> Option<Divergence> {
    let step = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i))?;
    Some(Divergence {
        prompt,
        step,
        a_token: a.get(step).copied(),
        b_token: b.get(step).copied(),
    })
}

/// Feeds the prompt and then `forced` one token at a time through both decoders, comparing the
/// logits after every forward pass.
fn teacher_forced(
    a: &dyn Decoder,
    b: &dyn Decoder,
    prompt: &[i32],
    forced: &[i32],
    max_length: usize,
) -> Result<Vec<StepMetrics>, Error> {
    let options = StartOptions {
        batch: 1,
        max_length,
        past_present_share_buffer: true,
    };
    let mut state_a = a.start(&options)?;
    let mut state_b = b.start(&options)?;
    let mut metrics = Vec::new();
    let mut fed = prompt.to_vec();
    let mut new = prompt.len();
    // The last forced token is only ever sampled, never fed (it may be an EOS at max_length).
    for next in forced.iter().map(Some).chain([None]) {
        if fed.len() > max_length {
            break;
        }
        let la = step(state_a.as_mut(), &fed, new)?;
        let lb = step(state_b.as_mut(), &fed, new)?;
        metrics.push(compare_logits(&la, &lb));
        let Some(&token) = next else { break };
        if fed.len() == max_length {
            break;
        }
        fed.push(token);
        new = 1;
    }
    Ok(metrics)
}

fn step(state: &mut dyn DecodeBackend, fed: &[i32], new: usize) -> Result<Vec<f32>, Error> {
    let mask = vec![1i64; fed.len()];
    let input = StepInput {
        tokens: &fed[fed.len() - new..],
        new_len: new,
        attention_mask: &mask,
        total_len: fed.len(),
    };
    Ok(state.forward(&input)?)
}

fn summarize(
    steps: &[StepMetrics],
    first_divergence: Option<Divergence>,
    tolerance: Tolerance,
) -> ParityReport {
    let n = steps.len().max(1) as f64;
    let max_abs = steps.iter().map(|s| s.max_abs).fold(0.0, f32::max);
    let max_rel = steps.iter().map(|s| s.max_rel).fold(0.0, f32::max);
    let within_rounding = |s: &StepMetrics| {
        !s.top1_equal
            && tolerance
                .precision
                .rounding_step(s.top1_value)
                .is_some_and(|step| s.top1_margin <= step)
    };
    let equal = steps.iter().filter(|s| s.top1_equal).count();
    let rounding_ties = steps.iter().filter(|s| within_rounding(s)).count();
    let top1 = (equal + rounding_ties) as f64 / n;
    let disagreements = steps.len() - equal - rounding_ties;
    let max_margin = steps.iter().map(|s| s.top1_margin).fold(0.0, f32::max);
    let ties = steps.iter().filter(|s| s.top1_tie).count();
    let top5 = steps.iter().map(|s| s.top5_overlap).sum::<f64>() / n;
    let kl_max = steps.iter().map(|s| s.kl).fold(0.0, f64::max);
    let kl_mean = steps.iter().map(|s| s.kl).sum::<f64>() / n;
    let failures = tolerance.check(max_abs, top1, kl_max, first_divergence.is_some());
    ParityReport {
        pass: failures.is_empty(),
        precision: tolerance.precision,
        tolerance,
        steps: steps.len(),
        max_abs_logit_diff: max_abs,
        max_rel_logit_diff: max_rel,
        top1_agreement: top1,
        top1_strict_agreement: equal as f64 / n,
        top1_disagreements: disagreements,
        top1_max_margin: max_margin,
        top1_exact_ties: ties,
        top1_rounding_ties: rounding_ties,
        top5_overlap: top5,
        kl_max,
        kl_mean,
        first_divergence,
        failures,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_ties_agree_and_are_counted_apart_from_disagreements() {
        let steps = [
            compare_logits(&[0.0, 2.0, 1.0], &[0.0, 2.0, 1.0]),
            // An exact tie of the reference flipped.
            compare_logits(&[0.0, 2.0, 2.0], &[0.0, 1.9, 2.1]),
            // A near-tie flipped: a disagreement with margin 0.5.
            compare_logits(&[0.0, 2.0, 1.5], &[0.0, 1.9, 2.1]),
        ];
        let r = summarize(&steps, None, Tolerance::for_precision(Precision::Fp16));
        assert_eq!((r.top1_disagreements, r.top1_exact_ties), (1, 1));
        assert!((r.top1_agreement - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(r.top1_max_margin, 0.5);
        assert_eq!(r.top1_rounding_ties, 0);
        assert!(!r.pass);
    }

    #[test]
    fn half_precision_flips_within_one_rounding_step_agree_and_wider_ones_do_not() {
        // bf16 logits in [4, 8): one rounding step is 2^-5.
        let step = 0.03125f32;
        let steps = [
            compare_logits(&[0.0, 4.0 + step, 4.0], &[0.0, 4.0, 4.0 + step]),
            compare_logits(&[0.0, 4.0 + 2.0 * step, 4.0], &[0.0, 4.0, 4.0 + step]),
            compare_logits(&[0.0, 4.0, 1.0], &[0.0, 4.0, 1.0]),
            compare_logits(&[0.0, 4.0, 4.0], &[0.0, 3.9, 4.1]),
        ];
        let r = summarize(&steps, None, Tolerance::for_precision(Precision::Bf16));
        assert_eq!(
            (
                r.top1_rounding_ties,
                r.top1_exact_ties,
                r.top1_disagreements
            ),
            (1, 1, 1)
        );
        assert!((r.top1_agreement - 0.75).abs() < 1e-12);
        assert!((r.top1_strict_agreement - 0.5).abs() < 1e-12);
        assert_eq!(r.top1_max_margin, 2.0 * step);
        // fp16's step at 4 is 2^-8, so the one-bf16-step flip is a disagreement there; fp32
        // and int4 take only exact ties.
        for p in [Precision::Fp16, Precision::Fp32, Precision::Int4] {
            let r = summarize(&steps, None, Tolerance::for_precision(p));
            assert_eq!(
                (r.top1_rounding_ties, r.top1_disagreements),
                (0, 2),
                "{p:?}"
            );
        }
    }
}
