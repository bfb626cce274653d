//! `genai-bridge generate`: one prompt in, a continuation out — streamed text, or one JSON object;
//! several `--prompt`s, a batch decoded together, each row's continuation out.

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

/// The `--json` output of a batch: one entry per prompt.
#[derive(Debug, Serialize)]
struct BatchOutput<'a> {
    model_dir: String,
    route: &'a BackendInfo,
    rows: Vec<RowOutput>,
    max_length: usize,
    timings: Timings<'a>,
    counters: BackendCounters,
}

#[derive(Debug, Serialize)]
struct RowOutput {
    prompt_ids: Vec<i32>,
    /// The row's generated ids, up to and without its EOS (the padded batch's row holds the
    /// prompt, its padding, then these).
    generated: Vec<i32>,
    text: String,
    stop_reason: &'static str,
}

pub fn run(args: &GenerateArgs) -> Result<()> {
    let loaded = load::load(&args.run)?;
    if args.prompt.len() > 1 {
        return run_batch(&loaded, args);
    }
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

/// Several prompts as one padded batch: every row's continuation, printed when all are done.
fn run_batch(loaded: &Loaded, args: &GenerateArgs) -> Result<()> {
    let prompts: Vec<Vec<i32>> = args
        .prompt
        .iter()
        .map(|text| encode(loaded, args, text))
        .collect::<Result<_>>()?;
    let width = prompts.iter().map(Vec::len).max().unwrap_or(0);
    let pad = loaded.config().model.pad_token_id;
    let mut search = load::search_options(loaded.config(), &args.search, width)?;
    search.batch_size = prompts.len();
    let mut generator = loaded.session.generator(&search)?;
    let padded: Vec<i32> = prompts
        .iter()
        .flat_map(|p| {
            p.iter()
                .copied()
                .chain(std::iter::repeat_n(pad, width - p.len()))
        })
        .collect();
    generator
        .append_tokens(&padded)
        .context("running the prompts")?;
    while !generator.is_done() {
        generator.generate_next_token()?;
    }
    let eos = &loaded.config().model.eos_token_ids;
    let mut rows = Vec::with_capacity(prompts.len());
    for (row, prompt) in prompts.into_iter().enumerate() {
        let sequence = generator.sequence(row).unwrap_or_default();
        let after = &sequence[width.min(sequence.len())..];
        let end = after.iter().position(|t| eos.contains(t));
        let generated = after[..end.unwrap_or(after.len())].to_vec();
        rows.push(RowOutput {
            text: loaded.tokenizer.decode(&generated)?,
            prompt_ids: prompt,
            generated,
            stop_reason: if end.is_some() { "eos" } else { "max_length" },
        });
    }
    let mut stdout = std::io::stdout().lock();
    if !args.json {
        for (i, row) in rows.iter().enumerate() {
            writeln!(stdout, "[{i}] {}", row.text)?;
        }
        return Ok(());
    }
    let output = BatchOutput {
        model_dir: load::model_dir(args.run.model_dir.as_deref())
            .display()
            .to_string(),
        route: loaded.session.info(),
        rows,
        max_length: search.max_length,
        timings: timings_of(generator.timings(), loaded.load_ms),
        counters: loaded.session.decoder().counters(),
    };
    serde_json::to_writer_pretty(&mut stdout, &output)?;
    writeln!(stdout)?;
    Ok(())
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
    encode(loaded, args, args.prompt.first().map_or("", String::as_str))
}

/// One prompt text as token ids (in the chat template with `--chat-template`).
fn encode(loaded: &Loaded, args: &GenerateArgs, text: &str) -> Result<Vec<i32>> {
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
