//! Runtime-level settings, parsed once when a session opens: from the environment, the config's
//! provider options and the caller's choices, into one typed [`Settings`] that is carried down.
//! The environment is read through a lookup the caller passes ([`process_env`] for the real
//! one), so tests never change the process environment.

use crate::{Error, OpenOptions};
use genai_backend_native::NativeTuning;
use genai_backend_native::paging::VramBudget;
use genai_backend_ort::library::LibrarySearch;
use genai_config::Config;
use genai_engine::BackendRequest;
use std::path::PathBuf;

/// Environment variable: the backend when the caller names none (auto, ort or native).
pub const BACKEND_ENV: &str = "GENAI_BRIDGE_BACKEND";
/// Environment variable: the VRAM budget when the caller gives none.
pub const VRAM_BUDGET_ENV: &str = "GENAI_BRIDGE_VRAM_BUDGET";
/// Environment variable: `1` turns the C ABI's log on from the start.
pub const LOG_ENV: &str = "GENAI_BRIDGE_LOG";
/// Environment variable: the ONNX Runtime library (or its folder), looked at first.
pub const DYLIB_PATH_ENV: &str = "ORT_DYLIB_PATH";
/// Environment variable: the folder (or file) ONNX Runtime GenAI's Python package sets, looked
/// at second.
pub const LIB_PATH_ENV: &str = "ORT_LIB_PATH";

/// Where a budget from the config comes from, as reasons name it.
const CONFIG_SOURCE: &str = "genai_config.json";
/// Where a budget the caller gives comes from, as reasons name it.
const CALLER_SOURCE: &str = "the caller";

/// The settings for a help text: what each variable means.
pub const HELP: &str = "\
Runtime settings (reported as the `settings` object of `route --json` and `bench --json`):
  GENAI_BRIDGE_BACKEND=auto|ort|native   the backend when --backend is not given (default auto)
  GENAI_BRIDGE_VRAM_BUDGET=BYTES|PERCENT the native CUDA decoder's device memory when
                                         --vram-budget is not given; else the cuda provider
                                         option `vram_budget` in genai_config.json (default none)
  GENAI_BRIDGE_LOG=0|1                   the C ABI logs from the start (default 0)
  GENAI_BRIDGE_CPU_ISA=best|scalar|avx2|avx512
                                         the highest instruction set of the CPU kernels
  GENAI_BRIDGE_MEMORY_LIMIT=BYTES        host memory the native CPU decoder treats as free
  GENAI_BRIDGE_DEVICE_MEMORY_LIMIT=BYTES device memory the native CUDA decoder treats as free
  ORT_DYLIB_PATH, ORT_LIB_PATH=FILE|DIR  the ONNX Runtime library, looked for there first
  GENAI_BRIDGE_KERNEL_CACHE=DIR|off      where compiled CUDA kernels are cached (default
                                         $XDG_CACHE_HOME/genai-bridge/kernels)
  The native CUDA decoder's A/B switches (GENAI_BRIDGE_CUDA_GRAPH and the rest) are listed,
  with their values, in the `settings` object; docs/cuda.md says what each measured.
A malformed value is an error naming the variable.";

/// Every runtime setting, resolved: the caller's choice, else the environment's, else the
/// config's, else the default.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Which decoder the router is asked for.
    pub backend: BackendRequest,
    /// The device memory the native CUDA decoder may use; `None`: no budget.
    pub vram_budget: Option<BudgetSetting>,
    /// Whether the C ABI's log is on from the start.
    pub log: bool,
    /// The native decoders' tuning (CPU instruction set and memory limit, CUDA kernel choices
    /// and A/B switches), carried into their CPU and CUDA options.
    pub native: NativeTuning,
    /// Where to look for ONNX Runtime before the fixed places (`ORT_DYLIB_PATH`,
    /// `ORT_LIB_PATH`; empty counts as unset).
    pub ort_search: LibrarySearch,
}

/// A VRAM budget with the text it was given as and where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetSetting {
    pub budget: VramBudget,
    /// As given, e.g. `50%` or `8GB`.
    pub text: String,
    /// "the caller", `GENAI_BRIDGE_VRAM_BUDGET` or "genai_config.json".
    pub source: &'static str,
}

/// The process environment as a lookup (a value that is not Unicode reads lossily, so it fails
/// to parse rather than being taken for unset).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
}

