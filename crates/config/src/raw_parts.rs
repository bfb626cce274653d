//! Raw serde structs for the sections this crate parses but does not run: encoder, embedding,
//! vision, speech, joiner, vad, mtp, decoder pipeline stages and shared initializers. Their key
//! sets follow ONNX Runtime GenAI 0.18 so that valid files load and typos are still caught.

use crate::de::{Int, Int64, NamedEntries, StringMap, raw_struct};
use crate::raw_session::RawSessionOptions;

/// Declares a raw struct whose fields are all strings (input/output name maps) and gives it
/// `entries()`, the keys present in the file with their values, in declaration order.
macro_rules! raw_names {
    (
        $(#[$meta:meta])*
        pub struct $name:ident { $($field:ident),* $(,)? }
    ) => {
        crate::de::raw_struct! {
            $(#[$meta])*
            pub struct $name { $($field: String),* }
        }

        impl $name {
            /// The keys that the file sets, with their values.
            pub fn entries(&self) -> Vec<(&'static str, &str)> {
                let mut out = Vec::new();
                $(
                    if let Some(v) = &self.$field {
                        out.push((stringify!($field), v.as_str()));
                    }
                )*
                out
            }
        }
    };
}
pub(crate) use raw_names;

raw_struct! {
    /// `model.decoder.pipeline.<name>`: one stage of a multi-file decoder
    pub struct RawPipelineModel {
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        inputs: Vec<String>,
        outputs: Vec<String>,
        output_names_forwarder: StringMap,
        run_on_prompt: bool,
        run_on_token_gen: bool,
        is_lm_head: bool,
        inherit_session_options: bool,
        reset_session_idx: Int,
    }
}

raw_struct! {
    /// `model.decoder.shared_initializers[i]`
    pub struct RawSharedInitializer {
        name: String,
        data_file: String,
        offset: String,
        length: String,
        data_type: Int,
        shape: Vec<Int64>,
    }
}

raw_struct! {
    /// `model.encoder`
    pub struct RawEncoder {
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        hidden_size: Int,
        num_attention_heads: Int,
        num_hidden_layers: Int,
        num_key_value_heads: Int,
        head_size: Int,
        inputs: RawEncoderInputs,
        outputs: RawEncoderOutputs,
    }
}

raw_names! {
    /// `model.encoder.inputs`
    pub struct RawEncoderInputs {
        input_ids, inputs_embeds, attention_mask, position_ids, audio_features, input_lengths,
        cache_last_channel, cache_last_time, cache_last_channel_len, lang_id,
    }
}

raw_names! {
    /// `model.encoder.outputs`
    pub struct RawEncoderOutputs {
        encoder_outputs, encoder_hidden_states, cross_present_key_names, cross_present_value_names,
        output_lengths, cache_last_channel_next, cache_last_time_next, cache_last_channel_len_next,
    }
}

raw_struct! {
    /// `model.embedding`
    pub struct RawEmbedding {
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        inputs: RawEmbeddingInputs,
        outputs: RawEmbeddingOutputs,
    }
}

raw_names! {
    /// `model.embedding.inputs`
    pub struct RawEmbeddingInputs { input_ids, image_features, audio_features }
}

raw_names! {
    /// `model.embedding.outputs`
    pub struct RawEmbeddingOutputs { inputs_embeds, per_layer_inputs }
}

raw_struct! {
    /// `model.vision`
    pub struct RawVision {
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        config_filename: String,
        adapter_filename: String,
        spatial_merge_size: Int,
        tokens_per_second: f64,
        num_visual_tokens: Int,
        max_num_patches: Int,
        patch_size: Int,
        window_size: Int,
        pipeline: NamedEntries<RawVisionPipelineModel>,
        inputs: RawVisionInputs,
        outputs: RawVisionOutputs,
    }
}

raw_struct! {
    /// `model.vision.pipeline.<name>`
    pub struct RawVisionPipelineModel {
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        inputs: Vec<String>,
        outputs: Vec<String>,
        run_on_cpu: bool,
    }
}

raw_names! {
    /// `model.vision.inputs`
    pub struct RawVisionInputs {
        pixel_values, pixel_position_ids, image_sizes, image_grid_thw, attention_mask,
    }
}

raw_names! {
    /// `model.vision.outputs`
    pub struct RawVisionOutputs { image_features }
}

raw_struct! {
    /// `model.speech`
    pub struct RawSpeech {
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        config_filename: String,
        adapter_filename: String,
        inputs: RawSpeechInputs,
        outputs: RawSpeechOutputs,
    }
}

raw_names! {
    /// `model.speech.inputs`
    pub struct RawSpeechInputs {
        audio_embeds, attention_mask, audio_sizes, audio_lengths, audio_projection_mode,
    }
}

raw_names! {
    /// `model.speech.outputs`
    pub struct RawSpeechOutputs { audio_features }
}

raw_struct! {
    /// `model.joiner`
    pub struct RawJoiner {
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        inputs: RawJoinerInputs,
        outputs: RawJoinerOutputs,
    }
}

raw_names! {
    /// `model.joiner.inputs`
    pub struct RawJoinerInputs { encoder_outputs, decoder_outputs }
}

raw_names! {
    /// `model.joiner.outputs`
    pub struct RawJoinerOutputs { logits }
}

raw_struct! {
    /// `model.vad`
    pub struct RawVad {
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        threshold: f64,
        silence_duration_ms: Int,
        prefix_padding_ms: Int,
    }
}

raw_struct! {
    /// `model.mtp`: a multi-token-prediction head
    pub struct RawMtp {
        enabled: bool,
        filename: String,
        session_options: RawSessionOptions,
        run_options: StringMap,
        shared_initializers: Vec<RawSharedInitializer>,
        num_hidden_layers: Int,
        num_key_value_heads: Int,
        head_size: Int,
        main_hidden_states: String,
        inputs: RawMtpInputs,
        outputs: RawMtpOutputs,
    }
}

raw_names! {
    /// `model.mtp.inputs`
    pub struct RawMtpInputs {
        input_ids, hidden_states, attention_mask, position_ids, past_key_names, past_value_names,
    }
}

raw_names! {
    /// `model.mtp.outputs`
    pub struct RawMtpOutputs { logits, hidden_states, present_key_names, present_value_names }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_stage_rejects_unknown_keys() {
        let err = serde_json::from_str::<RawPipelineModel>(r#"{"filename": "a", "run_on": true}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `run_on`"), "{err}");
    }

    #[test]
    fn vision_parses_object_style_pipeline() {
        let v: RawVision = serde_json::from_str(
            r#"{"pipeline": {"patch_embed": {"filename": "a.onnx", "run_on_cpu": true}}}"#,
        )
        .unwrap();
        let stages = v.pipeline.unwrap().0;
        assert_eq!(stages[0].0, "patch_embed");
        assert_eq!(stages[0].1.run_on_cpu, Some(true));
    }
}
