//! `OgaModel`: a model folder opened as a runtime session, through the same router and rules as
//! the CLI. The backend request comes from `GENAI_BRIDGE_BACKEND` (auto, ort or native; auto by
//! default), the device from the config's providers (cuda → native CUDA, when built with the
//! `cuda` feature, or ONNX Runtime's CUDA EP, by the router's rules).

use crate::OgaResult;
use crate::config::{OgaConfig, load_config};
use crate::ffi::{
    Handle, Result, borrow, check_out, destroy, guard, into_c_string, into_handle, read_str,
    write_out,
};
use crate::tensor::ElementType;
use genai_config::{Config, Search};
use genai_engine::{BackendKind, Generator};
use genai_onnx::DataType;
use genai_runtime::{OpenOptions, Session};
use std::ffi::c_char;
use std::sync::Arc;

/// A loaded model. Thread-safety: a model may be shared by any number of threads, each making
/// its own tokenizers and generators from it.
pub struct OgaModel {
    pub(crate) session: Arc<Session>,
}

impl Handle for OgaModel {
    const KIND: &'static str = "OgaModel";
}

/// The element type of the model's `logits` output as ONNX Runtime GenAI hands it out: what
/// the graph declares (an int4 model with half-precision activations has half-precision
/// logits), whichever backend runs it.
pub(crate) fn logits_type(session: &Session) -> ElementType {
    match session.logits_type() {
        Some(DataType::Float16) => ElementType::FLOAT16,
        Some(DataType::BFloat16) => ElementType::BFLOAT16,
        _ => ElementType::FLOAT32,
    }
}

/// Starts a generation, logging when ONNX Runtime runs a batch the routed decoder cannot.
pub(crate) fn generator(session: &Session, search: &Search) -> Result<Generator> {
    let started = session.start(search)?;
    if let Some(why) = &started.fallback {
        crate::log::info(&format!("genai-bridge: {why}"));
    }
    Ok(started.generator)
}

fn backend_name(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::Ort => "ONNX Runtime",
        BackendKind::Native => "native decoder",
    }
}

fn create(out: *mut *mut OgaModel, config: Config, function: &'static str) -> Result<()> {
    let session = Session::from_config(config, &OpenOptions::default())?;
    let route = session.route();
    crate::log::info(&format!(
        "genai-bridge: {} on {}: {}",
        backend_name(route.backend),
        route.device.name(),
        route.reasons.join("; ")
    ));
    let handle = into_handle(OgaModel {
        session: Arc::new(session),
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
    pick: impl FnOnce(&Session) -> String,
) -> *mut OgaResult {
    guard(function, || {
        check_out(out, function, "out")?;
        // SAFETY: checked against the registry.
        let model = unsafe { borrow(model, function, "model") }?;
        let text = into_c_string(pick(&model.session));
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
            m.config().model.model_type.clone()
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
    unsafe {
        model_string("OgaModelGetDeviceType", model, out, |m| {
            m.device().name().to_ascii_uppercase()
        })
    }
}
