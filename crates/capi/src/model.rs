//! `OgaModel`: a model folder opened through the same router as the CLI. The backend request
//! comes from `GENAI_BRIDGE_BACKEND` (auto, ort or native; auto by default), the device from the
//! config's providers (cuda → native CUDA or ONNX Runtime's CUDA EP, by the router's rules).

use crate::OgaResult;
use crate::config::{OgaConfig, load_config};
use crate::ffi::{
    Error, Handle, Result, borrow, check_out, destroy, guard, into_c_string, into_handle, read_str,
    write_out,
};
use crate::tensor::ElementType;
use genai_config::{Config, Search};
use genai_engine::{BackendKind, BackendRequest, Decoder, Generator, Route};
use genai_onnx::DataType;
use genai_runtime::{OpenOptions, open, open_ort};
use genai_tokenizer::Tokenizer;
use std::ffi::c_char;
use std::sync::{Arc, Mutex, PoisonError};

/// A loaded model. Thread-safety: a model may be shared by any number of threads, each making
/// its own tokenizers and generators from it.
pub struct OgaModel {
    pub(crate) shared: Arc<ModelShared>,
}

impl Handle for OgaModel {
    const KIND: &'static str = "OgaModel";
}

/// What generators and tokenizers made from a model hold on to.
pub struct ModelShared {
    pub config: Config,
    decoder: Box<dyn Decoder>,
    route: Route,
    threads: Option<usize>,
    /// ONNX Runtime on the same device, opened on first need (batch sizes the routed decoder
    /// does not run).
    fallback: Mutex<Option<Arc<dyn Decoder>>>,
    tokenizer: Mutex<Option<Arc<Tokenizer>>>,
    /// The element type of the model's `logits` output: its activations' type.
    pub logits_type: ElementType,
}

impl ModelShared {
    /// Opens the model folder a config describes.
    pub fn open(config: Config) -> Result<Self> {
        let backend = backend_from_env()?;
        let threads = config
            .model
            .decoder
            .session_options
            .intra_op_num_threads
            .and_then(|n| usize::try_from(n).ok())
            .filter(|&n| n > 0);
        let opened = open(
            &config,
            &OpenOptions {
                backend,
                device: None,
                threads,
                ..OpenOptions::default()
            },
        )?;
        crate::log::info(&format!(
            "genai-bridge: {} on {}: {}",
            backend_name(opened.route.backend),
            opened.route.device.name(),
            opened.route.reasons.join("; ")
        ));
        // What the graph declares, as ONNX Runtime GenAI hands it out: an int4 model with
        // half-precision activations has half-precision logits, whichever backend runs it.
        let logits_type = match opened.logits_type {
            Some(DataType::Float16) => ElementType::FLOAT16,
            Some(DataType::BFloat16) => ElementType::BFLOAT16,
            _ => ElementType::FLOAT32,
        };
        Ok(ModelShared {
            logits_type,
            config,
            decoder: opened.decoder,
            route: opened.route,
            threads,
            fallback: Mutex::new(None),
            tokenizer: Mutex::new(None),
        })
    }

    /// Starts a generation, on ONNX Runtime when the routed decoder cannot run this batch size.
    pub fn generator(&self, search: &Search) -> Result<Generator> {
        match Generator::new(self.decoder.as_ref(), &self.config.model, search) {
            Err(e) if search.batch_size > 1 && self.route.backend == BackendKind::Native => {
                crate::log::info(&format!(
                    "genai-bridge: batch size {} runs on ONNX Runtime: {e}",
                    search.batch_size
                ));
                let fallback = self.fallback_decoder()?;
                Ok(Generator::new(
                    fallback.as_ref(),
                    &self.config.model,
                    search,
                )?)
            }
            other => Ok(other?),
        }
    }

    fn fallback_decoder(&self) -> Result<Arc<dyn Decoder>> {
        let mut slot = self.fallback.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(decoder) = slot.as_ref() {
            return Ok(Arc::clone(decoder));
        }
        let decoder: Arc<dyn Decoder> =
            Arc::from(open_ort(&self.config, self.route.device, self.threads)?);
        *slot = Some(Arc::clone(&decoder));
        Ok(decoder)
    }

