//! Loads and validates `genai_config.json`, the file that the ONNX Runtime GenAI model builder
//! writes next to a model, with the schema and defaults of ONNX Runtime GenAI 0.18.
//!
//! Parsing runs in two stages: [`raw`] holds serde structs shaped exactly like the file (unknown
//! keys are errors naming their JSON path), and [`Config`] is the validated form with the
//! official defaults applied and impossible values rejected with a message that says what to fix.
//!
//! ```no_run
//! # fn main() -> Result<(), genai_config::Error> {
//! let config = genai_config::Config::load(std::path::Path::new("models/qwen2.5-0.5b-int4"))?;
//! let layers = config.model.decoder.num_hidden_layers;
//! let first_key = config.model.decoder.inputs.past.key(0); // "past_key_values.0.key"
//! # let _ = (layers, first_key);
//! # Ok(()) }
//! ```

mod check;
mod de;
mod edit;
mod error;
mod extras;
mod model;
mod names;
pub mod raw;
mod raw_parts;
mod raw_session;
mod search;
mod session;
mod unsupported;

use std::path::{Path, PathBuf};

pub use de::{EosTokenId, Int, Int64, Merge, NamedEntries, NamedList, Opaque, StringMap};
pub use edit::{DeviceFilter, DeviceFilterField};
pub use error::Error;
pub use extras::{DynamicBatching, Engine, Speculative};
pub use model::{
    Alignment, DECODER_ONLY_LLM_TYPES, Decoder, Model, SlidingWindow, ToolAndReasoningIds,
};
pub use names::{DecoderInputs, DecoderOutputs, KvNames, fill_template};
/// A genai-bridge provider option (`"provider_options": [{"cuda": {"vram_budget": "8GB"}}]`,
/// or `OgaConfigSetProviderOption(config, "cuda", "vram_budget", "50%")`): the device memory
/// the native CUDA decoder may use, streaming the weights that do not fit. ONNX Runtime never
/// sees it.
pub const VRAM_BUDGET_OPTION: &str = "vram_budget";

pub use raw::{GraphOptimizationLevel, RawConfig, normalize_provider_name};
pub use search::{BOOL_NAMES, NUMBER_NAMES, Search};
pub use session::{DeviceFiltering, HardwareDeviceType, Provider, SessionOptions};

/// The file name inside a model folder.
pub const CONFIG_FILE: &str = "genai_config.json";

/// A validated `genai_config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The model folder; file names in the config are relative to it.
    pub model_dir: PathBuf,
    /// `model`
    pub model: Model,
    /// `search`, with defaults (`max_length` defaults to `model.context_length`).
    pub search: Search,
    /// `speculative`, when the file has the section.
    pub speculative: Option<Speculative>,
    /// `engine`, when the file has the section.
    pub engine: Option<Engine>,
    /// JSON paths of features the file sets that are parsed but not run by a decoder-only LLM
    /// runtime (e.g. `model.vision`, `model.decoder.pipeline`, `model.decoder.inputs.block_table`).
    pub unsupported: Vec<String>,
    /// Top-level keys with scalar values; the official parser skips these silently.
    pub ignored: Vec<String>,
    /// The parsed file (with any overlays merged), from which this config was built.
    pub raw: RawConfig,
}

impl Config {
    /// Reads `model_dir/genai_config.json`, validates it, and checks that the decoder file exists.
    pub fn load(model_dir: &Path) -> Result<Config, Error> {
        let path = model_dir.join(CONFIG_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::MissingConfig {
                    dir: model_dir.to_path_buf(),
                });
            }
            Err(source) => return Err(Error::Io { path, source }),
        };
        let config = Config::from_json(&text, model_dir)?;
        config.check_files()?;
        Ok(config)
    }

    /// Parses and validates config text; file names are taken relative to `model_dir`, but no
    /// file is opened (see [`Config::check_files`]).
    pub fn from_json(json: &str, model_dir: &Path) -> Result<Config, Error> {
        Config::from_raw(parse(json)?, model_dir)
    }

    /// Validates an already parsed file.
    pub fn from_raw(raw: RawConfig, model_dir: &Path) -> Result<Config, Error> {
        let Some(raw_model) = &raw.model else {
            return Err(Error::invalid(
                "model",
                "missing; the file must have a \"model\" section",
            ));
        };
        let model = Model::from_raw(raw_model)?;
        let search = Search::from_raw(
            &raw.search.clone().unwrap_or_default(),
            model.context_length,
        )?;
        search.validate(&model)?;
        let speculative = raw
            .speculative
            .as_ref()
            .map(Speculative::from_raw)
            .transpose()?;
        let engine = raw.engine.as_ref().map(Engine::from_raw).transpose()?;
        Ok(Config {
            model_dir: model_dir.to_path_buf(),
            model,
            search,
            speculative,
            engine,
            unsupported: unsupported::collect(&raw),
            ignored: raw.ignored.clone(),
            raw,
        })
    }

    /// Like `OgaConfigOverlay`: `overlay_json` is applied over the file this config came from
    /// (objects merge key by key, scalars replace, arrays such as a list `eos_token_id` append,
    /// providers merge by name) and the result is validated again, defaults included (so an
    /// overlaid `context_length` also moves a defaulted `max_length`). When this config's decoder
    /// file exists, the overlaid one must too.
    pub fn with_overlay(&self, overlay_json: &str) -> Result<Config, Error> {
        let overlay = parse(overlay_json).map_err(|e| Error::Overlay {
            source: Box::new(e),
        })?;
        let mut raw = self.raw.clone();
        raw.merge(overlay);
        let config = Config::from_raw(raw, &self.model_dir)?;
        if self.decoder_path().is_file() {
            config.check_files()?;
        }
        Ok(config)
    }

    /// The decoder ONNX file: `model_dir` joined with `model.decoder.filename`.
    pub fn decoder_path(&self) -> PathBuf {
        self.model_dir.join(&self.model.decoder.filename)
    }

    /// The folder holding the tokenizer files (`model.tokenizer_dir`, else the model folder).
    pub fn tokenizer_dir(&self) -> PathBuf {
        match &self.model.tokenizer_dir {
            Some(dir) => self.model_dir.join(dir),
            None => self.model_dir.clone(),
        }
    }

    /// Checks that the files the decoder needs are in the model folder.
    pub fn check_files(&self) -> Result<(), Error> {
        let decoder = self.decoder_path();
        if !decoder.is_file() {
            return Err(Error::MissingFile {
                path: "model.decoder.filename".into(),
                file: decoder,
            });
        }
        Ok(())
    }
}

/// Parses config text into the raw structs, with JSON paths and positions in every error.
pub fn parse(json: &str) -> Result<RawConfig, Error> {
    let json = json.strip_prefix('\u{feff}').unwrap_or(json);
    let mut deserializer = serde_json::Deserializer::from_str(json);
    let raw: RawConfig =
        serde_path_to_error::deserialize(&mut deserializer).map_err(Error::from_parse)?;
    deserializer.end().map_err(|e| Error::Syntax {
        message: "unexpected text after the end of the JSON object".into(),
        line: e.line(),
        column: e.column(),
    })?;
    Ok(raw)
}

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
