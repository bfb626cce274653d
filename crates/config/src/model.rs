//! The validated `model` section: model type, special token ids, sizes, and the decoder (file,
//! session options, shapes, graph names, sliding window).

use crate::Error;
use crate::check::{non_negative, positive, relative_path};
use crate::names::{DecoderInputs, DecoderOutputs};
use crate::raw::{RawDecoder, RawModel, RawSlidingWindow};
use crate::session::SessionOptions;

/// Model types that ONNX Runtime GenAI 0.18 runs as a plain decoder-only language model.
pub const DECODER_ONLY_LLM_TYPES: &[&str] = &[
    "chatglm",
    "decoder",
    "ernie4_5",
    "gemma",
    "gemma2",
    "gemma3_text",
    "gemma3_vl_text",
    "gemma4_text",
    "gpt2",
    "gptoss",
    "granite",
    "granitemoehybrid",
    "hunyuandensev1",
    "internlm2",
    "lfm2",
    "lfm2_audio_text",
    "lfm2_moe",
    "lfm2_vl_text",
    "llama",
    "mistral",
    "mistral3_text",
    "nemotron",
    "olmo",
    "phi",
    "phi3",
    "phi3small",
    "phimoe",
    "qwen2",
    "qwen2_5_vl_text",
    "qwen3",
    "qwen3_5_moe_text",
    "qwen3_5_text",
    "qwen3_vl_text",
    "smollm3",
];

/// The `model` section, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// `type` as written (e.g. `llama`, `qwen2`, `gpt2`).
    pub model_type: String,
    /// `bos_token_id`, if set (the official runtime uses 0 when it is not).
    pub bos_token_id: Option<i32>,
    /// `eos_token_id` as a list; `[pad_token_id]` when the file gives none (official rule).
    pub eos_token_ids: Vec<i32>,
    /// `pad_token_id` (0 when absent, as in the official runtime).
    pub pad_token_id: i32,
    /// `context_length`: the longest total sequence the model supports.
    pub context_length: usize,
    /// `vocab_size`: the width of the logits.
    pub vocab_size: usize,
    /// `decoder`
    pub decoder: Decoder,
    /// `tokenizer_dir`, relative to the model folder, if set.
    pub tokenizer_dir: Option<String>,
    /// `sep_token_id`, if set.
    pub sep_token_id: Option<i32>,
    /// `decoder_start_token_id`, if set.
    pub decoder_start_token_id: Option<i32>,
    /// Tool-call start/end and reasoning start/end ids (`bot_`/`eot_`/`bor_`/`eor_token_id`).
    pub tool_and_reasoning_ids: ToolAndReasoningIds,
}

/// Optional tool-calling and reasoning token ids.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolAndReasoningIds {
    /// `bot_token_id`: beginning of a tool call.
    pub bot: Option<i32>,
    /// `eot_token_id`: end of a tool call.
    pub eot: Option<i32>,
    /// `bor_token_id`: beginning of reasoning.
    pub bor: Option<i32>,
    /// `eor_token_id`: end of reasoning.
    pub eor: Option<i32>,
}

impl Model {
    /// Whether `model_type` is one that the official runtime runs as a decoder-only LLM.
    pub fn is_decoder_only_llm(&self) -> bool {
        DECODER_ONLY_LLM_TYPES.contains(&self.model_type.as_str())
    }

    /// Whether `token` is one of the end-of-sequence ids.
    pub fn is_eos(&self, token: i32) -> bool {
        self.eos_token_ids.contains(&token)
    }
}

/// `model.decoder`, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoder {
    /// The ONNX file, relative to the model folder.
    pub filename: String,
    /// `session_options`
    pub session_options: SessionOptions,
    /// `run_options`: ONNX Runtime run config entries, in file order.
    pub run_options: Vec<(String, String)>,
    /// `head_size`
    pub head_size: usize,
    /// `hidden_size`; `num_attention_heads * head_size` when the file omits it.
    pub hidden_size: usize,
    /// `num_attention_heads`; `num_key_value_heads` when the file omits it.
    pub num_attention_heads: usize,
    /// `num_key_value_heads`
    pub num_key_value_heads: usize,
    /// `num_hidden_layers`
    pub num_hidden_layers: usize,
    /// Graph input names.
    pub inputs: DecoderInputs,
    /// Graph output names.
    pub outputs: DecoderOutputs,
    /// `sliding_window`, if set.
    pub sliding_window: Option<SlidingWindow>,
}

