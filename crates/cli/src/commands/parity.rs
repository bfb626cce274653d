//! `genai-bridge parity`: compares two backends on a model — teacher-forced per-step logits and
//! free-running greedy generation — and exits non-zero when out of tolerance.

use crate::args::{DeviceChoice, ParityArgs, ParityBackend};
use crate::load::device_kind;
use anyhow::{Context, Result, bail};
use genai_config::Config;
use genai_engine::{BackendRequest, Decoder};
use genai_parity::{ParityOptions, Precision, Tolerance, compare};
use genai_runtime::{OpenOptions, Session};
use std::process::ExitCode;
use std::sync::Arc;

/// Prompts used when `--prompts` is not given.
const DEFAULT_PROMPTS: &[&str] = &[
    "Once upon a time",
    "The quick brown fox jumps over the lazy dog.",
    "Hello",
];

pub fn run(args: &ParityArgs) -> Result<ExitCode> {
    let config = genai_runtime::load_config(&args.model_dir)?;
    let prompts = prompts(&config, args)?;
    let a = open(
        &config,
        args.a,
        args.a_device.unwrap_or(args.device),
        args.threads,
    )?;
    let b = open(
        &config,
        args.b,
        args.b_device.unwrap_or(args.device),
        args.threads,
    )?;
    let model = genai_runtime::load_graph(&config)?;
    let precision = match genai_frontend::lift(&model, &config) {
        Ok(plan) => genai_runtime::precision_of(&plan),
        Err(_) => Precision::Fp32,
    };
    let options = ParityOptions {
        prompts,
        tokens: args.tokens,
        tolerance: Tolerance::for_precision(precision),
    };
    let report = compare(a.as_ref(), b.as_ref(), &config.model, &options)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "{} vs {} on {} ({:?}): {}",
            a.info().backend,
            b.info().backend,
            args.model_dir.display(),
            precision,
            if report.pass { "PASS" } else { "FAIL" }
        );
        println!(
            "  {} steps: max |Δlogit| {:.3e} (rel {:.3e}), top-1 {:.2}%, top-5 overlap {:.2}%, KL max {:.3e} mean {:.3e}",
            report.steps,
            report.max_abs_logit_diff,
            report.max_rel_logit_diff,
            report.top1_agreement * 100.0,
            report.top5_overlap * 100.0,
            report.kl_max,
            report.kl_mean
        );
        if report.top1_disagreements + report.top1_rounding_ties > 0 {
            println!(
                "  top-1 differs at {} step(s); the reference's margin between the two picks is at most {:.3e}",
                report.top1_disagreements + report.top1_rounding_ties,
                report.top1_max_margin
            );
        }
        if report.top1_rounding_ties > 0 {
            println!(
                "  {} of those within one {:?} rounding step of the reference's top logit (counted as agreeing; strict top-1 {:.2}%)",
                report.top1_rounding_ties,
                precision,
                report.top1_strict_agreement * 100.0
            );
        }
        if report.top1_exact_ties > 0 {
            println!(
                "  top-1 differs at {} more step(s) where the reference's logits tie exactly (counted as agreeing)",
                report.top1_exact_ties
            );
        }
        match &report.first_divergence {
            None => println!("  greedy sequences identical"),
            Some(d) => println!(
                "  greedy sequences diverge: prompt {}, generated token {}: {:?} vs {:?}",
                d.prompt, d.step, d.a_token, d.b_token
            ),
        }
        for failure in &report.failures {
            println!("  out of tolerance: {failure}");
        }
    }
    Ok(if report.pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn open(
    config: &Config,
    backend: ParityBackend,
    device: DeviceChoice,
    threads: Option<usize>,
) -> Result<Arc<dyn Decoder>> {
    let options = OpenOptions {
        backend: Some(match backend {
            ParityBackend::Ort => BackendRequest::Ort,
            ParityBackend::Native => BackendRequest::Native,
        }),
        device: Some(device_kind(device)),
        threads,
        ..OpenOptions::default()
    };
    let session = Session::from_config(config.clone(), &options)?;
    Ok(Arc::clone(session.decoder()))
}

/// The prompts as ids: from the file (a line of comma-separated integers is ids, any other line
/// is text), or the default texts.
fn prompts(config: &Config, args: &ParityArgs) -> Result<Vec<Vec<i32>>> {
    let lines: Vec<String> = match &args.prompts {
        Some(path) => std::fs::read_to_string(path)
            .with_context(|| path.display().to_string())?
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(String::from)
            .collect(),
        None => DEFAULT_PROMPTS.iter().map(|s| s.to_string()).collect(),
    };
    if lines.is_empty() {
        bail!("no prompts");
    }
    let mut tokenizer = None;
    let mut prompts = Vec::new();
    for line in lines {
        let ids: Result<Vec<i32>, _> = line.split(',').map(|t| t.trim().parse::<i32>()).collect();
        let ids = match ids {
            Ok(ids) => ids,
            Err(_) => {
                if tokenizer.is_none() {
                    tokenizer = Some(genai_runtime::load_tokenizer(config)?);
                }
                tokenizer
                    .as_ref()
                    .map(|t| t.encode(&line))
                    .transpose()?
                    .unwrap_or_default()
            }
        };
        if ids.is_empty() {
            bail!("prompt {line:?} has no tokens");
        }
        if let Some(bad) = ids
            .iter()
            .find(|&&id| id < 0 || id as usize >= config.model.vocab_size)
        {
            bail!(
                "prompt {line:?}: token id {bad} is out of range (vocab_size {})",
                config.model.vocab_size
            );
        }
        prompts.push(ids);
    }
    Ok(prompts)
}
