//! Checks of the device token choice (`choose.rs`: `logits_process_f32`, the argmax and
//! `sample_f32`) against the host's definition (`genai_engine::select`, `argmax` and the
//! logits processors): flat and peaked random logits at real vocabulary sizes with ties, NaN
//! and -inf, many uniforms per case, the processed logits bit for bit, and every choice made
//! twice (bitwise repeatable).

use super::common::{Check, Ctx, Rng};
use crate::cuda::choose::{Chooser, process_ids};
use crate::cuda::kernels::Ops;
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use genai_engine::{Choice, SamplingSpec, apply_min_length, apply_repetition_penalty};

/// Vocabulary sizes of Llama 2, Qwen2.5 and Llama 3.
const VOCABS: [usize; 3] = [32_000, 151_936, 128_256];
/// Uniforms per case (0 and the largest f32 below 1 included).
const DRAWS: usize = 24;

/// (top_k, top_p, temperature, with penalty and suppression); top_k `usize::MAX`: greedy.
const CASES: [(usize, f32, f32, bool); 9] = [
    (usize::MAX, 1.0, 1.0, false),
    (usize::MAX, 1.0, 1.0, true),
    (0, 1.0, 1.0, false),
    (50, 1.0, 0.8, false),
    (0, 0.9, 0.7, false),
    (40, 0.95, 1.2, true),
    (1, 1.0, 1.0, false),
    (0, 1e-6, 1.0, false),
    (0, 0.5, 0.0, true),
];

/// Flat (every token within reach) or peaked (a few spikes) logits with planted ties, -inf and
/// NaN.
fn logits(rng: &mut Rng, vocab: usize, peaked: bool) -> Vec<f32> {
    let scale = if peaked { 3.0 } else { 12.0 };
    let mut v: Vec<f32> = rng.vec(vocab).iter().map(|x| x * scale).collect();
    if peaked {
        for i in 0..20 {
            v[(i * 7919 + 13) % vocab] = 15.0 + i as f32 * 0.25;
        }
    }
    let top = v.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    v[vocab / 3] = top + 0.5;
    v[vocab / 2] = top + 0.5;
    v[vocab - 1] = top + 0.5;
    v[7] = f32::NEG_INFINITY;
    v[11] = f32::NAN;
    v
}

/// The host's choice: processors in the generator's order, then argmax or select.
fn host_choice(logits: &mut [f32], spec: &SamplingSpec<'_>) -> usize {
    apply_min_length(logits, 0, 1, spec.suppressed);
    apply_repetition_penalty(logits, spec.penalized, spec.penalty);
    match spec.choice {
        Choice::Greedy => genai_engine::argmax(logits),
        Choice::Sample {
            top_k,
            top_p,
            temperature,
            uniform,
        } => genai_engine::select(logits, top_k, top_p, temperature, uniform, &mut Vec::new()),
    }
}

/// One choice on the device; the processed logits come back too.
fn device_choice(
    c: &Ctx,
    chooser: &mut Chooser,
    dv: &mut DevBuf<f32>,
    logits: &[f32],
    spec: &SamplingSpec<'_>,
) -> Result<(usize, Vec<f32>), Error> {
    dv.write(&c.stream, logits)?;
    let ops: Ops<'_> = c.ops();
    let (ids, penalized) = process_ids(spec);
    chooser.enqueue(
        &c.stream,
        &ops,
        (dv.span(), logits.len()),
        spec,
        (&ids, penalized),
    )?;
    c.stream.synchronize().map_err(|e| Error::Cuda {
        what: "sync",
        message: format!("{e:?}"),
    })?;
    let id = chooser.read()?;
    Ok((id as usize, c.down(dv, logits.len())?))
}

/// Equal bits, any NaN equal to any NaN (the device writes the canonical NaN).
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Every case at every vocabulary size, flat and peaked: the count of differing choices (and
/// of processed logits that differ in any bit, or repeats that differ) must be 0.
pub(super) fn checks(c: &Ctx, rng: &mut Rng) -> Result<Vec<Check>, Error> {
    let mut chooser = Chooser::new(&c.stream, 1024)?;
    let mut out = Vec::new();
    for vocab in VOCABS {
        let mut dv = DevBuf::<f32>::zeros(&c.stream, vocab)?;
        for peaked in [false, true] {
            let base = logits(rng, vocab, peaked);
            let penalized: Vec<i32> = (0..300)
                .map(|i| ((i * 104_729 + 5) % vocab) as i32)
                .collect();
            let mut penalized_top = penalized.clone();
            penalized_top.extend([(vocab / 3) as i32, 7, 11]);
            let suppressed = [(vocab / 2) as i32, (vocab - 1) as i32];
            for &(top_k, top_p, temperature, processed) in &CASES {
                let mut differ = 0usize;
                for d in 0..DRAWS {
                    let uniform = match d {
                        0 => 0.0,
                        1 => f32::from_bits(0x3f7f_ffff),
                        _ => (rng.next() + 1.0) / 2.0,
                    };
                    let choice = if top_k == usize::MAX {
                        Choice::Greedy
                    } else {
                        Choice::Sample {
                            top_k,
                            top_p,
                            temperature,
                            uniform,
                        }
                    };
                    let spec = SamplingSpec {
                        choice,
                        penalty: if processed { 1.3 } else { 1.0 },
                        penalized: if processed { &penalized_top } else { &[] },
                        suppressed: if processed { &suppressed } else { &[] },
                        no_repeat_ngram: 0,
                    };
                    let mut host = base.clone();
                    let want = host_choice(&mut host, &spec);
                    let (got, processed_logits) =
                        device_choice(c, &mut chooser, &mut dv, &base, &spec)?;
                    let (again, _) = device_choice(c, &mut chooser, &mut dv, &base, &spec)?;
                    if got != want || again != got || !same_bits(&processed_logits, &host) {
                        if differ == 0 {
                            eprintln!(
                                "sample vocab {vocab} k {top_k} p {top_p} t {temperature} u {uniform}: \
                                 cuda {got} (again {again}), cpu {want}"
                            );
                        }
                        differ += 1;
                    }
                    if matches!(choice, Choice::Greedy) && d > 1 {
                        break;
                    }
                }
                let kind = if peaked { "peaked" } else { "flat" };
                let k = if top_k == usize::MAX {
                    "greedy".to_string()
                } else {
                    format!("k{top_k} p{top_p} t{temperature}")
                };
                let pen = if processed { " +penalty" } else { "" };
                out.push(Check {
                    name: format!("choice {vocab} {kind} {k}{pen}: {differ} differ"),
                    rel_diff: differ as f32,
                    limit: 0.0,
                });
            }
        }
    }
    Ok(out)
}