/// `model.decoder.sliding_window`: prompt processing in windows (and windowed KV cache).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlidingWindow {
    /// `window_size`
    pub window_size: usize,
    /// `pad_value` for inactive cache slots (default 0).
    pub pad_value: i32,
    /// `alignment` (default right).
    pub alignment: Alignment,
    /// `slide_key_value_cache` (default true).
    pub slide_key_value_cache: bool,
    /// `slide_inputs` (default true).
    pub slide_inputs: bool,
    /// `layers` using sliding-window attention; empty means all.
    pub layers: Vec<usize>,
    /// `cache_slack`: extra cache slots beyond the window (0 = provider default).
    pub cache_slack: usize,
}

/// `sliding_window.alignment`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alignment {
    /// `"left"`
    Left,
    /// `"right"`
    Right,
}

impl Model {
    /// Validates the raw `model` section.
    pub(crate) fn from_raw(raw: &RawModel) -> Result<Model, Error> {
        let model_type = match raw.r#type.as_deref() {
            Some(t) if !t.is_empty() => t.to_string(),
            _ => {
                return Err(Error::invalid(
                    "model.type",
                    "missing; set it to the architecture name, e.g. \"llama\"",
                ));
            }
        };
        let context_length = positive(
            raw.context_length,
            "model.context_length",
            "the longest sequence the model supports",
        )?;
        let vocab_size = positive(
            raw.vocab_size,
            "model.vocab_size",
            "the number of logits per token",
        )?;
        let pad_token_id = raw.pad_token_id.map_or(0, |v| v.0);
        let mut eos_token_ids = raw
            .eos_token_id
            .as_ref()
            .map(|e| e.ids())
            .unwrap_or_default();
        if eos_token_ids.is_empty() {
            eos_token_ids.push(pad_token_id);
        }
        let bos_token_id = raw.bos_token_id.map(|v| v.0);
        let in_vocab = |id: i32, path: &str| -> Result<(), Error> {
            if id < 0 || id as usize >= vocab_size {
                return Err(Error::invalid(
                    path,
                    format!(
                        "token id {id} is outside the vocabulary [0, {vocab_size}); fix the id or \
                         model.vocab_size"
                    ),
                ));
            }
            Ok(())
        };
        let eos_is_list = matches!(raw.eos_token_id, Some(crate::de::EosTokenId::Many(_)));
        for (i, &id) in eos_token_ids.iter().enumerate() {
            let path = match (&raw.eos_token_id, eos_is_list) {
                (Some(_), true) => format!("model.eos_token_id[{i}]"),
                (Some(_), false) => "model.eos_token_id".to_string(),
                (None, _) => "model.pad_token_id".to_string(),
            };
            in_vocab(id, &path)?;
        }
        if let Some(id) = bos_token_id {
            in_vocab(id, "model.bos_token_id")?;
        }
        in_vocab(pad_token_id, "model.pad_token_id")?;
        if let Some(dir) = &raw.tokenizer_dir {
            relative_path(dir, "model.tokenizer_dir")?;
        }
        let decoder = match &raw.decoder {
            Some(d) => Decoder::from_raw(d, "model.decoder")?,
            None => {
                return Err(Error::invalid(
                    "model.decoder",
                    "missing; the decoder section names the ONNX file and its shapes",
                ));
            }
        };
        Ok(Model {
            model_type,
            bos_token_id,
            eos_token_ids,
            pad_token_id,
            context_length,
            vocab_size,
            decoder,
            tokenizer_dir: raw.tokenizer_dir.clone(),
            sep_token_id: raw.sep_token_id.map(|v| v.0),
            decoder_start_token_id: raw.decoder_start_token_id.map(|v| v.0),
            tool_and_reasoning_ids: ToolAndReasoningIds {
                bot: raw.bot_token_id.map(|v| v.0),
                eot: raw.eot_token_id.map(|v| v.0),
                bor: raw.bor_token_id.map(|v| v.0),
                eor: raw.eor_token_id.map(|v| v.0),
            },
        })
    }
}

