//! `genai-bridge bench`: load time, prefill and decode speed, latency percentiles and peak memory
//! on one model, as one JSON line per configuration (the benchmark figures in benches/results/).

use crate::args::BenchArgs;
use crate::load;
use crate::machine;
use anyhow::{Context, Result};
use genai_engine::Generator;
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
    batch: usize,
    prompt_tokens: usize,
    decode_tokens: usize,
    runs: usize,
    load_ms: f64,
    /// Medians over runs.
    prefill_tok_s: f64,
    ttft_ms: f64,
    decode_tok_s: f64,
    /// Over every decode step of every run.
    decode_ms_median: f64,
    decode_ms_p90: f64,
    peak_rss_mb: Option<f64>,
    /// Weight bytes one decode step reads (native backends), and what the median decode speed
    /// makes of them.
    weight_bytes_per_token: Option<u64>,
    weight_read_gbs: Option<f64>,
    /// CUDA graph counters over every run (zero on backends without a graph).
    graph_captures: u64,
    graph_replays: u64,
    graph_fallbacks: u64,
    graph_fallback_reasons: Vec<String>,
    route_reasons: Vec<String>,
}

pub fn run(args: &BenchArgs) -> Result<()> {
    let loaded = load::load(&args.run)?;
    let vocab = loaded
        .config
        .model
        .vocab_size
        .min(loaded.decoder.vocab_size())
        .max(1);
    let total = args.prompt_tokens + args.decode_tokens;
    anyhow::ensure!(
        args.prompt_tokens > 0 && args.decode_tokens > 0,
        "--prompt-tokens and --decode-tokens must be positive"
    );
    anyhow::ensure!(
        total <= loaded.config.model.context_length,
        "{total} tokens exceed the model's context_length {}",
        loaded.config.model.context_length
    );
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let prompt: Vec<i32> = (0..args.prompt_tokens)
        .map(|_| rng.random_range(0..vocab as i32))
        .collect();
    let mut search = loaded.config.search.clone();
    search.max_length = total;
    search.do_sample = false;
    // EOS must not end a benchmark early: suppress it for the whole run.
    search.min_length = total;

    let mut prefill = Vec::new();
    let mut ttft = Vec::new();
    let mut decode_rates = Vec::new();
    let mut steps = Vec::new();
    for run in 0..=args.runs {
        let mut generator = Generator::new(loaded.decoder.as_ref(), &loaded.config.model, &search)?;
        let start = Instant::now();
        generator.append_tokens(&prompt).context("prefill")?;
        let prefill_s = start.elapsed().as_secs_f64();
        generator.generate_next_token()?;
        let first_token_ms = start.elapsed().as_secs_f64() * 1e3;
        while !generator.is_done() {
            generator.generate_next_token()?;
        }
        if run == 0 {
            continue; // warm-up
        }
        let timings = generator.timings();
        let decode_s: f64 = timings.decode_ms.iter().sum::<f64>() / 1e3;
        prefill.push(args.prompt_tokens as f64 / prefill_s);
        ttft.push(first_token_ms);
        decode_rates.push(timings.decode_ms.len() as f64 / decode_s);
        steps.extend_from_slice(&timings.decode_ms);
    }
    let info = loaded.decoder.info();
    let counters = loaded.decoder.counters();
    let bytes_per_token = loaded.decoder.weight_bytes_per_token();
    let decode_tok_s = median(&mut decode_rates);
    let result = BenchResult {
        commit: machine::commit(),
        machine: machine::description(),
        model: load::model_dir(args.run.model_dir.as_deref())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        precision: machine::precision(&loaded.config),
        backend: info.backend.clone(),
        device: info.device.clone(),
        threads: args.run.threads,
        batch: 1,
        prompt_tokens: args.prompt_tokens,
        decode_tokens: args.decode_tokens,
        runs: args.runs,
        load_ms: loaded.load_ms,
        prefill_tok_s: median(&mut prefill),
        ttft_ms: median(&mut ttft),
        decode_tok_s,
        decode_ms_median: median(&mut steps.clone()),
        decode_ms_p90: percentile(&mut steps, 0.9),
        peak_rss_mb: machine::peak_rss_mb(),
        weight_bytes_per_token: bytes_per_token,
        weight_read_gbs: bytes_per_token.map(|b| b as f64 * decode_tok_s / 1e9),
        graph_captures: counters.graph_captures,
        graph_replays: counters.graph_replays,
        graph_fallbacks: counters.graph_fallbacks,
        graph_fallback_reasons: counters.graph_fallback_reasons,
        route_reasons: info.reasons.clone(),
    };
    if args.json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        println!(
            "{} {} on {} ({}): prefill {:.1} tok/s, TTFT {:.1} ms, decode {:.2} tok/s (median {:.2} ms, p90 {:.2} ms), load {:.0} ms, peak RSS {}",
            result.model,
            result.precision,
            result.backend,
            result.device,
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
