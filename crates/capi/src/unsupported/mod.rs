//! The rest of the official library's exports: multimodal processors, adapters, the Engine /
//! Request / Turn API, multi-token-prediction generators, speculative statistics, model data
//! held in memory and the like. Each is present (so a binding never aborts on a missing symbol)
//! and fails with an error result that names it; destroy functions accept anything and do
//! nothing (no object of these types is ever created), and plain-value getters return zero.

use crate::OgaResult;
use crate::ffi::{Error, guard};
use std::ffi::{c_char, c_int};

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaImages {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaAudios {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaMultiModalProcessor {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaNamedTensors {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaAdapters {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaRuntimeSettings {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaMtpGenerator {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaSpeculativeStats {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaEngine {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaEngineEvent {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaEngineEventBuffer {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaEngineCapabilities {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaRequest {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaRequestOptions {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaTurnOptions {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaTurnUsage {
    _private: (),
}

/// An official handle type genai-bridge does not implement (only ever behind a pointer).
pub struct OgaStreamingProcessor {
    _private: (),
}

mod engine;
mod inputs;
mod multimodal;
mod speculative;

/// The error result of an unsupported function.
fn unsupported(function: &'static str, why: &'static str) -> *mut OgaResult {
    guard(function, || Err(Error::Unsupported { function, why }))
}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyImages(_handle: *mut OgaImages) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyAudios(_handle: *mut OgaAudios) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyMultiModalProcessor(_handle: *mut OgaMultiModalProcessor) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyStreamingProcessor(_handle: *mut OgaStreamingProcessor) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyNamedTensors(_handle: *mut OgaNamedTensors) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyAdapters(_handle: *mut OgaAdapters) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyRuntimeSettings(_handle: *mut OgaRuntimeSettings) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyMtpGenerator(_handle: *mut OgaMtpGenerator) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroySpeculativeStats(_handle: *mut OgaSpeculativeStats) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyEngine(_handle: *mut OgaEngine) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyEngineEventBuffer(_handle: *mut OgaEngineEventBuffer) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyEngineCapabilities(_handle: *mut OgaEngineCapabilities) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyRequest(_handle: *mut OgaRequest) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyRequestOptions(_handle: *mut OgaRequestOptions) {}

/// Accepts any pointer and does nothing: genai-bridge never creates this type.
#[unsafe(no_mangle)]
pub extern "C" fn OgaDestroyTurnOptions(_handle: *mut OgaTurnOptions) {}

/// Not supported: there is never an engine event buffer, so the count is 0.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventBufferGetCount(buffer: *const OgaEngineEventBuffer) -> usize {
    let _ = buffer;
    0
}

/// Not supported: there is never an engine event, so this is null.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventBufferGet(
    buffer: *const OgaEngineEventBuffer,
    index: usize,
) -> *const OgaEngineEvent {
    let _ = (buffer, index);
    std::ptr::null()
}

/// Not supported: an MTP generator is never created; reports done so loops end.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_IsDone(generator: *const OgaMtpGenerator) -> bool {
    let _ = generator;
    true
}

/// Not supported: no MTP generator exists; 0.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_GetSequenceCount(generator: *const OgaMtpGenerator) -> usize {
    let _ = generator;
    0
}

/// Not supported: no MTP generator exists; null.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_GetSequenceData(generator: *const OgaMtpGenerator) -> *const i32 {
    let _ = generator;
    std::ptr::null()
}

/// Not supported: no MTP generator exists; 0.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_GetForwardCount(generator: *const OgaMtpGenerator) -> usize {
    let _ = generator;
    0
}

/// Not supported: no MTP generator exists; 0.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_GetAcceptCount(generator: *const OgaMtpGenerator) -> usize {
    let _ = generator;
    0
}

/// Not supported: no MTP generator exists; 0.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_GetTrialCount(generator: *const OgaMtpGenerator) -> usize {
    let _ = generator;
    0
}

/// Plugin execution-provider libraries are ONNX Runtime's business; genai-bridge loads none.
/// Logged and ignored.
#[unsafe(no_mangle)]
pub extern "C" fn OgaRegisterExecutionProviderLibrary(
    registration_name: *const c_char,
    library_path: *const c_char,
) {
    let _ = (registration_name, library_path);
    crate::log::info("OgaRegisterExecutionProviderLibrary: ignored by genai-bridge");
}

/// The counterpart of [`OgaRegisterExecutionProviderLibrary`]: ignored.
#[unsafe(no_mangle)]
pub extern "C" fn OgaUnregisterExecutionProviderLibrary(registration_name: *const c_char) {
    let _ = registration_name;
}

/// `OgaResult* OgaSetCurrentGpuDeviceId(int)`: genai-bridge runs on device 0; other ids are an
/// error.
#[unsafe(no_mangle)]
pub extern "C" fn OgaSetCurrentGpuDeviceId(device_id: c_int) -> *mut OgaResult {
    guard("OgaSetCurrentGpuDeviceId", || {
        if device_id == 0 {
            Ok(())
        } else {
            Err(Error::Invalid(format!(
                "GPU device {device_id}: genai-bridge runs on device 0 only"
            )))
        }
    })
}

/// `OgaResult* OgaGetCurrentGpuDeviceId(int*)`: always 0.
///
/// # Safety
/// `device_id` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGetCurrentGpuDeviceId(device_id: *mut c_int) -> *mut OgaResult {
    const F: &str = "OgaGetCurrentGpuDeviceId";
    // SAFETY: the C contract gives storage for one int.
    guard(F, || unsafe {
        crate::ffi::write_out(device_id, 0, F, "device_id")
    })
}

/// `void OgaShutdown()`: the official library releases ONNX Runtime here. Models and generators
/// still alive keep what they use, so nothing is torn down; kept for the bindings that call it.
#[unsafe(no_mangle)]
pub extern "C" fn OgaShutdown() {
    crate::log::info("OgaShutdown");
}
