//! Command-line arguments.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

/// Runs ONNX Runtime GenAI model folders through ONNX Runtime or genai-bridge's native decoder.
#[derive(Debug, Parser)]
#[command(
    name = "genai-bridge",
    version,
    about,
    after_help = genai_runtime::settings::HELP
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate a continuation of a prompt.
    Generate(GenerateArgs),
    /// Chat interactively, using the model's chat template.
    Chat(ChatArgs),
    /// Describe a model folder: config, graph inputs and outputs, ops, weights.
    Inspect(InspectArgs),
    /// Measure load time, prefill and decode speed, and peak memory.
    Bench(BenchArgs),
    /// Show which backend and device would run a model, and why.
    Route(RouteArgs),
    /// Compare two backends on a model: teacher-forced logits and free-running greedy tokens.
    Parity(ParityArgs),
    /// Draw the budget-sweep SVG from recorded `bench --budget-sweep --json` lines.
    Plot(PlotArgs),
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// A file of `bench --json` lines.
    pub lines: PathBuf,
    /// The SVG to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Which model's sweep, when the file holds several.
    #[arg(long)]
    pub model: Option<String>,
}

/// Which decoder runs the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// The native decoder when it can run the model, ONNX Runtime otherwise.
    Auto,
    /// ONNX Runtime.
    Ort,
    /// genai-bridge's own decoder.
    Native,
}

/// Where the model runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DeviceChoice {
    Cpu,
    Cuda,
}

/// Options shared by every command that runs a model.
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Model folder (genai_config.json, model.onnx, tokenizer.json); the bundled fixture if omitted.
    pub model_dir: Option<PathBuf>,
    /// The backend; by default GENAI_BRIDGE_BACKEND, else auto.
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    /// The device; by default what genai_config.json's provider_options say.
    #[arg(long, value_enum)]
    pub device: Option<DeviceChoice>,
    /// Threads for the decoder (ONNX Runtime intra-op threads, or the native decoder's workers).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Check the native decoder against ONNX Runtime at load and fall back to ONNX Runtime when
    /// it is out of tolerance.
    #[arg(long)]
    pub verify: bool,
    /// Device memory the native CUDA decoder may use: BYTES (e.g. 8000000000, 8GB, 7.5GiB) or
    /// PERCENT of the device (e.g. 50%). Weights that do not fit are streamed from host memory
    /// every step. Also GENAI_BRIDGE_VRAM_BUDGET, or the cuda provider option `vram_budget`.
    #[arg(long, value_name = "BYTES|PERCENT")]
    pub vram_budget: Option<String>,
    /// Positions of KV cache a VRAM budget plans room for (set by commands that know it).
    #[arg(skip)]
    pub planned_length: Option<usize>,
}

/// Search options; unset ones keep genai_config.json's values.
#[derive(Debug, Args, Default)]
pub struct SearchArgs {
    /// Total length, prompt included (ORT GenAI's search.max_length).
    #[arg(long, conflicts_with = "max_new_tokens")]
    pub max_length: Option<usize>,
    /// Tokens to generate after the prompt.
    #[arg(long)]
    pub max_new_tokens: Option<usize>,
    /// Total length below which EOS is suppressed.
    #[arg(long)]
    pub min_length: Option<usize>,
    #[arg(long)]
    pub do_sample: bool,
    #[arg(long)]
    pub top_k: Option<usize>,
    #[arg(long)]
    pub top_p: Option<f32>,
    #[arg(long)]
    pub temperature: Option<f32>,
    #[arg(long)]
    pub repetition_penalty: Option<f32>,
    #[arg(long)]
    pub no_repeat_ngram_size: Option<usize>,
    /// Random seed for sampling; -1 is nondeterministic.
    #[arg(long, allow_negative_numbers = true)]
    pub seed: Option<i64>,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Prompt text; repeated, a batch of prompts decoded together (right-padded with the pad
    /// token, as ONNX Runtime GenAI pads a batch).
    #[arg(
        long,
        conflicts_with = "prompt_ids",
        required_unless_present = "prompt_ids"
    )]
    pub prompt: Vec<String>,
    /// Prompt token ids, comma separated.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub prompt_ids: Option<Vec<i64>>,
    /// Wrap the prompt in the model's chat template as one user message.
    #[arg(long)]
    pub chat_template: bool,
    #[command(flatten)]
    pub search: SearchArgs,
    /// Print one JSON object instead of streaming text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// A system message to start the conversation with.
    #[arg(long)]
    pub system: Option<String>,
    #[command(flatten)]
    pub search: SearchArgs,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Model folder.
    pub model_dir: PathBuf,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[arg(long, default_value_t = 128)]
    pub prompt_tokens: usize,
    #[arg(long, default_value_t = 64)]
    pub decode_tokens: usize,
    /// Measured runs after one warm-up run.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// Seed of the random prompt.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Sequences decoded together (a static batch of random prompts of --prompt-tokens each):
    /// decode tok/s is then the aggregate of all of them, the decode step times each one's
    /// inter-token latency.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub batch: u64,
    /// One JSON line instead of text, with the runtime settings in effect (`settings`).
    #[arg(long)]
    pub json: bool,
    /// Weight paging sweep (native CUDA decoder): load and measure the model once per budget,
    /// each a percent of its weight bytes plus the KV cache and workspace, e.g. 100,75,50,25,10.
    #[arg(long, value_delimiter = ',', value_name = "PERCENTS")]
    pub budget_sweep: Vec<f64>,
    /// With --budget-sweep: write an SVG of decode tokens/s against the budget, with the PCIe
    /// limit line.
    #[arg(long, value_name = "FILE", requires = "budget_sweep")]
    pub plot: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RouteArgs {
    /// Model folder.
    pub model_dir: PathBuf,
    /// The backend; by default GENAI_BRIDGE_BACKEND, else auto.
    #[arg(long, value_enum)]
    pub backend: Option<BackendChoice>,
    #[arg(long, value_enum)]
    pub device: Option<DeviceChoice>,
    /// One JSON object: the route, its reasons, the facts it was based on, the decoder plan
    /// and the runtime settings in effect (`settings`).
    #[arg(long)]
    pub json: bool,
}

/// A backend to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ParityBackend {
    Ort,
    Native,
}

#[derive(Debug, Args)]
pub struct ParityArgs {
    /// Model folder.
    pub model_dir: PathBuf,
    /// The reference backend.
    #[arg(long, value_enum, default_value_t = ParityBackend::Ort)]
    pub a: ParityBackend,
    /// The backend under test.
    #[arg(long, value_enum, default_value_t = ParityBackend::Native)]
    pub b: ParityBackend,
    /// The device of both sides, unless --a-device or --b-device says otherwise.
    #[arg(long, value_enum, default_value_t = DeviceChoice::Cpu)]
    pub device: DeviceChoice,
    /// The reference's device (e.g. `--a native --a-device cpu --b native --b-device cuda`).
    #[arg(long, value_enum)]
    pub a_device: Option<DeviceChoice>,
    /// The device of the backend under test.
    #[arg(long, value_enum)]
    pub b_device: Option<DeviceChoice>,
    /// Prompts, one per line: text, or token ids separated by commas.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Tokens generated after each prompt.
    #[arg(long, default_value_t = 64)]
    pub tokens: usize,
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long)]
    pub json: bool,
}
