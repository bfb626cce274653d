//! Raw serde structs shaped exactly like `genai_config.json` (ONNX Runtime GenAI 0.18): the root,
//! `model`, `model.decoder`, `search`, `speculative` and `engine`. Every key is optional here;
//! defaults and checks are applied when converting to [`crate::Config`].

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};

use crate::de::{EosTokenId, Int, Merge, NamedEntries, Opaque, StringMap, raw_struct};
pub use crate::raw_parts::*;
pub use crate::raw_session::*;

/// The whole file. Written by hand rather than derived because the official parser ignores
/// top-level keys whose value is a string, number, bool or null (they are listed in `ignored`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawConfig {
    /// `model`
    pub model: Option<RawModel>,
    /// `search`
    pub search: Option<RawSearch>,
    /// `speculative`
    pub speculative: Option<RawSpeculative>,
    /// `engine`
    pub engine: Option<RawEngine>,
    /// Top-level keys with scalar values, which the official parser skips without a word.
    pub ignored: Vec<String>,
}

impl Merge for RawConfig {
    fn merge(&mut self, other: Self) {
        self.model.merge(other.model);
        self.search.merge(other.search);
        self.speculative.merge(other.speculative);
        self.engine.merge(other.engine);
        self.ignored.extend(other.ignored);
    }
}

const ROOT_KEYS: &[&str] = &["model", "search", "speculative", "engine"];

/// A top-level value: an object is parsed as `T`; a scalar is skipped (official behaviour).
enum RootValue<T> {
    Object(T),
    Scalar,
}

struct RootValueSeed<T> {
    key: String,
    known: bool,
    _t: std::marker::PhantomData<T>,
}

impl<'de, T: Deserialize<'de>> de::DeserializeSeed<'de> for RootValueSeed<T> {
    type Value = RootValue<T>;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for RootValueSeed<T> {
    type Value = RootValue<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(RootValue::Scalar)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(RootValue::Scalar)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(RootValue::Scalar)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(RootValue::Scalar)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(RootValue::Scalar)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(RootValue::Scalar)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        if self.known {
            Err(de::Error::invalid_type(de::Unexpected::Seq, &self))
        } else {
            Err(de::Error::unknown_field(&self.key, ROOT_KEYS))
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        if !self.known {
            return Err(de::Error::unknown_field(&self.key, ROOT_KEYS));
        }
        T::deserialize(de::value::MapAccessDeserializer::new(map)).map(RootValue::Object)
    }
}