impl Decoder {
    /// Validates a raw decoder found at JSON path `path`.
    pub(crate) fn from_raw(raw: &RawDecoder, path: &str) -> Result<Decoder, Error> {
        let p = |key: &str| format!("{path}.{key}");
        let filename = match raw.filename.as_deref() {
            Some(f) if !f.is_empty() => f.to_string(),
            _ => {
                return Err(Error::invalid(
                    p("filename"),
                    "missing; name the decoder ONNX file",
                ));
            }
        };
        relative_path(&filename, &p("filename"))?;
        let head_size = positive(
            raw.head_size,
            &p("head_size"),
            "the size of one attention head",
        )?;
        let num_hidden_layers = positive(
            raw.num_hidden_layers,
            &p("num_hidden_layers"),
            "the number of layers",
        )?;
        let num_key_value_heads = positive(
            raw.num_key_value_heads,
            &p("num_key_value_heads"),
            "the number of KV heads",
        )?;
        let num_attention_heads = match raw.num_attention_heads {
            None => num_key_value_heads,
            v => positive(v, &p("num_attention_heads"), "the number of query heads")?,
        };
        if num_attention_heads % num_key_value_heads != 0 {
            return Err(Error::invalid(
                p("num_attention_heads"),
                format!(
                    "{num_attention_heads} is not a multiple of {path}.num_key_value_heads \
                     ({num_key_value_heads}); each KV head must serve a whole group of query heads"
                ),
            ));
        }
        let hidden_size = match raw.hidden_size {
            None => num_attention_heads.saturating_mul(head_size),
            v => positive(v, &p("hidden_size"), "the model width")?,
        };
        let session_options = match &raw.session_options {
            Some(s) => SessionOptions::from_raw(s, &p("session_options"))?,
            None => SessionOptions::default(),
        };
        let inputs =
            DecoderInputs::from_raw(&raw.inputs.clone().unwrap_or_default(), &p("inputs"))?;
        let outputs =
            DecoderOutputs::from_raw(&raw.outputs.clone().unwrap_or_default(), &p("outputs"))?;
        if inputs.past.is_combined() != outputs.present.is_combined() {
            let (given, missing) = if inputs.past.is_combined() {
                ("inputs.past_names", "outputs.present_names")
            } else {
                ("outputs.present_names", "inputs.past_names")
            };
            return Err(Error::invalid(
                format!("{path}.{missing}"),
                format!("missing while {path}.{given} is set; combined KV names need both"),
            ));
        }
        let sliding_window = match &raw.sliding_window {
            Some(w) => Some(SlidingWindow::from_raw(
                w,
                &p("sliding_window"),
                num_hidden_layers,
            )?),
            None => None,
        };
        Ok(Decoder {
            filename,
            session_options,
            run_options: raw
                .run_options
                .as_ref()
                .map(|r| r.0.clone())
                .unwrap_or_default(),
            head_size,
            hidden_size,
            num_attention_heads,
            num_key_value_heads,
            num_hidden_layers,
            inputs,
            outputs,
            sliding_window,
        })
    }
}

impl SlidingWindow {
    fn from_raw(raw: &RawSlidingWindow, path: &str, layers: usize) -> Result<Self, Error> {
        let window_size = positive(
            raw.window_size,
            &format!("{path}.window_size"),
            "the window length in tokens",
        )?;
        let alignment = match raw.alignment.as_deref() {
            None | Some("right") => Alignment::Right,
            Some("left") => Alignment::Left,
            Some(other) => {
                return Err(Error::invalid(
                    format!("{path}.alignment"),
                    format!("\"{other}\" is not \"left\" or \"right\""),
                ));
            }
        };
        let mut layer_list = Vec::new();
        for (i, l) in raw.layers.iter().flatten().enumerate() {
            let lpath = format!("{path}.layers[{i}]");
            let l = non_negative(Some(*l), &lpath, 0)?;
            if l >= layers {
                return Err(Error::invalid(
                    lpath,
                    format!("layer {l} does not exist; the decoder has {layers} layers"),
                ));
            }
            layer_list.push(l);
        }
        Ok(SlidingWindow {
            window_size,
            pad_value: raw.pad_value.map_or(0, |v| v.0),
            alignment,
            slide_key_value_cache: raw.slide_key_value_cache.unwrap_or(true),
            slide_inputs: raw.slide_inputs.unwrap_or(true),
            layers: layer_list,
            cache_slack: non_negative(raw.cache_slack, &format!("{path}.cache_slack"), 0)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llm_type_list_is_sorted_and_unique() {
        let mut sorted = DECODER_ONLY_LLM_TYPES.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted, DECODER_ONLY_LLM_TYPES);
        for t in [
            "llama", "qwen2", "qwen3", "mistral", "phi3", "gemma2", "gpt2",
        ] {
            assert!(DECODER_ONLY_LLM_TYPES.contains(&t), "{t}");
        }
        for t in ["whisper", "phi3v", "qwen2_5_vl", "decoder-pipeline"] {
            assert!(!DECODER_ONLY_LLM_TYPES.contains(&t), "{t}");
        }
    }

    #[test]
    fn sliding_window_alignment_is_checked() {
        let raw = RawSlidingWindow {
            window_size: Some(crate::de::Int(8)),
            alignment: Some("center".into()),
            ..Default::default()
        };
        let e = SlidingWindow::from_raw(&raw, "model.decoder.sliding_window", 2).unwrap_err();
        assert_eq!(
            e.to_string(),
            "model.decoder.sliding_window.alignment: \"center\" is not \"left\" or \"right\""
        );
    }
}
