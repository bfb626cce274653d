//! The rest of the official library's exports: multimodal processors, adapters, the Engine /
//! Request / Turn API, multi-token-prediction generators, speculative statistics, model data
//! held in memory and the like. Each is present (so a binding never aborts on a missing symbol)
//! and fails with an error result that names it; destroy functions accept anything and do
//! nothing (no object of these types is ever created), and plain-value getters return zero.

use crate::OgaResult;
use crate::ffi::{Error, guard};
use std::ffi::{c_char, c_int, c_void};

/// Declares opaque types that this library never creates.
macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        /// An official handle type genai-bridge does not implement.
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    OgaImages,
    OgaAudios,
    OgaMultiModalProcessor,
    OgaNamedTensors,
    OgaAdapters,
    OgaRuntimeSettings,
    OgaMtpGenerator,
    OgaSpeculativeStats,
    OgaEngine,
    OgaEngineEvent,
    OgaEngineEventBuffer,
    OgaEngineCapabilities,
    OgaRequest,
    OgaRequestOptions,
    OgaTurnOptions,
    OgaTurnUsage,
    OgaStreamingProcessor,
);

fn unsupported(function: &'static str, why: &'static str) -> *mut OgaResult {
    guard(function, || Err(Error::Unsupported { function, why }))
}

/// Declares functions that return an error result naming themselves.
macro_rules! unsupported {
    ($why:literal: $($name:ident($($arg:ident: $ty:ty),* $(,)?);)*) => {$(
        #[doc = concat!("Not supported by genai-bridge (", $why, "): returns an error result.")]
        #[unsafe(no_mangle)]
        pub extern "C" fn $name($($arg: $ty),*) -> *mut OgaResult {
            $(let _ = $arg;)*
            unsupported(stringify!($name), $why)
        }
    )*};
}

/// Declares destroy functions for types this library never creates.
macro_rules! destroy_nothing {
    ($($name:ident($ty:ty);)*) => {$(
        /// Accepts any pointer and does nothing: genai-bridge never creates this type.
        #[unsafe(no_mangle)]
        pub extern "C" fn $name(handle: $ty) {
            let _ = handle;
        }
    )*};
}

unsupported!("multimodal input is not implemented":
    OgaLoadImage(image_path: *const c_char, images: *mut *mut OgaImages);
    OgaLoadImages(image_paths: *const crate::OgaStringArray, images: *mut *mut OgaImages);
    OgaLoadImagesFromBuffers(image_data: *const *const c_void, image_data_sizes: *const usize, count: usize, images: *mut *mut OgaImages);
    OgaLoadAudio(audio_path: *const c_char, audios: *mut *mut OgaAudios);
    OgaLoadAudios(audio_paths: *const crate::OgaStringArray, audios: *mut *mut OgaAudios);
    OgaLoadAudiosFromBuffers(audio_data: *const *const c_void, audio_data_sizes: *const usize, count: usize, audios: *mut *mut OgaAudios);
    OgaCreateMultiModalProcessor(model: *const crate::OgaModel, out: *mut *mut OgaMultiModalProcessor);
    OgaProcessorProcessImages(processor: *const OgaMultiModalProcessor, prompt: *const c_char, images: *const OgaImages, input_tensors: *mut *mut OgaNamedTensors);
    OgaProcessorProcessImagesAndPrompts(processor: *const OgaMultiModalProcessor, prompts: *const crate::OgaStringArray, images: *const OgaImages, input_tensors: *mut *mut OgaNamedTensors);
    OgaProcessorProcessAudios(processor: *const OgaMultiModalProcessor, prompt: *const c_char, audios: *const OgaAudios, input_tensors: *mut *mut OgaNamedTensors);
    OgaProcessorProcessAudiosAndPrompts(processor: *const OgaMultiModalProcessor, prompts: *const crate::OgaStringArray, audios: *const OgaAudios, input_tensors: *mut *mut OgaNamedTensors);
    OgaProcessorProcessImagesAndAudios(processor: *const OgaMultiModalProcessor, prompt: *const c_char, images: *const OgaImages, audios: *const OgaAudios, input_tensors: *mut *mut OgaNamedTensors);
    OgaProcessorProcessImagesAndAudiosAndPrompts(processor: *const OgaMultiModalProcessor, prompts: *const crate::OgaStringArray, images: *const OgaImages, audios: *const OgaAudios, input_tensors: *mut *mut OgaNamedTensors);
    OgaProcessorDecode(processor: *const OgaMultiModalProcessor, tokens: *const i32, token_count: usize, out_string: *mut *const c_char);
    OgaCreateTokenizerStreamFromProcessor(processor: *const OgaMultiModalProcessor, out: *mut *mut crate::OgaTokenizerStream);
    OgaCreateStreamingProcessor(model: *mut crate::OgaModel, out: *mut *mut OgaStreamingProcessor);
    OgaStreamingProcessorProcess(processor: *mut OgaStreamingProcessor, audio_data: *const f32, num_samples: usize, out: *mut *mut OgaNamedTensors);
    OgaStreamingProcessorFlush(processor: *mut OgaStreamingProcessor, out: *mut *mut OgaNamedTensors);
    OgaStreamingProcessorSetOption(processor: *mut OgaStreamingProcessor, key: *const c_char, value: *const c_char);
    OgaStreamingProcessorGetOption(processor: *const OgaStreamingProcessor, key: *const c_char, value: *mut *const c_char);
);