impl<'de> Deserialize<'de> for RawConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawConfig;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a genai_config.json object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawConfig, A::Error> {
                let mut cfg = RawConfig::default();
                while let Some(key) = map.next_key::<String>()? {
                    fn seed<T>(key: &str, known: bool) -> RootValueSeed<T> {
                        RootValueSeed {
                            key: key.to_string(),
                            known,
                            _t: std::marker::PhantomData,
                        }
                    }
                    let scalar = match key.as_str() {
                        "model" => store(&mut cfg.model, map.next_value_seed(seed(&key, true))?),
                        "search" => store(&mut cfg.search, map.next_value_seed(seed(&key, true))?),
                        "speculative" => {
                            store(&mut cfg.speculative, map.next_value_seed(seed(&key, true))?)
                        }
                        "engine" => store(&mut cfg.engine, map.next_value_seed(seed(&key, true))?),
                        _ => {
                            map.next_value_seed(seed::<IgnoredAny>(&key, false))?;
                            true
                        }
                    };
                    if scalar {
                        cfg.ignored.push(key);
                    }
                }
                Ok(cfg)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// Stores an object value (merging a repeated key like the official parser); says whether the
/// value was a skipped scalar.
fn store<T: Merge>(slot: &mut Option<T>, value: RootValue<T>) -> bool {
    match value {
        RootValue::Object(v) => {
            slot.merge(Some(v));
            false
        }
        RootValue::Scalar => true,
    }
}

raw_struct! {
    /// `model`
    pub struct RawModel {
        r#type: String,
        tokenizer_dir: String,
        vocab_size: Int,
        context_length: Int,
        pad_token_id: Int,
        eos_token_id: EosTokenId,
        bos_token_id: Int,
        decoder_start_token_id: Int,
        sep_token_id: Int,
        image_token_id: Int,
        audio_token_id: Int,
        boa_token_id: Int,
        video_token_id: Int,
        vision_start_token_id: Int,
        bot_token_id: Int,
        eot_token_id: Int,
        bor_token_id: Int,
        eor_token_id: Int,
        num_mels: Int,
        fft_size: Int,
        hop_length: Int,
        win_length: Int,
        preemph: f64,
        log_eps: f64,
        norm_eps: f64,
        subsampling_factor: Int,
        left_context: Int,
        conv_context: Int,
        pre_encode_cache_size: Int,
        sample_rate: Int,
        chunk_samples: Int,
        blank_id: Int,
        max_symbols_per_step: Int,
        left_context_samples: Int,
        right_context_samples: Int,
        tdt_durations: Vec<Int>,
        decoder: RawDecoder,
        draft: RawDecoder,
        encoder: RawEncoder,
        embedding: RawEmbedding,
        vision: RawVision,
        speech: RawSpeech,
        joiner: RawJoiner,
        vad: RawVad,
        mtp: RawMtp,
        dflash2: Opaque,
        dspark: Opaque,
        moonshine: Opaque,
        audio_output: Opaque,
    }
}

raw_struct! {
    /// `model.decoder` (also the shape of `model.draft`)
    pub struct RawDecoder {
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        hidden_size: Int,
        num_attention_heads: Int,
        num_key_value_heads: Int,
        num_hidden_layers: Int,
        head_size: Int,
        conv_cache_size: Int,
        inputs: RawDecoderInputs,
        outputs: RawDecoderOutputs,
        sliding_window: RawSlidingWindow,
        pipeline: NamedEntries<RawPipelineModel>,
        layer_types: Vec<String>,
        shared_initializers: Vec<RawSharedInitializer>,
        state_groups: Opaque,
        state_update_capacity: Int,
    }
}

crate::raw_parts::raw_names! {
    /// `model.decoder.inputs`: graph input names (`%d` templates for per-layer names)
    pub struct RawDecoderInputs {
        input_ids, inputs_embeds, attention_mask, position_ids,
        past_key_names, past_value_names, past_names,
        past_key_scale_names, past_value_scale_names, past_recurrent_names, past_conv_names,
        cross_past_key_names, cross_past_value_names,
        past_key_values_length, past_sequence_length, current_sequence_length,
        total_sequence_length, cache_indirection,
        encoder_hidden_states, encoder_attention_mask, rnn_states_prev,
        cumulative_sequence_lengths, past_sequence_lengths, block_table, block_table_windowed,
        attention_metadata, logits_indices, hidden_states, per_layer_inputs,
        targets, targets_length, lstm_hidden_state, lstm_cell_state,
        state_update_active, state_update_capture_count,
    }
}

crate::raw_parts::raw_names! {
    /// `model.decoder.outputs`: graph output names
    pub struct RawDecoderOutputs {
        logits, present_key_names, present_value_names, present_names,
        present_key_scale_names, present_value_scale_names, present_recurrent_names,
        present_conv_names, output_cross_qk_names, rnn_states, hidden_states, aux_hidden_states,
        outputs, outputs_length, lstm_hidden_state, lstm_cell_state,
        state_update_conv_value_names, state_update_recurrent_capsule_names,
    }
}

raw_struct! {
    /// `model.decoder.sliding_window`
    pub struct RawSlidingWindow {
        window_size: Int,
        pad_value: Int,
        alignment: String,
        slide_key_value_cache: bool,
        slide_inputs: bool,
        layers: Vec<Int>,
        cache_slack: Int,
    }
}

raw_struct! {
    /// `search`
    pub struct RawSearch {
        do_sample: bool,
        min_length: Int,
        max_length: Int,
        batch_size: Int,
        num_beams: Int,
        num_return_sequences: Int,
        top_k: Int,
        top_p: f64,
        temperature: f64,
        repetition_penalty: f64,
        length_penalty: f64,
        no_repeat_ngram_size: Int,
        diversity_penalty: f64,
        early_stopping: bool,
        past_present_share_buffer: bool,
        random_seed: Int,
        chunk_size: f64,
        blank_penalty: f64,
        audio_interleaved: bool,
        audio_temperature: f64,
        audio_top_k: Int,
    }
}

raw_struct! {
    /// `speculative`
    pub struct RawSpeculative {
        max_draft_tokens: Int,
        ngram_size: Int,
        ngram_chained_lookup: bool,
        min_adaptive_k: Int,
        cooldown: bool,
    }
}

raw_struct! {
    /// `engine`
    pub struct RawEngine {
        dynamic_batching: RawDynamicBatching,
        static_batching: RawStaticBatching,
    }
}

raw_struct! {
    /// `engine.dynamic_batching`
    pub struct RawDynamicBatching {
        block_size: Int,
        num_blocks: Int,
        gpu_utilization_factor: f64,
        max_batch_size: Int,
        max_scheduled_tokens: Int,
        prefix_caching: bool,
        dflash2_max_snapshots: Int,
    }
}

raw_struct! {
    /// `engine.static_batching`
    pub struct RawStaticBatching {
        max_batch_size: Int,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_skips_scalars_like_the_official_parser() {
        let cfg: RawConfig =
            serde_json::from_str(r#"{"version": 3, "model": {"type": "llama"}, "note": "x"}"#)
                .unwrap();
        assert_eq!(cfg.ignored, vec!["version".to_string(), "note".to_string()]);
        assert_eq!(cfg.model.unwrap().r#type.as_deref(), Some("llama"));
    }

    #[test]
    fn root_rejects_unknown_objects() {
        let err = serde_json::from_str::<RawConfig>(r#"{"modle": {}}"#).unwrap_err();
        assert!(err.to_string().contains("unknown field `modle`"), "{err}");
    }

    #[test]
    fn nested_unknown_key_is_rejected() {
        let err = serde_json::from_str::<RawConfig>(r#"{"search": {"max_lenght": 5}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `max_lenght`"), "{err}");
    }

    #[test]
    fn null_is_rejected() {
        let err = serde_json::from_str::<RawConfig>(r#"{"search": {"do_sample": null}}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid type: null"), "{err}");
    }

    #[test]
    fn inputs_list_present_entries() {
        let i: RawDecoderInputs =
            serde_json::from_str(r#"{"input_ids": "ids", "block_table": "bt"}"#).unwrap();
        assert_eq!(
            i.entries(),
            vec![("input_ids", "ids"), ("block_table", "bt")]
        );
    }
}