impl Settings {
    /// Resolves every setting from `env`, the config's provider options and `options`.
    pub fn parse(
        env: &dyn Fn(&str) -> Option<String>,
        config: &Config,
        options: &OpenOptions,
    ) -> Result<Settings, Error> {
        // Every value present is checked, the ones a higher source overrides too.
        let backend = parse_backend(env(BACKEND_ENV).as_deref())?;
        let backend = options.backend.unwrap_or(backend);
        let env_budget = env(VRAM_BUDGET_ENV);
        let candidates = [
            (options.vram_budget.as_deref(), CALLER_SOURCE),
            (env_budget.as_deref(), VRAM_BUDGET_ENV),
            (configured_budget(config), CONFIG_SOURCE),
        ];
        let mut vram_budget = None;
        for (text, source) in candidates {
            if let Some(text) = text.filter(|t| !t.trim().is_empty()) {
                let parsed = parse_budget(text, source)?;
                vram_budget = vram_budget.or(Some(parsed));
            }
        }
        Ok(Settings {
            backend,
            vram_budget,
            log: Settings::log_enabled(env)?,
            native: NativeTuning::from_lookup(env).map_err(native_setting)?,
            ort_search: library_search(env),
        })
    }

    /// [`Settings::parse`] on the process environment.
    pub fn from_env(config: &Config, options: &OpenOptions) -> Result<Settings, Error> {
        Settings::parse(&process_env, config, options)
    }

    /// `GENAI_BRIDGE_LOG` alone, for a log that starts before any session opens.
    pub fn log_enabled(env: &dyn Fn(&str) -> Option<String>) -> Result<bool, Error> {
        match env(LOG_ENV).as_deref().map(str::trim) {
            None | Some("" | "0") => Ok(false),
            Some("1") => Ok(true),
            Some(other) => Err(Error::Setting {
                name: LOG_ENV,
                value: other.to_string(),
                why: "is not one of 0, 1".into(),
            }),
        }
    }

    /// Every setting in effect, defaults included, as (name, value) pairs.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let backend = match self.backend {
            BackendRequest::Auto => "auto",
            BackendRequest::Ort => "ort",
            BackendRequest::Native => "native",
        };
        let budget = match &self.vram_budget {
            Some(b) => format!("{} from {}", b.text, b.source),
            None => "none".into(),
        };
        let mut all = vec![
            ("backend", backend.into()),
            ("vram_budget", budget),
            ("log", if self.log { "1" } else { "0" }.into()),
        ];
        all.extend(self.native.effective_settings());
        let path = |p: &Option<PathBuf>| {
            p.as_ref()
                .map_or("none".into(), |p| p.display().to_string())
        };
        all.push((DYLIB_PATH_ENV, path(&self.ort_search.dylib_path)));
        all.push((LIB_PATH_ENV, path(&self.ort_search.lib_path)));
        all
    }
}

/// The ONNX Runtime library search `env` gives.
fn library_search(env: &dyn Fn(&str) -> Option<String>) -> LibrarySearch {
    let path = |name| env(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    LibrarySearch {
        dylib_path: path(DYLIB_PATH_ENV),
        lib_path: path(LIB_PATH_ENV),
    }
}

/// A malformed native tuning variable as the runtime's setting error (one message, naming it).
fn native_setting(e: genai_backend_native::Error) -> Error {
    match e {
        genai_backend_native::Error::Setting {
            name,
            value,
            expected,
        } => Error::Setting {
            name,
            value,
            why: format!("is not accepted: expected {expected}"),
        },
        other => Error::Native(other),
    }
}

fn parse_backend(value: Option<&str>) -> Result<BackendRequest, Error> {
    match value.map(str::trim) {
        None | Some("" | "auto") => Ok(BackendRequest::Auto),
        Some("ort") => Ok(BackendRequest::Ort),
        Some("native") => Ok(BackendRequest::Native),
        Some(other) => Err(Error::Setting {
            name: BACKEND_ENV,
            value: other.to_string(),
            why: "is not one of auto, ort, native".into(),
        }),
    }
}

/// Parses a budget; an error names where the text came from (the caller's flag names itself).
fn parse_budget(text: &str, source: &'static str) -> Result<BudgetSetting, Error> {
    let budget = VramBudget::parse(text).map_err(|e| {
        let why = match &e {
            genai_backend_native::Error::BadBudget { why, .. } => why.clone(),
            other => other.to_string(),
        };
        match source {
            VRAM_BUDGET_ENV => Error::Setting {
                name: VRAM_BUDGET_ENV,
                value: text.to_string(),
                why: format!("is not a VRAM budget: {why}"),
            },
            CONFIG_SOURCE => Error::Setting {
                name: "the cuda provider option vram_budget in genai_config.json",
                value: text.to_string(),
                why: format!("is not a VRAM budget: {why}"),
            },
            _ => Error::Native(e),
        }
    })?;
    Ok(BudgetSetting {
        budget,
        text: text.trim().to_string(),
        source,
    })
}

/// The config's `cuda` provider option `vram_budget`.
fn configured_budget(config: &Config) -> Option<&str> {
    config
        .model
        .decoder
        .session_options
        .provider_options
        .iter()
        .filter(|p| p.name == "cuda")
        .flat_map(|p| p.options.iter())
        .find(|(key, _)| key == genai_config::VRAM_BUDGET_OPTION)
        .map(|(_, value)| value.as_str())
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
