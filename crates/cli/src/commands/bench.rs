//! `genai-bridge bench`: load time, prefill and decode speed, latency percentiles and peak memory
//! on one model, as one JSON line per configuration (the benchmark figures in benches/results/);
//! with `--budget-sweep`, one line per VRAM budget and an optional plot.

use crate::args::BenchArgs;
use crate::checksum::Checksummed;
use crate::load;
use crate::machine;
use crate::plot;
use anyhow::{Context, Result};
use genai_engine::{Generator, PagingCounters};
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::time::Instant;

/// One benchmark result.
#[derive(Debug, Serialize)]
struct BenchResult {
    commit: String,
    machine: String,
    model: String,
    precision: String,
    backend: String,
    device: String,
    threads: Option<usize>,
    /// Sequences decoded together.
    batch: usize,
    prompt_tokens: usize,
    decode_tokens: usize,
    runs: usize,
    load_ms: f64,
    /// Medians over runs; prefill and decode tok/s are the aggregates over the batch's
    /// sequences, TTFT is each sequence's (they start together).
    prefill_tok_s: f64,
    ttft_ms: f64,
    decode_tok_s: f64,
    /// Medians over runs of the steps after the first token over the wall-clock time they took
    /// (the loop around `generate_next_token`, so the host's time between the timed calls
    /// counts too: what a caller streaming tokens sees).
    decode_wall_tok_s: f64,
    /// Over every decode step of every run: each step gives every sequence of the batch one
    /// token, so these are a sequence's inter-token latency.
    decode_ms_median: f64,
    decode_ms_p90: f64,
    peak_rss_mb: Option<f64>,
    /// Weight bytes one decode step reads (native backends), and what the median decode speed
    /// makes of them.
    weight_bytes_per_token: Option<u64>,
    bytes_per_token: Option<u64>,
    weight_read_gbs: Option<f64>,
    /// Device memory bandwidth measured in the same run, and the share of the roofline
    /// (bandwidth ÷ bytes per token) reached; filled in by the benchmark scripts.
    measured_bandwidth_gbs: Option<f64>,
    roofline_fraction: Option<f64>,
    /// Highest device memory in use, as the driver reports it.
    peak_device_mb: Option<f64>,
    /// FNV-1a of every logit of the warm-up run: equal lines returned bitwise-equal logits.
    logits_checksum: Option<String>,
    /// The sweep's budget (share of the weight bytes), and the paging figures.
    budget_fraction: Option<f64>,
    budget_bytes: Option<u64>,
    resident_weight_bytes: Option<u64>,
    streamed_bytes_per_token: Option<f64>,
    byte_hit_rate: Option<f64>,
    copy_stall_ms_per_token: Option<f64>,
    h2d_gbs: Option<f64>,
    h2d_peak_gbs: Option<f64>,
    /// The PCIe limit: h2d_peak_gbs ÷ streamed bytes per token, and the share of it reached.
    pcie_limit_tok_s: Option<f64>,
    pcie_fraction: Option<f64>,
    slots: Option<u64>,
    /// CUDA graph counters over every run (zero on backends without a graph).
    graph_captures: u64,
    graph_replays: u64,
    graph_fallbacks: u64,
    graph_fallback_reasons: Vec<String>,
    /// Decode steps enqueued ahead of the host on the device-chosen token, and the ones not
    /// taken (native CUDA; `GENAI_BRIDGE_RUN_AHEAD=0` turns it off).
    run_ahead_steps: u64,
    run_ahead_unused: u64,
    /// Medians over single-token steps (`GENAI_BRIDGE_STEP_EVENTS=1`, native CUDA): the
    /// device idle between steps while the host takes its turn, the step's input copies, its
    /// kernels from the graph's launch, and the token choice with its copy back, in µs.
    step_host_gap_us: Option<f64>,
    step_inputs_us: Option<f64>,
    step_kernels_us: Option<f64>,
    step_choice_us: Option<f64>,
    route_reasons: Vec<String>,
    /// The runtime settings in effect (genai_runtime's `Settings::describe`).
    settings: serde_json::Map<String, serde_json::Value>,
}