unsupported!("named model inputs and extra model inputs are not implemented":
    OgaCreateNamedTensors(out: *mut *mut OgaNamedTensors);
    OgaNamedTensorsGet(named_tensors: *mut OgaNamedTensors, name: *const c_char, out: *mut *mut crate::OgaTensor);
    OgaNamedTensorsSet(named_tensors: *mut OgaNamedTensors, name: *const c_char, tensor: *mut crate::OgaTensor);
    OgaNamedTensorsDelete(named_tensors: *mut OgaNamedTensors, name: *const c_char);
    OgaNamedTensorsCount(named_tensors: *const OgaNamedTensors, out: *mut usize);
    OgaNamedTensorsGetNames(named_tensors: *const OgaNamedTensors, out: *mut *mut crate::OgaStringArray);
    OgaGenerator_SetModelInput(generator: *mut crate::OgaGenerator, name: *const c_char, tensor: *mut crate::OgaTensor);
    OgaGenerator_SetInputs(generator: *mut crate::OgaGenerator, named_tensors: *const OgaNamedTensors);
    OgaGenerator_GetInput(generator: *const crate::OgaGenerator, name: *const c_char, out: *mut *mut crate::OgaTensor);
    OgaGenerator_SetHiddenStates(generator: *mut crate::OgaGenerator, hidden_states: *mut crate::OgaTensor);
    OgaGenerator_SnapshotState(generator: *mut crate::OgaGenerator);
);

