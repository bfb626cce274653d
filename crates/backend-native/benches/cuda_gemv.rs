//! The one-row GEMVs alone on a GPU, per layer shape, kernel and split (see
//! `genai_backend_native::cuda::gemv_timing`): one JSON line per run on stdout.
//!
//! `cargo bench -p genai-backend-native --features cuda --bench cuda_gemv -- [MODEL,...]
//! [--weights fp16|int4|int4-sym|int4-s16|int4-sym-s16] [--splits rule,1,2,4] [--reps N]
//! [--copies N]`.
//! Models: qwen2.5-0.5b, qwen2.5-1.5b, llama3-8b (default: all three), or grid (plain n × k
//! layers for fitting split rules). fp16: each numbered split runs with `gemv_decode_*` and with
//! the pipelined `gemv_decode_pipe_*`, and `rule` is the decode rule's choice; int4 (with zero
//! points) and int4-sym (without), `-s16` with f16 scales: the rule's kernel and split only.
//! Kernel variants come from `GENAI_BRIDGE_NVRTC_DEFINES`, which each line records. By default
//! the launches cycle through enough copies of the weights to defeat the L2; `--copies 1` times
//! them with their weights in the L2 (each line records its copies).

use genai_backend_native::NativeTuning;
use genai_backend_native::cuda::gemv_timing::{BenchWeights, GemvCase, model_cases, time_gemvs};
use std::process::ExitCode;

const MODELS: [&str; 3] = ["qwen2.5-0.5b", "qwen2.5-1.5b", "llama3-8b"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut models: Vec<String> = Vec::new();
    let mut splits = vec![None];
    let mut reps = 20;
    let mut weights = BenchWeights::Fp16;
    let mut copies = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--splits" => {
                let Some(list) = it.next() else {
                    eprintln!("--splits needs a list such as rule,1,2,4");
                    return ExitCode::FAILURE;
                };
                let parsed: Result<Vec<Option<usize>>, _> = list
                    .split(',')
                    .map(|s| {
                        if s == "rule" {
                            Ok(None)
                        } else {
                            s.parse().map(Some)
                        }
                    })
                    .collect();
                match parsed {
                    Ok(p) => splits = p,
                    Err(e) => {
                        eprintln!("--splits {list}: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            "--weights" => match it.next().map(String::as_str).and_then(BenchWeights::parse) {
                Some(w) => weights = w,
                None => {
                    eprintln!("--weights takes fp16, int4, int4-sym, int4-s16 or int4-sym-s16");
                    return ExitCode::FAILURE;
                }
            },
            "--copies" => match it.next().and_then(|c| c.parse().ok()) {
                Some(c) if c > 0 => copies = Some(c),
                _ => {
                    eprintln!("--copies needs a count of 1 or more");
                    return ExitCode::FAILURE;
                }
            },
            "--reps" => match it.next().and_then(|r| r.parse().ok()) {
                Some(r) => reps = r,
                None => {
                    eprintln!("--reps needs a count");
                    return ExitCode::FAILURE;
                }
            },
            other => models.extend(other.split(',').map(String::from)),
        }
    }
    if models.is_empty() {
        models = MODELS.iter().map(|m| m.to_string()).collect();
    }
    let mut cases: Vec<GemvCase> = Vec::new();
    for m in &models {
        match model_cases(m) {
            Some(c) => cases.extend(c),
            None => {
                eprintln!(
                    "unknown model shape {m} (known: {}, grid)",
                    MODELS.join(", ")
                );
                return ExitCode::FAILURE;
            }
        }
    }
    if let Err(why) = genai_backend_native::cuda::probe() {
        eprintln!("NOT RUN: cuda_gemv: no usable CUDA device: {why}");
        return ExitCode::FAILURE;
    }
    // A lab tool: the tuning comes from this process's environment (the library reads none).
    let tuning = match NativeTuning::from_lookup(&|name| std::env::var(name).ok()) {
        Ok(t) => t.cuda,
        Err(e) => {
            eprintln!("cuda_gemv: {e}");
            return ExitCode::FAILURE;
        }
    };
    let defines = tuning
        .nvrtc_defines
        .iter()
        .map(|d| format!("{}={}", d.name, d.value))
        .collect::<Vec<_>>()
        .join(",");
    match time_gemvs(0, &cases, weights, (&splits, reps, copies), &tuning) {
        Ok(timings) => {
            for t in timings {
                println!(
                    "{{\"case\":\"{}\",\"n\":{},\"k\":{},\"glu\":{},\"weights\":\"{}\",\"defines\":\"{}\",\"kernel\":\"{}\",\"split\":{},\"rule\":{},\"blocks\":{},\"copies\":{},\"launches\":{},\"us_median\":{:.3},\"us_min\":{:.3},\"weight_gbs\":{:.1}}}",
                    t.case.name,
                    t.case.n,
                    t.case.k,
                    t.case.glu,
                    t.weights.name(),
                    defines.replace(['"', '\\'], ""),
                    t.kernel,
                    t.split,
                    t.rule,
                    t.blocks,
                    t.copies,
                    t.launches,
                    t.us_median,
                    t.us_min,
                    t.weight_gbs
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("cuda_gemv failed: {e}");
            ExitCode::FAILURE
        }
    }
}
