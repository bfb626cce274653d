//! Speculative decoding, multi-token-prediction generators and guidance: not implemented; each
//! function fails naming itself.

use super::*;
use crate::OgaResult;
use std::ffi::c_char;

/// Not supported by genai-bridge (guidance (constrained decoding) is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGeneratorParamsSetGuidance(
    _params: *mut crate::OgaGeneratorParams,
    _type: *const c_char,
    _data: *const c_char,
    _enable_ff_tokens: bool,
) -> *mut OgaResult {
    unsupported(
        "OgaGeneratorParamsSetGuidance",
        "guidance (constrained decoding) is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGeneratorParamsSetSpeculativeNumber(
    _params: *mut crate::OgaGeneratorParams,
    _name: *const c_char,
    _value: f64,
) -> *mut OgaResult {
    unsupported(
        "OgaGeneratorParamsSetSpeculativeNumber",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGeneratorParamsGetSpeculativeNumber(
    _params: *const crate::OgaGeneratorParams,
    _name: *const c_char,
    _value: *mut f64,
) -> *mut OgaResult {
    unsupported(
        "OgaGeneratorParamsGetSpeculativeNumber",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGeneratorParamsSetSpeculativeBool(
    _params: *mut crate::OgaGeneratorParams,
    _name: *const c_char,
    _value: bool,
) -> *mut OgaResult {
    unsupported(
        "OgaGeneratorParamsSetSpeculativeBool",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGeneratorParamsGetSpeculativeBool(
    _params: *const crate::OgaGeneratorParams,
    _name: *const c_char,
    _value: *mut bool,
) -> *mut OgaResult {
    unsupported(
        "OgaGeneratorParamsGetSpeculativeBool",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGenerator_GetSpeculativeStats(
    _generator: *const crate::OgaGenerator,
    _out: *mut *mut OgaSpeculativeStats,
) -> *mut OgaResult {
    unsupported(
        "OgaGenerator_GetSpeculativeStats",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaSpeculativeStatsGetCount(
    _stats: *const OgaSpeculativeStats,
    _name: *const c_char,
    _value: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaSpeculativeStatsGetCount",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaSpeculativeStatsGetNumber(
    _stats: *const OgaSpeculativeStats,
    _name: *const c_char,
    _value: *mut f64,
) -> *mut OgaResult {
    unsupported(
        "OgaSpeculativeStatsGetNumber",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaSpeculativeStatsGetBool(
    _stats: *const OgaSpeculativeStats,
    _name: *const c_char,
    _value: *mut bool,
) -> *mut OgaResult {
    unsupported(
        "OgaSpeculativeStatsGetBool",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaSpeculativeStatsGetAcceptanceLengthCount(
    _stats: *const OgaSpeculativeStats,
    _index: usize,
    _value: *mut u64,
) -> *mut OgaResult {
    unsupported(
        "OgaSpeculativeStatsGetAcceptanceLengthCount",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaSpeculativeStatsGetAcceptanceLengthHistogramSize(
    _stats: *const OgaSpeculativeStats,
    _value: *mut usize,
) -> *mut OgaResult {
    unsupported(
        "OgaSpeculativeStatsGetAcceptanceLengthHistogramSize",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateMtpGenerator(
    _main_model: *const crate::OgaModel,
    _mtp_model: *const crate::OgaModel,
    _params: *const crate::OgaGeneratorParams,
    _out: *mut *mut OgaMtpGenerator,
) -> *mut OgaResult {
    unsupported(
        "OgaCreateMtpGenerator",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_AppendTokens(
    _generator: *mut OgaMtpGenerator,
    _input_ids: *const i32,
    _input_ids_count: usize,
) -> *mut OgaResult {
    unsupported(
        "OgaMtpGenerator_AppendTokens",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_GenerateNextToken(
    _generator: *mut OgaMtpGenerator,
) -> *mut OgaResult {
    unsupported(
        "OgaMtpGenerator_GenerateNextToken",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_GetSpeculativeStats(
    _generator: *const OgaMtpGenerator,
    _out: *mut *mut OgaSpeculativeStats,
) -> *mut OgaResult {
    unsupported(
        "OgaMtpGenerator_GetSpeculativeStats",
        "speculative decoding is not implemented",
    )
}

/// Not supported by genai-bridge (speculative decoding is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaMtpGenerator_Reset(_generator: *mut OgaMtpGenerator) -> *mut OgaResult {
    unsupported(
        "OgaMtpGenerator_Reset",
        "speculative decoding is not implemented",
    )
}
