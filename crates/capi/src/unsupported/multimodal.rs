//! Multimodal processors, images and audio: not implemented; each function fails naming itself.

use super::*;
use crate::OgaResult;
use std::ffi::{c_char, c_void};

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaLoadImage(
    _image_path: *const c_char,
    _images: *mut *mut OgaImages,
) -> *mut OgaResult {
    unsupported("OgaLoadImage", "multimodal input is not implemented")
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaLoadImages(
    _image_paths: *const crate::OgaStringArray,
    _images: *mut *mut OgaImages,
) -> *mut OgaResult {
    unsupported("OgaLoadImages", "multimodal input is not implemented")
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaLoadImagesFromBuffers(
    _image_data: *const *const c_void,
    _image_data_sizes: *const usize,
    _count: usize,
    _images: *mut *mut OgaImages,
) -> *mut OgaResult {
    unsupported(
        "OgaLoadImagesFromBuffers",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaLoadAudio(
    _audio_path: *const c_char,
    _audios: *mut *mut OgaAudios,
) -> *mut OgaResult {
    unsupported("OgaLoadAudio", "multimodal input is not implemented")
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaLoadAudios(
    _audio_paths: *const crate::OgaStringArray,
    _audios: *mut *mut OgaAudios,
) -> *mut OgaResult {
    unsupported("OgaLoadAudios", "multimodal input is not implemented")
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaLoadAudiosFromBuffers(
    _audio_data: *const *const c_void,
    _audio_data_sizes: *const usize,
    _count: usize,
    _audios: *mut *mut OgaAudios,
) -> *mut OgaResult {
    unsupported(
        "OgaLoadAudiosFromBuffers",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateMultiModalProcessor(
    _model: *const crate::OgaModel,
    _out: *mut *mut OgaMultiModalProcessor,
) -> *mut OgaResult {
    unsupported(
        "OgaCreateMultiModalProcessor",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaProcessorProcessImages(
    _processor: *const OgaMultiModalProcessor,
    _prompt: *const c_char,
    _images: *const OgaImages,
    _input_tensors: *mut *mut OgaNamedTensors,
) -> *mut OgaResult {
    unsupported(
        "OgaProcessorProcessImages",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaProcessorProcessImagesAndPrompts(
    _processor: *const OgaMultiModalProcessor,
    _prompts: *const crate::OgaStringArray,
    _images: *const OgaImages,
    _input_tensors: *mut *mut OgaNamedTensors,
) -> *mut OgaResult {
    unsupported(
        "OgaProcessorProcessImagesAndPrompts",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaProcessorProcessAudios(
    _processor: *const OgaMultiModalProcessor,
    _prompt: *const c_char,
    _audios: *const OgaAudios,
    _input_tensors: *mut *mut OgaNamedTensors,
) -> *mut OgaResult {
    unsupported(
        "OgaProcessorProcessAudios",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaProcessorProcessAudiosAndPrompts(
    _processor: *const OgaMultiModalProcessor,
    _prompts: *const crate::OgaStringArray,
    _audios: *const OgaAudios,
    _input_tensors: *mut *mut OgaNamedTensors,
) -> *mut OgaResult {
    unsupported(
        "OgaProcessorProcessAudiosAndPrompts",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaProcessorProcessImagesAndAudios(
    _processor: *const OgaMultiModalProcessor,
    _prompt: *const c_char,
    _images: *const OgaImages,
    _audios: *const OgaAudios,
    _input_tensors: *mut *mut OgaNamedTensors,
) -> *mut OgaResult {
    unsupported(
        "OgaProcessorProcessImagesAndAudios",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaProcessorProcessImagesAndAudiosAndPrompts(
    _processor: *const OgaMultiModalProcessor,
    _prompts: *const crate::OgaStringArray,
    _images: *const OgaImages,
    _audios: *const OgaAudios,
    _input_tensors: *mut *mut OgaNamedTensors,
) -> *mut OgaResult {
    unsupported(
        "OgaProcessorProcessImagesAndAudiosAndPrompts",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaProcessorDecode(
    _processor: *const OgaMultiModalProcessor,
    _tokens: *const i32,
    _token_count: usize,
    _out_string: *mut *const c_char,
) -> *mut OgaResult {
    unsupported("OgaProcessorDecode", "multimodal input is not implemented")
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateTokenizerStreamFromProcessor(
    _processor: *const OgaMultiModalProcessor,
    _out: *mut *mut crate::OgaTokenizerStream,
) -> *mut OgaResult {
    unsupported(
        "OgaCreateTokenizerStreamFromProcessor",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaCreateStreamingProcessor(
    _model: *mut crate::OgaModel,
    _out: *mut *mut OgaStreamingProcessor,
) -> *mut OgaResult {
    unsupported(
        "OgaCreateStreamingProcessor",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaStreamingProcessorProcess(
    _processor: *mut OgaStreamingProcessor,
    _audio_data: *const f32,
    _num_samples: usize,
    _out: *mut *mut OgaNamedTensors,
) -> *mut OgaResult {
    unsupported(
        "OgaStreamingProcessorProcess",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaStreamingProcessorFlush(
    _processor: *mut OgaStreamingProcessor,
    _out: *mut *mut OgaNamedTensors,
) -> *mut OgaResult {
    unsupported(
        "OgaStreamingProcessorFlush",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaStreamingProcessorSetOption(
    _processor: *mut OgaStreamingProcessor,
    _key: *const c_char,
    _value: *const c_char,
) -> *mut OgaResult {
    unsupported(
        "OgaStreamingProcessorSetOption",
        "multimodal input is not implemented",
    )
}

/// Not supported by genai-bridge (multimodal input is not implemented): returns an error result.
#[unsafe(no_mangle)]
pub extern "C" fn OgaStreamingProcessorGetOption(
    _processor: *const OgaStreamingProcessor,
    _key: *const c_char,
    _value: *mut *const c_char,
) -> *mut OgaResult {
    unsupported(
        "OgaStreamingProcessorGetOption",
        "multimodal input is not implemented",
    )
}