pub fn run(args: &BenchArgs) -> Result<()> {
    anyhow::ensure!(
        args.prompt_tokens > 0 && args.decode_tokens > 0,
        "--prompt-tokens and --decode-tokens must be positive"
    );
    if args.budget_sweep.is_empty() {
        let result = measure(args, None)?;
        return print(args, &result);
    }
    let mut points = Vec::new();
    let mut title = String::new();
    for &percent in &args.budget_sweep {
        anyhow::ensure!(
            percent > 0.0 && percent <= 100.0,
            "--budget-sweep: {percent} is not a percent in (0, 100]"
        );
        let result = measure(args, Some(percent))?;
        print(args, &result)?;
        title = format!(
            "{} {} decode, batch {}",
            result.model, result.precision, result.batch
        );
        points.push(plot::Point {
            budget_percent: percent,
            tokens_per_s: result.decode_tok_s,
            pcie_limit_tok_s: result.pcie_limit_tok_s,
        });
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, plot::svg(&title, &points))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn print(args: &BenchArgs, result: &BenchResult) -> Result<()> {
    if args.json {
        println!("{}", serde_json::to_string(result)?);
    } else {
        println!(
            "{} {} on {} ({}), batch {}{}: prefill {:.1} tok/s, TTFT {:.1} ms, decode {:.2} tok/s (inter-token median {:.2} ms, p90 {:.2} ms), load {:.0} ms, peak RSS {}",
            result.model,
            result.precision,
            result.backend,
            result.device,
            result.batch,
            result.budget_fraction.map_or(String::new(), |f| format!(
                " at {:.0}% of the weights",
                f * 100.0
            )),
            result.prefill_tok_s,
            result.ttft_ms,
            result.decode_tok_s,
            result.decode_ms_median,
            result.decode_ms_p90,
            result.load_ms,
            result
                .peak_rss_mb
                .map_or("n/a".into(), |m| format!("{m:.0} MB"))
        );
    }
    Ok(())
}

/// Loads the model (at `budget_percent` of its weight bytes, when given) and measures it.
fn measure(args: &BenchArgs, budget_percent: Option<f64>) -> Result<BenchResult> {
    let total = args.prompt_tokens + args.decode_tokens;
    let mut run_args = args.run.clone();
    if let Some(percent) = budget_percent {
        run_args.vram_budget = Some(format!("{percent}%weights"));
    }
    run_args.planned_length = Some(total);
    let loaded = load::load(&run_args)?;
    let session = &loaded.session;
    let config = session.config();
    if budget_percent.is_some() {
        let info = session.info();
        anyhow::ensure!(
            info.backend == "native" && info.device == "cuda",
            "--budget-sweep measures weight paging, which the native CUDA decoder does; this \
             model routes to {} on {} ({})",
            info.backend,
            info.device,
            info.reasons.join("; ")
        );
    }
    let vocab = config
        .model
        .vocab_size
        .min(session.decoder().vocab_size())
        .max(1);
    anyhow::ensure!(
        total <= config.model.context_length,
        "{total} tokens exceed the model's context_length {}",
        config.model.context_length
    );
    let batch = usize::try_from(args.batch).context("--batch")?;
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let prompt: Vec<i32> = (0..args.prompt_tokens * batch)
        .map(|_| rng.random_range(0..vocab as i32))
        .collect();
    let mut search = session.search().clone();
    search.batch_size = batch;
    search.max_length = total;
    search.do_sample = false;
    // EOS must not end a benchmark early: suppress it for the whole run.
    search.min_length = total;

    let decoder = Checksummed::new(session.decoder().as_ref());
    let mut prefill = Vec::new();
    let mut ttft = Vec::new();
    let mut decode_rates = Vec::new();
    let mut wall_rates = Vec::new();
    let mut steps = Vec::new();
    for run in 0..=args.runs {
        // The warm-up run is hashed; the timed runs are not.
        decoder.hashing(run == 0);
        let mut generator = Generator::new(&decoder, &config.model, &search)?;
        let start = Instant::now();
        generator.append_tokens(&prompt).context("prefill")?;
        let prefill_s = start.elapsed().as_secs_f64();
        generator.generate_next_token()?;
        let first_token_ms = start.elapsed().as_secs_f64() * 1e3;
        let loop_start = Instant::now();
        let mut loop_steps = 0usize;
        while !generator.is_done() {
            generator.generate_next_token()?;
            loop_steps += 1;
        }
        let loop_s = loop_start.elapsed().as_secs_f64();
        if run == 0 {
            continue; // warm-up
        }
        let timings = generator.timings();
        let decode_s: f64 = timings.decode_ms.iter().sum::<f64>() / 1e3;
        prefill.push((args.prompt_tokens * batch) as f64 / prefill_s);
        ttft.push(first_token_ms);
        decode_rates.push((timings.decode_ms.len() * batch) as f64 / decode_s);
        if loop_steps > 0 {
            wall_rates.push((loop_steps * batch) as f64 / loop_s);
        }
        steps.extend_from_slice(&timings.decode_ms);
    }
    decoder.hashing(false);
    let info = session.info();
    let counters = session.decoder().counters();
    let bytes_per_token = session.decoder().weight_bytes_per_token();
    let decode_tok_s = median(&mut decode_rates);
    let decode_wall_tok_s = median(&mut wall_rates);
    let paging: Option<&PagingCounters> = counters.paging.as_ref();
    let clock = counters.step_clock.as_ref();
    let streamed = paging.map(|p| p.streamed_bytes_per_token);
    let pcie_limit = paging.and_then(|p| {
        (p.streamed_bytes_per_token > 0.0)
            .then(|| p.h2d_peak_gbs * 1e9 / p.streamed_bytes_per_token)
    });
    Ok(BenchResult {
        commit: machine::commit(),
        machine: machine::description(),
        model: load::model_dir(args.run.model_dir.as_deref())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        precision: machine::precision(config),
        backend: info.backend.clone(),
        device: info.device.clone(),
        threads: args.run.threads,
        batch,
        prompt_tokens: args.prompt_tokens,
        decode_tokens: args.decode_tokens,
        runs: args.runs,
        load_ms: loaded.load_ms,
        prefill_tok_s: median(&mut prefill),
        ttft_ms: median(&mut ttft),
        decode_tok_s,
        decode_wall_tok_s,
        decode_ms_median: median(&mut steps.clone()),
        decode_ms_p90: percentile(&mut steps, 0.9),
        peak_rss_mb: machine::peak_rss_mb(),
        weight_bytes_per_token: bytes_per_token,
        bytes_per_token,
        // A step reads the weights once for the whole batch.
        weight_read_gbs: bytes_per_token.map(|b| b as f64 * decode_tok_s / batch as f64 / 1e9),
        measured_bandwidth_gbs: None,
        roofline_fraction: None,
        peak_device_mb: counters.peak_device_bytes.map(|b| b as f64 / 1e6),
        logits_checksum: decoder.checksum(),
        budget_fraction: budget_percent.map(|p| p / 100.0),
        budget_bytes: paging.map(|p| p.budget_bytes),
        resident_weight_bytes: paging.map(|p| p.resident_weight_bytes),
        streamed_bytes_per_token: streamed,
        byte_hit_rate: paging.map(|p| p.byte_hit_rate),
        copy_stall_ms_per_token: paging.and_then(|p| p.copy_stall_ms_per_token),
        h2d_gbs: paging.and_then(|p| p.h2d_gbs),
        h2d_peak_gbs: paging.map(|p| p.h2d_peak_gbs),
        pcie_limit_tok_s: pcie_limit,
        pcie_fraction: pcie_limit.map(|limit| decode_tok_s / limit),
        slots: paging.map(|p| p.slots),
        graph_captures: counters.graph_captures,
        graph_replays: counters.graph_replays,
        graph_fallbacks: counters.graph_fallbacks,
        graph_fallback_reasons: counters.graph_fallback_reasons,
        run_ahead_steps: counters.run_ahead_steps,
        run_ahead_unused: counters.run_ahead_unused,
        step_host_gap_us: clock.and_then(|c| c.host_gap_us),
        step_inputs_us: clock.map(|c| c.inputs_us),
        step_kernels_us: clock.map(|c| c.kernels_us),
        step_choice_us: clock.map(|c| c.choice_us),
        route_reasons: info.reasons.clone(),
        settings: load::settings_json(session.settings()),
    })
}

fn median(values: &mut [f64]) -> f64 {
    percentile(values, 0.5)
}

/// The nearest-rank percentile; NaN for no values.
fn percentile(values: &mut [f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let mut v = vec![5.0, 1.0, 3.0, 2.0, 4.0];
        assert_eq!(median(&mut v), 3.0);
        let mut v: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.9), 9.0);
        assert!(percentile(&mut [], 0.5).is_nan());
    }
}