    /// The model's tokenizer, loaded once.
    pub fn tokenizer(&self) -> Result<Arc<Tokenizer>> {
        let mut slot = self
            .tokenizer
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(tokenizer) = slot.as_ref() {
            return Ok(Arc::clone(tokenizer));
        }
        let tokenizer = Arc::new(genai_runtime::load_tokenizer(&self.config)?);
        *slot = Some(Arc::clone(&tokenizer));
        Ok(tokenizer)
    }

    /// The device the model runs on, as the official library names it ("CPU", "CUDA").
    pub fn device_type(&self) -> String {
        self.route.device.name().to_ascii_uppercase()
    }
}

fn backend_name(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Ort => "ONNX Runtime",
        BackendKind::Native => "native decoder",
    }
}

/// `GENAI_BRIDGE_BACKEND`: which decoder the C ABI asks the router for.
fn backend_from_env() -> Result<BackendRequest> {
    match std::env::var("GENAI_BRIDGE_BACKEND").as_deref() {
        Err(_) | Ok("" | "auto") => Ok(BackendRequest::Auto),
        Ok("ort") => Ok(BackendRequest::Ort),
        Ok("native") => Ok(BackendRequest::Native),
        Ok(other) => Err(Error::Invalid(format!(
            "GENAI_BRIDGE_BACKEND=\"{other}\" is not one of auto, ort, native"
        ))),
    }
}

fn create(out: *mut *mut OgaModel, config: Config, function: &'static str) -> Result<()> {
    let shared = ModelShared::open(config)?;
    let handle = into_handle(OgaModel {
        shared: Arc::new(shared),
    });
    // SAFETY: the callers checked `out` is non-null; it points to storage for one pointer.
    unsafe { write_out(out, handle, function, "out") }
}

/// `OgaResult* OgaCreateModel(const char* config_path, OgaModel** out)`.
///
/// # Safety
/// `config_path` is a NUL-terminated string; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateModel(
    config_path: *const c_char,
    out: *mut *mut OgaModel,
) -> *mut OgaResult {
    const F: &str = "OgaCreateModel";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: C contract.
        let dir = unsafe { read_str(config_path, F, "config_path") }?;
        create(out, load_config(dir)?, F)
    })
}

/// `OgaResult* OgaCreateModelFromConfig(const OgaConfig*, OgaModel** out)`.
///
/// # Safety
/// `config` is null or a live config; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateModelFromConfig(
    config: *const OgaConfig,
    out: *mut *mut OgaModel,
) -> *mut OgaResult {
    const F: &str = "OgaCreateModelFromConfig";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let config = unsafe { borrow(config, F, "config") }?;
        let config = config.snapshot();
        config.check_files()?;
        create(out, config, F)
    })
}

/// `void OgaDestroyModel(OgaModel*)`. Tokenizers and generators made from the model keep what
/// they need alive.
///
/// # Safety
/// `model` is null or a live model no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyModel(model: *mut OgaModel) {
    // SAFETY: checked against the registry inside.
    unsafe { destroy(model) }
}

/// Writes a new string the caller frees with `OgaDestroyString`.
///
/// # Safety
/// `model` is null or a live model; `out` points to writable storage.
unsafe fn model_string(
    function: &'static str,
    model: *const OgaModel,
    out: *mut *const c_char,
    pick: impl FnOnce(&ModelShared) -> String,
) -> *mut OgaResult {
    guard(function, || {
        check_out(out, function, "out")?;
        // SAFETY: checked against the registry.
        let model = unsafe { borrow(model, function, "model") }?;
        let text = into_c_string(pick(&model.shared));
        // SAFETY: checked non-null above.
        unsafe { write_out(out, text, function, "out") }
    })
}

/// `OgaResult* OgaModelGetType(const OgaModel*, const char** out)`: `model.type` of the config.
///
/// # Safety
/// `model` is null or a live model; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaModelGetType(
    model: *const OgaModel,
    out: *mut *const c_char,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        model_string("OgaModelGetType", model, out, |m| {
            m.config.model.model_type.clone()
        })
    }
}

/// `OgaResult* OgaModelGetDeviceType(const OgaModel*, const char** out)`: "CPU" or "CUDA".
///
/// # Safety
/// `model` is null or a live model; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaModelGetDeviceType(
    model: *const OgaModel,
    out: *mut *const c_char,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe { model_string("OgaModelGetDeviceType", model, out, |m| m.device_type()) }
}
