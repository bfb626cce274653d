//! [`Session`]: one model folder opened once — config, settings, route, decoder, tokenizer —
//! shared by every generation made from it, on any number of threads (`Arc<Session>`).

use crate::open::{open, open_ort};
use crate::{Error, OpenOptions, Settings, load_config, load_tokenizer};
use genai_config::{Config, Search};
use genai_engine::{BackendInfo, BackendKind, Decoder, DeviceKind, Generator, Route};
use genai_frontend::DecoderPlan;
use genai_onnx::DataType;
use genai_tokenizer::Tokenizer;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

/// An opened model. Thread-safety: `Send + Sync`; share it as `Arc<Session>`, each thread
/// starting its own generators.
pub struct Session {
    config: Config,
    settings: Settings,
    route: Route,
    /// The route as a backend description (what `--json` output shows).
    info: BackendInfo,
    decoder: Arc<dyn Decoder>,
    plan: Option<DecoderPlan>,
    logits_type: Option<DataType>,
    threads: Option<usize>,
    /// ONNX Runtime on the same device, opened on first need (batches the routed decoder does
    /// not run).
    fallback: Mutex<Option<Arc<dyn Decoder>>>,
    tokenizer: Mutex<Option<Arc<Tokenizer>>>,
}

/// A generation [`Session::start`] started.
pub struct Started {
    pub generator: Generator,
    /// Why ONNX Runtime runs this generation instead of the routed decoder, when it does.
    pub fallback: Option<String>,
}

impl Session {
    /// Opens the model folder `dir` with the process environment's settings.
    pub fn open(dir: &Path, options: &OpenOptions) -> Result<Session, Error> {
        Session::from_config(load_config(dir)?, options)
    }

    /// Opens the model a config describes (edited, e.g. overlaid, as the caller likes) with
    /// the process environment's settings.
    pub fn from_config(config: Config, options: &OpenOptions) -> Result<Session, Error> {
        let settings = Settings::from_env(&config, options)?;
        Session::with_settings(config, options, settings)
    }

    /// Opens the model a config describes with settings already parsed (from these options:
    /// the settings' backend and VRAM budget are the ones used).
    pub fn with_settings(
        config: Config,
        options: &OpenOptions,
        settings: Settings,
    ) -> Result<Session, Error> {
        let tokenizer = match options.eager_tokenizer {
            true => Some(Arc::new(load_tokenizer(&config)?)),
            false => None,
        };
        let threads = options.threads.or_else(|| configured_threads(&config));
        let options = OpenOptions {
            threads,
            ..options.clone()
        };
        let opened = open(&config, &options, &settings)?;
        let info = BackendInfo {
            backend: match opened.route.backend {
                BackendKind::Ort => "ort".into(),
                BackendKind::Native => "native".into(),
            },
            device: opened.route.device.name().into(),
            reasons: opened.route.reasons.clone(),
        };
        Ok(Session {
            config,
            settings,
            route: opened.route,
            info,
            decoder: Arc::from(opened.decoder),
            plan: opened.plan,
            logits_type: opened.logits_type,
            threads,
            fallback: Mutex::new(None),
            tokenizer: Mutex::new(tokenizer),
        })
    }

    /// The configuration the session was opened with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The settings in effect.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The backend and device chosen, and every reason.
    pub fn route(&self) -> &Route {
        &self.route
    }

    /// The route as a backend description ("ort"/"native", "cpu"/"cuda", the reasons).
    pub fn info(&self) -> &BackendInfo {
        &self.info
    }

    /// The device the model runs on.
    pub fn device(&self) -> DeviceKind {
        self.route.device
    }

    /// The routed decoder (generations that need no fallback can start on it directly).
    pub fn decoder(&self) -> &Arc<dyn Decoder> {
        &self.decoder
    }

    /// The decoder plan, when the graph lifts to one.
    pub fn plan(&self) -> Option<&DecoderPlan> {
        self.plan.as_ref()
    }

    /// The element type the graph declares for its logits output (what ONNX Runtime GenAI
    /// hands out as the model's `logits`), whichever backend runs it; `None` when the graph
    /// does not declare it as a tensor.
    pub fn logits_type(&self) -> Option<DataType> {
        self.logits_type
    }

    /// The search options genai_config.json gives: every generation's defaults.
    pub fn search(&self) -> &Search {
        &self.config.search
    }

    /// The model's tokenizer, loaded once.
    pub fn tokenizer(&self) -> Result<Arc<Tokenizer>, Error> {
        let mut slot = self
            .tokenizer
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(tokenizer) = slot.as_ref() {
            return Ok(Arc::clone(tokenizer));
        }
        let tokenizer = Arc::new(load_tokenizer(&self.config)?);
        *slot = Some(Arc::clone(&tokenizer));
        Ok(tokenizer)
    }

    /// Starts a generation; on ONNX Runtime (same device) when the routed native decoder
    /// cannot run this batch size.
    pub fn start(&self, search: &Search) -> Result<Started, Error> {
        let model = &self.config.model;
        match Generator::new(self.decoder.as_ref(), model, search) {
            Err(e) if search.batch_size > 1 && self.route.backend == BackendKind::Native => {
                let fallback = self.fallback_decoder()?;
                Ok(Started {
                    generator: Generator::new(fallback.as_ref(), model, search)?,
                    fallback: Some(format!(
                        "batch size {} runs on ONNX Runtime: {e}",
                        search.batch_size
                    )),
                })
            }
            started => Ok(Started {
                generator: started?,
                fallback: None,
            }),
        }
    }

    /// [`Session::start`], without saying where the generation runs.
    pub fn generator(&self, search: &Search) -> Result<Generator, Error> {
        Ok(self.start(search)?.generator)
    }

    fn fallback_decoder(&self) -> Result<Arc<dyn Decoder>, Error> {
        let mut slot = self.fallback.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(decoder) = slot.as_ref() {
            return Ok(Arc::clone(decoder));
        }
        let decoder: Arc<dyn Decoder> = Arc::from(open_ort(
            &self.config,
            self.route.device,
            self.threads,
            &self.settings.ort_search,
        )?);
        *slot = Some(Arc::clone(&decoder));
        Ok(decoder)
    }
}

/// The config's `intra_op_num_threads`, when positive.
fn configured_threads(config: &Config) -> Option<usize> {
    config
        .model
        .decoder
        .session_options
        .intra_op_num_threads
        .and_then(|n| usize::try_from(n).ok())
        .filter(|&n| n > 0)
}

#[cfg(test)]
#[path = "session_tests.rs"]
mod tests;
