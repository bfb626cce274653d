//! `genai-bridge generate`: one prompt in, a continuation out — streamed text, or one JSON object.

use crate::args::GenerateArgs;
use crate::load::{self, Loaded};
use anyhow::{Context, Result};
use genai_engine::{BackendCounters, BackendInfo, GeneratorTimings};
use serde::Serialize;
use std::io::Write;

/// The `--json` output.
#[derive(Debug, Serialize)]
struct GenerateOutput<'a> {
    model_dir: String,
    route: &'a BackendInfo,
    prompt_ids: Vec<i32>,
    /// Every id of the row, as ORT GenAI's get_sequence returns it.
    sequence: Vec<i32>,
    /// Decoded generated tokens (special tokens skipped).
    text: String,
    stop_reason: &'static str,
    max_length: usize,
    timings: Timings<'a>,
    /// CUDA graph captures, replays and fallbacks (zero on backends without a graph).
    counters: BackendCounters,
}

#[derive(Debug, Serialize)]
struct Timings<'a> {
    load_ms: f64,
    prefill_ms: f64,
    /// One entry per decode step.
    decode_ms: &'a [f64],
    decode_tokens_per_s: Option<f64>,
}

pub fn run(args: &GenerateArgs) -> Result<()> {
    let loaded = load::load(&args.run)?;
    let prompt_ids = prompt_ids(&loaded, args)?;
    let search = load::search_options(loaded.config(), &args.search, prompt_ids.len())?;
    let mut generator = loaded.session.generator(&search)?;
    generator
        .append_tokens(&prompt_ids)
        .context("running the prompt")?;

    let mut stream = loaded.tokenizer.stream();
    let mut stdout = std::io::stdout().lock();
    while !generator.is_done() {
        generator.generate_next_token()?;
        // A final EOS is not part of the sequence, and is not printed.
        if !args.json && !generator.finished_by_eos() {
            let token = generator.next_tokens()[0];
            if let Some(piece) = stream.push(token)? {
                write!(stdout, "{piece}")?;
                stdout.flush()?;
            }
        }
    }
    let sequence = generator.sequence(0).unwrap_or_default().to_vec();
    let generated = &sequence[prompt_ids.len().min(sequence.len())..];
    if !args.json {
        if let Some(rest) = stream.flush()? {
            write!(stdout, "{rest}")?;
        }
        writeln!(stdout)?;
        return Ok(());
    }
    let stop_reason = if generator.finished_by_eos() {
        "eos"
    } else {
        "max_length"
    };
    let timings = generator.timings();
    let output = GenerateOutput {
        model_dir: load::model_dir(args.run.model_dir.as_deref())
            .display()
            .to_string(),
        route: loaded.session.info(),
        text: loaded.tokenizer.decode(generated)?,
        prompt_ids,
        sequence: sequence.clone(),
        stop_reason,
        max_length: search.max_length,
        timings: timings_of(timings, loaded.load_ms),
        counters: loaded.session.decoder().counters(),
    };
    serde_json::to_writer_pretty(&mut stdout, &output)?;
    writeln!(stdout)?;
    Ok(())
}

fn timings_of(timings: &GeneratorTimings, load_ms: f64) -> Timings<'_> {
    let decode_total: f64 = timings.decode_ms.iter().sum();
    Timings {
        load_ms,
        prefill_ms: timings.prefill_ms.iter().sum(),
        decode_ms: &timings.decode_ms,
        decode_tokens_per_s: (decode_total > 0.0)
            .then(|| timings.decode_ms.len() as f64 / decode_total * 1e3),
    }
}

/// The prompt as token ids, from `--prompt-ids` or by encoding `--prompt`.
fn prompt_ids(loaded: &Loaded, args: &GenerateArgs) -> Result<Vec<i32>> {
    if let Some(ids) = &args.prompt_ids {
        return ids
            .iter()
            .map(|&id| {
                i32::try_from(id)
                    .with_context(|| format!("--prompt-ids: {id} is not a valid token id"))
            })
            .collect();
    }
    let text = args.prompt.as_deref().unwrap_or_default();
    let text = if args.chat_template {
        let messages = serde_json::json!([{ "role": "user", "content": text }]).to_string();
        loaded
            .tokenizer
            .apply_chat_template(None, &messages, None, true)?
    } else {
        text.to_string()
    };
    let ids = loaded.tokenizer.encode(&text)?;
    anyhow::ensure!(!ids.is_empty(), "the prompt encodes to no tokens");
    Ok(ids)
}
