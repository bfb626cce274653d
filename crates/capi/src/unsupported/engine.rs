//! The Engine / Request / Turn API: not implemented (the generator API is); each function fails
//! naming itself.

use super::*;
use crate::OgaResult;
use std::ffi::c_char;

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateEngine(
    _model: *mut crate::OgaModel,
    _out: *mut *mut OgaEngine,
) -> *mut OgaResult {
    unsupported(
        "OgaCreateEngine",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineCreateRequest(
    _engine: *mut OgaEngine,
    _request_options: *const OgaRequestOptions,
    _out: *mut *mut OgaRequest,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineCreateRequest",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateEngineEventBuffer(
    _engine: *mut OgaEngine,
    _capacity: usize,
    _out: *mut *mut OgaEngineEventBuffer,
) -> *mut OgaResult {
    unsupported(
        "OgaCreateEngineEventBuffer",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineRun(
    _engine: *mut OgaEngine,
    _buffer: *mut OgaEngineEventBuffer,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineRun",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineHasPendingRequests(
    _engine: *mut OgaEngine,
    _out: *mut bool,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineHasPendingRequests",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineGetCapabilities(
    _engine: *const OgaEngine,
    _out: *mut *mut OgaEngineCapabilities,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineGetCapabilities",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineCapabilitiesGetConfiguredMaxBatchSize(
    _capabilities: *const OgaEngineCapabilities,
    _out: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineCapabilitiesGetConfiguredMaxBatchSize",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineCapabilitiesGetMaxRequestLength(
    _capabilities: *const OgaEngineCapabilities,
    _out: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineCapabilitiesGetMaxRequestLength",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineCapabilitiesGetMaxScheduledTokens(
    _capabilities: *const OgaEngineCapabilities,
    _out: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineCapabilitiesGetMaxScheduledTokens",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineGetSpeculativeStats(
    _engine: *const OgaEngine,
    _out: *mut *mut OgaSpeculativeStats,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineGetSpeculativeStats",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineMaxDraftTokensPerProposal(
    _engine: *const OgaEngine,
    _out: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineMaxDraftTokensPerProposal",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventGetFlags(
    _event: *const OgaEngineEvent,
    _out: *mut u32,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineEventGetFlags",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventGetRequest(
    _event: *const OgaEngineEvent,
    _out: *mut *const OgaRequest,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineEventGetRequest",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventGetTurnId(
    _event: *const OgaEngineEvent,
    _out: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineEventGetTurnId",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventGetToken(
    _event: *const OgaEngineEvent,
    _out: *mut i32,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineEventGetToken",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventGetFinishReason(
    _event: *const OgaEngineEvent,
    _out: *mut u32,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineEventGetFinishReason",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventGetMatchedStopStringIndex(
    _event: *const OgaEngineEvent,
    _out: *mut i32,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineEventGetMatchedStopStringIndex",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventGetErrorCode(
    _event: *const OgaEngineEvent,
    _out: *mut u32,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineEventGetErrorCode",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaEngineEventGetUsage(
    _event: *const OgaEngineEvent,
    _out: *mut *const OgaTurnUsage,
) -> *mut OgaResult {
    unsupported(
        "OgaEngineEventGetUsage",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnUsageGetPromptTokens(
    _usage: *const OgaTurnUsage,
    _out: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnUsageGetPromptTokens",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnUsageGetGeneratedTokens(
    _usage: *const OgaTurnUsage,
    _out: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnUsageGetGeneratedTokens",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnUsageGetCachedPromptTokens(
    _usage: *const OgaTurnUsage,
    _out: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnUsageGetCachedPromptTokens",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateRequestOptions(_out: *mut *mut OgaRequestOptions) -> *mut OgaResult {
    unsupported(
        "OgaCreateRequestOptions",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaRequestOptionsSetMaxSessionTokens(
    _options: *mut OgaRequestOptions,
    _max_session_tokens: u64,
) -> *mut OgaResult {
    unsupported(
        "OgaRequestOptionsSetMaxSessionTokens",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaRequestBeginTurn(
    _request: *mut OgaRequest,
    _turn_options: *const OgaTurnOptions,
    _input_ids: *const i32,
    _input_ids_count: u64,
    _out_turn_id: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaRequestBeginTurn",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaRequestCancelTurn(
    _request: *mut OgaRequest,
    _turn_id: u64,
    _out_cancelled: *mut bool,
) -> *mut OgaResult {
    unsupported(
        "OgaRequestCancelTurn",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaRequestClose(_request: *mut OgaRequest) -> *mut OgaResult {
    unsupported(
        "OgaRequestClose",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaRequestRewindToStartOfTurn(
    _request: *mut OgaRequest,
    _turn_id: u64,
) -> *mut OgaResult {
    unsupported(
        "OgaRequestRewindToStartOfTurn",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaRequestSetDraftTokens(
    _request: *mut OgaRequest,
    _tokens: *const i32,
    _token_count: u64,
) -> *mut OgaResult {
    unsupported(
        "OgaRequestSetDraftTokens",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaRequestCreateTurnOptions(
    _request: *mut OgaRequest,
    _out: *mut *mut OgaTurnOptions,
) -> *mut OgaResult {
    unsupported(
        "OgaRequestCreateTurnOptions",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetMaxGeneratedTokens(
    _options: *mut OgaTurnOptions,
    _value: u64,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetMaxGeneratedTokens",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetMinGeneratedTokens(
    _options: *mut OgaTurnOptions,
    _value: u64,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetMinGeneratedTokens",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetDoSample(
    _options: *mut OgaTurnOptions,
    _value: bool,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetDoSample",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetTemperature(
    _options: *mut OgaTurnOptions,
    _value: f32,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetTemperature",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetTopP(
    _options: *mut OgaTurnOptions,
    _value: f32,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetTopP",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetTopK(
    _options: *mut OgaTurnOptions,
    _value: i32,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetTopK",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetRepetitionPenalty(
    _options: *mut OgaTurnOptions,
    _value: f32,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetRepetitionPenalty",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetNoRepeatNgramSize(
    _options: *mut OgaTurnOptions,
    _value: i32,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetNoRepeatNgramSize",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetSeed(
    _options: *mut OgaTurnOptions,
    _seed: u64,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetSeed",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsClearSeed(_options: *mut OgaTurnOptions) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsClearSeed",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetStopStrings(
    _options: *mut OgaTurnOptions,
    _stop_strings: *const crate::OgaStringArray,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetStopStrings",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetGuidance(
    _options: *mut OgaTurnOptions,
    _guidance_type: *const c_char,
    _guidance_data: *const c_char,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetGuidance",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsSetDelimitedGuidance(
    _options: *mut OgaTurnOptions,
    _guidance_type: *const c_char,
    _guidance_data: *const c_char,
    _start_delimiter: *const c_char,
    _end_delimiter: *const c_char,
) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsSetDelimitedGuidance",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsClearGuidance(_options: *mut OgaTurnOptions) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsClearGuidance",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}

/// Not supported by genai-bridge (the Engine / Request / Turn API is not implemented; use OgaGenerator): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaTurnOptionsReset(_options: *mut OgaTurnOptions) -> *mut OgaResult {
    unsupported(
        "OgaTurnOptionsReset",
        "the Engine / Request / Turn API is not implemented; use OgaGenerator",
    )
}
