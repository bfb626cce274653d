//! Extra model inputs, named tensors, adapters and in-memory model data: not implemented; each
//! function fails naming itself.

use super::*;
use crate::OgaResult;
use std::ffi::{c_char, c_void};

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateNamedTensors(_out: *mut *mut OgaNamedTensors) -> *mut OgaResult {
    unsupported(
        "OgaCreateNamedTensors",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaNamedTensorsGet(
    _named_tensors: *mut OgaNamedTensors,
    _name: *const c_char,
    _out: *mut *mut crate::OgaTensor,
) -> *mut OgaResult {
    unsupported(
        "OgaNamedTensorsGet",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaNamedTensorsSet(
    _named_tensors: *mut OgaNamedTensors,
    _name: *const c_char,
    _tensor: *mut crate::OgaTensor,
) -> *mut OgaResult {
    unsupported(
        "OgaNamedTensorsSet",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaNamedTensorsDelete(
    _named_tensors: *mut OgaNamedTensors,
    _name: *const c_char,
) -> *mut OgaResult {
    unsupported(
        "OgaNamedTensorsDelete",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaNamedTensorsCount(
    _named_tensors: *const OgaNamedTensors,
    _out: *mut usize,
) -> *mut OgaResult {
    unsupported(
        "OgaNamedTensorsCount",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaNamedTensorsGetNames(
    _named_tensors: *const OgaNamedTensors,
    _out: *mut *mut crate::OgaStringArray,
) -> *mut OgaResult {
    unsupported(
        "OgaNamedTensorsGetNames",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGenerator_SetModelInput(
    _generator: *mut crate::OgaGenerator,
    _name: *const c_char,
    _tensor: *mut crate::OgaTensor,
) -> *mut OgaResult {
    unsupported(
        "OgaGenerator_SetModelInput",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGenerator_SetInputs(
    _generator: *mut crate::OgaGenerator,
    _named_tensors: *const OgaNamedTensors,
) -> *mut OgaResult {
    unsupported(
        "OgaGenerator_SetInputs",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGenerator_GetInput(
    _generator: *const crate::OgaGenerator,
    _name: *const c_char,
    _out: *mut *mut crate::OgaTensor,
) -> *mut OgaResult {
    unsupported(
        "OgaGenerator_GetInput",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGenerator_SetHiddenStates(
    _generator: *mut crate::OgaGenerator,
    _hidden_states: *mut crate::OgaTensor,
) -> *mut OgaResult {
    unsupported(
        "OgaGenerator_SetHiddenStates",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (named model inputs and extra model inputs are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaGenerator_SnapshotState(
    _generator: *mut crate::OgaGenerator,
) -> *mut OgaResult {
    unsupported(
        "OgaGenerator_SnapshotState",
        "named model inputs and extra model inputs are not implemented",
    )
}

/// Not supported by genai-bridge (LoRA adapters are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateAdapters(
    _model: *const crate::OgaModel,
    _out: *mut *mut OgaAdapters,
) -> *mut OgaResult {
    unsupported("OgaCreateAdapters", "LoRA adapters are not implemented")
}

/// Not supported by genai-bridge (LoRA adapters are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaLoadAdapter(
    _adapters: *mut OgaAdapters,
    _adapter_file_path: *const c_char,
    _adapter_name: *const c_char,
) -> *mut OgaResult {
    unsupported("OgaLoadAdapter", "LoRA adapters are not implemented")
}

/// Not supported by genai-bridge (LoRA adapters are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaUnloadAdapter(
    _adapters: *mut OgaAdapters,
    _adapter_name: *const c_char,
) -> *mut OgaResult {
    unsupported("OgaUnloadAdapter", "LoRA adapters are not implemented")
}

/// Not supported by genai-bridge (LoRA adapters are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaSetActiveAdapter(
    _generator: *mut crate::OgaGenerator,
    _adapters: *mut OgaAdapters,
    _adapter_name: *const c_char,
) -> *mut OgaResult {
    unsupported("OgaSetActiveAdapter", "LoRA adapters are not implemented")
}

/// Not supported by genai-bridge (models are loaded from their folder; in-memory model data and runtime handles are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaConfigAddModelData(
    _config: *mut crate::OgaConfig,
    _model_filename: *const c_char,
    _model_data: *const c_void,
    _model_data_length: usize,
) -> *mut OgaResult {
    unsupported(
        "OgaConfigAddModelData",
        "models are loaded from their folder; in-memory model data and runtime handles are not implemented",
    )
}

/// Not supported by genai-bridge (models are loaded from their folder; in-memory model data and runtime handles are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaConfigRemoveModelData(
    _config: *mut crate::OgaConfig,
    _model_filename: *const c_char,
) -> *mut OgaResult {
    unsupported(
        "OgaConfigRemoveModelData",
        "models are loaded from their folder; in-memory model data and runtime handles are not implemented",
    )
}

/// Not supported by genai-bridge (models are loaded from their folder; in-memory model data and runtime handles are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateConfigFromPackageEp(
    _config_path: *const c_char,
    _ep: *const c_char,
    _out: *mut *mut crate::OgaConfig,
) -> *mut OgaResult {
    unsupported(
        "OgaCreateConfigFromPackageEp",
        "models are loaded from their folder; in-memory model data and runtime handles are not implemented",
    )
}

/// Not supported by genai-bridge (models are loaded from their folder; in-memory model data and runtime handles are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateRuntimeSettings(_out: *mut *mut OgaRuntimeSettings) -> *mut OgaResult {
    unsupported(
        "OgaCreateRuntimeSettings",
        "models are loaded from their folder; in-memory model data and runtime handles are not implemented",
    )
}

/// Not supported by genai-bridge (models are loaded from their folder; in-memory model data and runtime handles are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaRuntimeSettingsSetHandle(
    _settings: *mut OgaRuntimeSettings,
    _handle_name: *const c_char,
    _handle: *mut c_void,
) -> *mut OgaResult {
    unsupported(
        "OgaRuntimeSettingsSetHandle",
        "models are loaded from their folder; in-memory model data and runtime handles are not implemented",
    )
}

/// Not supported by genai-bridge (models are loaded from their folder; in-memory model data and runtime handles are not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateModelWithRuntimeSettings(
    _config_path: *const c_char,
    _settings: *const OgaRuntimeSettings,
    _out: *mut *mut crate::OgaModel,
) -> *mut OgaResult {
    unsupported(
        "OgaCreateModelWithRuntimeSettings",
        "models are loaded from their folder; in-memory model data and runtime handles are not implemented",
    )
}
