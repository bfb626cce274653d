//! A prototype decode step's layers as one persistent launch (grid barriers, or a weight stream
//! ahead of the chain) against one launch per phase, on a GPU (see
//! `genai_backend_native::cuda::step_timing`): one JSON line per variant on stdout, each as soon
//! as it is measured.
//!
//! `cargo bench -p genai-backend-native --features cuda --bench cuda_step -- [MODEL,...]
//! [--reps N] [--variants NAME,...]`. Models: qwen2.5-0.5b, qwen2.5-1.5b, llama3-8b (default:
//! all three), each at its real layer count with fp16 weights (8B: 14 GB of device memory); or
//! tiny (64-wide rows: the phase boundaries alone). Variants: all by default; the first one run
//! is the reference for `same_bits`. A traced variant also prints a line per phase of the layer
//! (`"trace":true`): where the layer's time went.

use genai_backend_native::NativeTuning;
use genai_backend_native::cuda::step_timing::{StepTiming, TraceRow, time_steps};
use std::process::ExitCode;

const MODELS: [&str; 3] = ["qwen2.5-0.5b", "qwen2.5-1.5b", "llama3-8b"];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut models: Vec<String> = Vec::new();
    let mut variants: Vec<String> = Vec::new();
    let mut reps = 20;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--reps" => match it.next().and_then(|r| r.parse().ok()) {
                Some(r) => reps = r,
                None => {
                    eprintln!("--reps needs a count");
                    return ExitCode::FAILURE;
                }
            },
            "--variants" => match it.next() {
                Some(v) => variants.extend(v.split(',').map(String::from)),
                None => {
                    eprintln!("--variants needs names");
                    return ExitCode::FAILURE;
                }
            },
            other => models.extend(other.split(',').map(String::from)),
        }
    }
    if models.is_empty() {
        models = MODELS.iter().map(|m| m.to_string()).collect();
    }
    if let Err(why) = genai_backend_native::cuda::probe() {
        eprintln!("NOT RUN: cuda_step: no usable CUDA device: {why}");
        return ExitCode::FAILURE;
    }
    let mut print = |t: &StepTiming| {
        println!(
            "{{\"model\":\"{}\",\"variant\":\"{}\",\"blocks\":{},\"layers\":{},\"us_per_layer_median\":{:.3},\"us_per_layer_min\":{:.3},\"weight_gbs\":{:.1},\"same_bits\":{},\"error\":{}}}",
            t.model,
            t.variant,
            t.blocks,
            t.layers,
            t.us_per_layer_median,
            t.us_per_layer_min,
            t.weight_gbs,
            t.same_bits,
            t.error.as_ref().map_or("null".into(), |e| format!(
                "\"{}\"",
                e.replace(['"', '\\', '\n'], " ")
            ))
        );
        if let Some(trace) = &t.trace {
            for row in &trace.rows {
                println!("{}", trace_line(t, trace.layer_us, row));
            }
        }
    };
    // A lab tool: the prototype's knobs come from this process's GENAI_BRIDGE_NVRTC_DEFINES.
    let defines = match NativeTuning::from_lookup(&|name| std::env::var(name).ok()) {
        Ok(t) => t.cuda.nvrtc_defines,
        Err(e) => {
            eprintln!("cuda_step: {e}");
            return ExitCode::FAILURE;
        }
    };
    match time_steps(0, &models, &variants, reps, &defines, &mut print) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cuda_step failed: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One phase's row of a traced variant as a JSON line (µs; null where it does not apply).
fn trace_line(t: &StepTiming, layer_us: f64, r: &TraceRow) -> String {
    let us = |v: f64| {
        if v.is_finite() {
            format!("{v:.3}")
        } else {
            "null".into()
        }
    };
    format!(
        "{{\"trace\":true,\"model\":\"{}\",\"variant\":\"{}\",\"layer_us\":{},\"position\":{},\"gemv\":{},\"await_us\":{},\"stage_us\":{},\"work_us\":{},\"publish_us\":{},\"lead_us\":{},\"producer_span_us\":{},\"producer_wait_us\":{},\"full_wait_us\":{},\"spread_us\":{},\"handoff_us\":{}}}",
        t.model,
        t.variant,
        us(layer_us),
        r.position,
        r.gemv,
        us(r.await_us),
        us(r.stage_us),
        us(r.work_us),
        us(r.publish_us),
        us(r.lead_us),
        us(r.producer_span_us),
        us(r.producer_wait_us),
        us(r.full_wait_us),
        us(r.spread_us),
        us(r.handoff_us),
    )
}
