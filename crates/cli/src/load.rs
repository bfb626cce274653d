//! Loading a model folder for a command: one runtime session (config, settings, route, decoder)
//! and its tokenizer.

use crate::args::{BackendChoice, DeviceChoice, RunArgs, SearchArgs};
use crate::progress::Progress;
use anyhow::{Context, Result, bail};
use genai_config::{Config, Search};
use genai_engine::{BackendRequest, DeviceKind};
use genai_runtime::{OpenOptions, Session, Settings};
use genai_tokenizer::Tokenizer;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// The fixture `generate` and `chat` use when no model folder is given.
pub const DEFAULT_MODEL: &str = "models/fixtures/qwen2-fp32-cpu";

/// Everything a command needs to generate.
pub struct Loaded {
    pub session: Session,
    pub tokenizer: Arc<Tokenizer>,
    pub load_ms: f64,
}

impl Loaded {
    pub fn config(&self) -> &Config {
        self.session.config()
    }
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

/// Opens the session (tokenizer first), with a spinner on a terminal.
pub fn load(run: &RunArgs) -> Result<Loaded> {
    let started = Instant::now();
    let dir = model_dir(run.model_dir.as_deref());
    let progress = Progress::start(&format!("loading {}", dir.display()));
    let config = genai_runtime::load_config(&dir)?;
    progress.set("creating the session");
    let session = Session::from_config(config, &open_options(run))?;
    let tokenizer = session.tokenizer()?;
    drop(progress);
    Ok(Loaded {
        session,
        tokenizer,
        load_ms: started.elapsed().as_secs_f64() * 1e3,
    })
}

/// The runtime's open options for the command line's choices.
pub fn open_options(run: &RunArgs) -> OpenOptions {
    OpenOptions {
        backend: run.backend.map(backend_request),
        device: run.device.map(device_kind),
        threads: run.threads,
        verify: run.verify,
        vram_budget: run.vram_budget.clone(),
        planned_length: run.planned_length,
        eager_tokenizer: true,
    }
}

/// The settings in effect as a JSON object (`route --json`, `bench --json`).
pub fn settings_json(settings: &Settings) -> serde_json::Map<String, serde_json::Value> {
    settings
        .describe()
        .into_iter()
        .map(|(name, value)| (name.to_string(), serde_json::Value::String(value)))
        .collect()
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
