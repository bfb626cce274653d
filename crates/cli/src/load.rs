//! Loading a model folder for a command: config, tokenizer and the decoder the route picks.

use crate::args::{BackendChoice, DeviceChoice, RunArgs, SearchArgs};
use crate::progress::Progress;
use anyhow::{Context, Result, bail};
use genai_config::{Config, Search};
use genai_engine::{
    BackendInfo, BackendKind, BackendRequest, DecodeBackend, Decoder, DeviceKind, Route,
    StartOptions,
};
use genai_runtime::OpenOptions;
use genai_tokenizer::Tokenizer;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The fixture `generate` and `chat` use when no model folder is given.
pub const DEFAULT_MODEL: &str = "models/fixtures/qwen2-fp32-cpu";

/// Everything a command needs to generate.
pub struct Loaded {
    pub config: Config,
    pub tokenizer: Tokenizer,
    pub decoder: Box<dyn Decoder>,
    pub load_ms: f64,
}

/// The model folder given, or the bundled default fixture.
pub fn model_dir(given: Option<&Path>) -> PathBuf {
    match given {
        Some(dir) => dir.to_path_buf(),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(DEFAULT_MODEL),
    }
}

/// Loads config, tokenizer and decoder, with a spinner on a terminal.
pub fn load(run: &RunArgs) -> Result<Loaded> {
    let started = Instant::now();
    let dir = model_dir(run.model_dir.as_deref());
    let progress = Progress::start(&format!("loading {}", dir.display()));
    let config = Config::load(&dir)
        .with_context(|| format!("{}", dir.join(genai_config::CONFIG_FILE).display()))?;
    progress.set("loading the tokenizer");
    let tokenizer = genai_runtime::load_tokenizer(&config).context("loading the tokenizer")?;
    progress.set("creating the session");
    let decoder = open_decoder(&config, run)?;
    drop(progress);
    Ok(Loaded {
        config,
        tokenizer,
        decoder,
        load_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// The runtime's open options for the command line's choices.
pub fn open_options(run: &RunArgs) -> OpenOptions {
    OpenOptions {
        backend: backend_request(run.backend),
        device: run.device.map(device_kind),
        threads: run.threads,
        verify: run.verify,
        vram_budget: run.vram_budget.clone(),
        planned_length: run.planned_length,
    }
}

pub fn backend_request(choice: BackendChoice) -> BackendRequest {
    match choice {
        BackendChoice::Auto => BackendRequest::Auto,
        BackendChoice::Ort => BackendRequest::Ort,
        BackendChoice::Native => BackendRequest::Native,
    }
}

pub fn device_kind(choice: DeviceChoice) -> DeviceKind {
    match choice {
        DeviceChoice::Cpu => DeviceKind::Cpu,
        DeviceChoice::Cuda => DeviceKind::Cuda,
    }
}

/// Routes and builds the decoder, with the route's reasons in its description.
fn open_decoder(config: &Config, run: &RunArgs) -> Result<Box<dyn Decoder>> {
    let opened = genai_runtime::open(config, &open_options(run))?;
    Ok(Box::new(Routed {
        inner: opened.decoder,
        info: routed_info(opened.route),
    }))
}

/// The route as the backend description that `--json` output shows.
fn routed_info(route: Route) -> BackendInfo {
    BackendInfo {
        backend: match route.backend {
            BackendKind::Ort => "ort".into(),
            BackendKind::Native => "native".into(),
        },
        device: route.device.name().into(),
        reasons: route.reasons,
    }
}

/// A decoder described by its route.
struct Routed {
    inner: Box<dyn Decoder>,
    info: BackendInfo,
}

impl Decoder for Routed {
    fn start(&self, options: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
        self.inner.start(options)
    }

    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    fn counters(&self) -> genai_engine::BackendCounters {
        self.inner.counters()
    }

    fn weight_bytes_per_token(&self) -> Option<u64> {
        self.inner.weight_bytes_per_token()
    }
}

/// The config's search options with the command line's overrides applied.
pub fn search_options(config: &Config, args: &SearchArgs, prompt_len: usize) -> Result<Search> {
    let mut search = config.search.clone();
    let set = |search: &mut Search, name: &str, value: f64| {
        search
            .set_number(name, value)
            .with_context(|| format!("--{}", name.replace('_', "-")))
    };
    if let Some(n) = args.max_length {
        set(&mut search, "max_length", n as f64)?;
    }
    if let Some(n) = args.max_new_tokens {
        let total = prompt_len.saturating_add(n);
        if total > config.model.context_length {
            bail!(
                "--max-new-tokens {n} with a {prompt_len}-token prompt needs {total} positions; the model's context_length is {}",
                config.model.context_length
            );
        }
        set(&mut search, "max_length", total as f64)?;
    }
    if let Some(n) = args.min_length {
        set(&mut search, "min_length", n as f64)?;
    }
    if args.do_sample {
        search.set_bool("do_sample", true)?;
    }
    for (name, value) in [
        ("top_k", args.top_k.map(|v| v as f64)),
        ("top_p", args.top_p.map(f64::from)),
        ("temperature", args.temperature.map(f64::from)),
        ("repetition_penalty", args.repetition_penalty.map(f64::from)),
        (
            "no_repeat_ngram_size",
            args.no_repeat_ngram_size.map(|v| v as f64),
        ),
        ("random_seed", args.seed.map(|v| v as f64)),
    ] {
        if let Some(value) = value {
            set(&mut search, name, value)?;
        }
    }
    search.validate(&config.model).context("search options")?;
    Ok(search)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A decoder that only reports counters.
    struct Counted;

    impl Decoder for Counted {
        fn start(&self, _: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
            Err(genai_engine::Error::InvalidState("not for running".into()))
        }
        fn info(&self) -> &BackendInfo {
            unreachable!("not asked")
        }
        fn vocab_size(&self) -> usize {
            1
        }
        fn counters(&self) -> genai_engine::BackendCounters {
            genai_engine::BackendCounters {
                graph_captures: 3,
                graph_replays: 250,
                ..Default::default()
            }
        }
        fn weight_bytes_per_token(&self) -> Option<u64> {
            Some(7)
        }
    }

    #[test]
    fn the_routed_decoder_reports_what_the_inner_one_measures() {
        let routed = Routed {
            inner: Box::new(Counted),
            info: BackendInfo {
                backend: "native".into(),
                device: "cuda".into(),
                reasons: vec![],
            },
        };
        let counters = routed.counters();
        assert_eq!((counters.graph_captures, counters.graph_replays), (3, 250));
        assert_eq!(routed.weight_bytes_per_token(), Some(7));
    }
}