unsupported!("guidance (constrained decoding) is not implemented":
    OgaGeneratorParamsSetGuidance(params: *mut crate::OgaGeneratorParams, r#type: *const c_char, data: *const c_char, enable_ff_tokens: bool);
);

unsupported!("speculative decoding is not implemented":
    OgaGeneratorParamsSetSpeculativeNumber(params: *mut crate::OgaGeneratorParams, name: *const c_char, value: f64);
    OgaGeneratorParamsGetSpeculativeNumber(params: *const crate::OgaGeneratorParams, name: *const c_char, value: *mut f64);
    OgaGeneratorParamsSetSpeculativeBool(params: *mut crate::OgaGeneratorParams, name: *const c_char, value: bool);
    OgaGeneratorParamsGetSpeculativeBool(params: *const crate::OgaGeneratorParams, name: *const c_char, value: *mut bool);
    OgaGenerator_GetSpeculativeStats(generator: *const crate::OgaGenerator, out: *mut *mut OgaSpeculativeStats);
    OgaSpeculativeStatsGetCount(stats: *const OgaSpeculativeStats, name: *const c_char, value: *mut u64);
    OgaSpeculativeStatsGetNumber(stats: *const OgaSpeculativeStats, name: *const c_char, value: *mut f64);
    OgaSpeculativeStatsGetBool(stats: *const OgaSpeculativeStats, name: *const c_char, value: *mut bool);
    OgaSpeculativeStatsGetAcceptanceLengthCount(stats: *const OgaSpeculativeStats, index: usize, value: *mut u64);
    OgaSpeculativeStatsGetAcceptanceLengthHistogramSize(stats: *const OgaSpeculativeStats, value: *mut usize);
    OgaCreateMtpGenerator(main_model: *const crate::OgaModel, mtp_model: *const crate::OgaModel, params: *const crate::OgaGeneratorParams, out: *mut *mut OgaMtpGenerator);
    OgaMtpGenerator_AppendTokens(generator: *mut OgaMtpGenerator, input_ids: *const i32, input_ids_count: usize);
    OgaMtpGenerator_GenerateNextToken(generator: *mut OgaMtpGenerator);
    OgaMtpGenerator_GetSpeculativeStats(generator: *const OgaMtpGenerator, out: *mut *mut OgaSpeculativeStats);
    OgaMtpGenerator_Reset(generator: *mut OgaMtpGenerator);
);

unsupported!("LoRA adapters are not implemented":
    OgaCreateAdapters(model: *const crate::OgaModel, out: *mut *mut OgaAdapters);
    OgaLoadAdapter(adapters: *mut OgaAdapters, adapter_file_path: *const c_char, adapter_name: *const c_char);
    OgaUnloadAdapter(adapters: *mut OgaAdapters, adapter_name: *const c_char);
    OgaSetActiveAdapter(generator: *mut crate::OgaGenerator, adapters: *mut OgaAdapters, adapter_name: *const c_char);
);

unsupported!("models are loaded from their folder; in-memory model data and runtime handles are not implemented":
    OgaConfigAddModelData(config: *mut crate::OgaConfig, model_filename: *const c_char, model_data: *const c_void, model_data_length: usize);
    OgaConfigRemoveModelData(config: *mut crate::OgaConfig, model_filename: *const c_char);
    OgaCreateConfigFromPackageEp(config_path: *const c_char, ep: *const c_char, out: *mut *mut crate::OgaConfig);
    OgaCreateRuntimeSettings(out: *mut *mut OgaRuntimeSettings);
    OgaRuntimeSettingsSetHandle(settings: *mut OgaRuntimeSettings, handle_name: *const c_char, handle: *mut c_void);
    OgaCreateModelWithRuntimeSettings(config_path: *const c_char, settings: *const OgaRuntimeSettings, out: *mut *mut crate::OgaModel);
);

unsupported!("the Engine / Request / Turn API is not implemented; use OgaGenerator":
    OgaCreateEngine(model: *mut crate::OgaModel, out: *mut *mut OgaEngine);
    OgaEngineCreateRequest(engine: *mut OgaEngine, request_options: *const OgaRequestOptions, out: *mut *mut OgaRequest);
    OgaCreateEngineEventBuffer(engine: *mut OgaEngine, capacity: usize, out: *mut *mut OgaEngineEventBuffer);
    OgaEngineRun(engine: *mut OgaEngine, buffer: *mut OgaEngineEventBuffer);
    OgaEngineHasPendingRequests(engine: *mut OgaEngine, out: *mut bool);
    OgaEngineGetCapabilities(engine: *const OgaEngine, out: *mut *mut OgaEngineCapabilities);
    OgaEngineCapabilitiesGetConfiguredMaxBatchSize(capabilities: *const OgaEngineCapabilities, out: *mut u64);
    OgaEngineCapabilitiesGetMaxRequestLength(capabilities: *const OgaEngineCapabilities, out: *mut u64);
    OgaEngineCapabilitiesGetMaxScheduledTokens(capabilities: *const OgaEngineCapabilities, out: *mut u64);
    OgaEngineGetSpeculativeStats(engine: *const OgaEngine, out: *mut *mut OgaSpeculativeStats);
    OgaEngineMaxDraftTokensPerProposal(engine: *const OgaEngine, out: *mut u64);
    OgaEngineEventGetFlags(event: *const OgaEngineEvent, out: *mut u32);
    OgaEngineEventGetRequest(event: *const OgaEngineEvent, out: *mut *const OgaRequest);
    OgaEngineEventGetTurnId(event: *const OgaEngineEvent, out: *mut u64);
    OgaEngineEventGetToken(event: *const OgaEngineEvent, out: *mut i32);
    OgaEngineEventGetFinishReason(event: *const OgaEngineEvent, out: *mut u32);
    OgaEngineEventGetMatchedStopStringIndex(event: *const OgaEngineEvent, out: *mut i32);
    OgaEngineEventGetErrorCode(event: *const OgaEngineEvent, out: *mut u32);
    OgaEngineEventGetUsage(event: *const OgaEngineEvent, out: *mut *const OgaTurnUsage);
    OgaTurnUsageGetPromptTokens(usage: *const OgaTurnUsage, out: *mut u64);
    OgaTurnUsageGetGeneratedTokens(usage: *const OgaTurnUsage, out: *mut u64);
    OgaTurnUsageGetCachedPromptTokens(usage: *const OgaTurnUsage, out: *mut u64);
    OgaCreateRequestOptions(out: *mut *mut OgaRequestOptions);
    OgaRequestOptionsSetMaxSessionTokens(options: *mut OgaRequestOptions, max_session_tokens: u64);
    OgaRequestBeginTurn(request: *mut OgaRequest, turn_options: *const OgaTurnOptions, input_ids: *const i32, input_ids_count: u64, out_turn_id: *mut u64);
    OgaRequestCancelTurn(request: *mut OgaRequest, turn_id: u64, out_cancelled: *mut bool);
    OgaRequestClose(request: *mut OgaRequest);
    OgaRequestRewindToStartOfTurn(request: *mut OgaRequest, turn_id: u64);
    OgaRequestSetDraftTokens(request: *mut OgaRequest, tokens: *const i32, token_count: u64);
    OgaRequestCreateTurnOptions(request: *mut OgaRequest, out: *mut *mut OgaTurnOptions);
    OgaTurnOptionsSetMaxGeneratedTokens(options: *mut OgaTurnOptions, value: u64);
    OgaTurnOptionsSetMinGeneratedTokens(options: *mut OgaTurnOptions, value: u64);
    OgaTurnOptionsSetDoSample(options: *mut OgaTurnOptions, value: bool);
    OgaTurnOptionsSetTemperature(options: *mut OgaTurnOptions, value: f32);
    OgaTurnOptionsSetTopP(options: *mut OgaTurnOptions, value: f32);
    OgaTurnOptionsSetTopK(options: *mut OgaTurnOptions, value: i32);
    OgaTurnOptionsSetRepetitionPenalty(options: *mut OgaTurnOptions, value: f32);
    OgaTurnOptionsSetNoRepeatNgramSize(options: *mut OgaTurnOptions, value: i32);
    OgaTurnOptionsSetSeed(options: *mut OgaTurnOptions, seed: u64);
    OgaTurnOptionsClearSeed(options: *mut OgaTurnOptions);
    OgaTurnOptionsSetStopStrings(options: *mut OgaTurnOptions, stop_strings: *const crate::OgaStringArray);
    OgaTurnOptionsSetGuidance(options: *mut OgaTurnOptions, guidance_type: *const c_char, guidance_data: *const c_char);
    OgaTurnOptionsSetDelimitedGuidance(options: *mut OgaTurnOptions, guidance_type: *const c_char, guidance_data: *const c_char, start_delimiter: *const c_char, end_delimiter: *const c_char);
    OgaTurnOptionsClearGuidance(options: *mut OgaTurnOptions);
    OgaTurnOptionsReset(options: *mut OgaTurnOptions);
);

destroy_nothing!(
    OgaDestroyImages(*mut OgaImages);
    OgaDestroyAudios(*mut OgaAudios);
    OgaDestroyMultiModalProcessor(*mut OgaMultiModalProcessor);
    OgaDestroyStreamingProcessor(*mut OgaStreamingProcessor);
    OgaDestroyNamedTensors(*mut OgaNamedTensors);
    OgaDestroyAdapters(*mut OgaAdapters);
    OgaDestroyRuntimeSettings(*mut OgaRuntimeSettings);
    OgaDestroyMtpGenerator(*mut OgaMtpGenerator);
    OgaDestroySpeculativeStats(*mut OgaSpeculativeStats);
    OgaDestroyEngine(*mut OgaEngine);
    OgaDestroyEngineEventBuffer(*mut OgaEngineEventBuffer);
    OgaDestroyEngineCapabilities(*mut OgaEngineCapabilities);
    OgaDestroyRequest(*mut OgaRequest);
    OgaDestroyRequestOptions(*mut OgaRequestOptions);
    OgaDestroyTurnOptions(*mut OgaTurnOptions);
);

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
