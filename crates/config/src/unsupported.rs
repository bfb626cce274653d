//! Lists the JSON paths of features a file asks for that a decoder-only LLM runtime does not
//! run: other model parts (vision, speech, encoder, ...), multi-file pipelines, paged or
//! recurrent caches, speech-only settings. The list lets a caller refuse or warn precisely.

use crate::model::DECODER_ONLY_LLM_TYPES;
use crate::names::{CORE_INPUTS, CORE_OUTPUTS};
use crate::raw::{RawConfig, RawDecoder, RawModel};

/// Paths, in file-schema order, of the features set in `raw` that are parsed but not run.
pub(crate) fn collect(raw: &RawConfig) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(model) = &raw.model {
        model_paths(model, &mut out);
    }
    if let Some(search) = &raw.search {
        let set = [
            ("blank_penalty", search.blank_penalty.is_some()),
            ("audio_interleaved", search.audio_interleaved.is_some()),
            ("audio_temperature", search.audio_temperature.is_some()),
            ("audio_top_k", search.audio_top_k.is_some()),
        ];
        push_set(&mut out, "search", &set);
    }
    out
}

fn push_set(out: &mut Vec<String>, prefix: &str, keys: &[(&str, bool)]) {
    for (key, present) in keys {
        if *present {
            out.push(format!("{prefix}.{key}"));
        }
    }
}

fn model_paths(m: &RawModel, out: &mut Vec<String>) {
    if let Some(t) = &m.r#type
        && !DECODER_ONLY_LLM_TYPES.contains(&t.as_str())
    {
        out.push("model.type".to_string());
    }
    let scalars = [
        ("image_token_id", m.image_token_id.is_some()),
        ("audio_token_id", m.audio_token_id.is_some()),
        ("boa_token_id", m.boa_token_id.is_some()),
        ("video_token_id", m.video_token_id.is_some()),
        ("vision_start_token_id", m.vision_start_token_id.is_some()),
        ("num_mels", m.num_mels.is_some()),
        ("fft_size", m.fft_size.is_some()),
        ("hop_length", m.hop_length.is_some()),
        ("win_length", m.win_length.is_some()),
        ("preemph", m.preemph.is_some()),
        ("log_eps", m.log_eps.is_some()),
        ("norm_eps", m.norm_eps.is_some()),
        ("subsampling_factor", m.subsampling_factor.is_some()),
        ("left_context", m.left_context.is_some()),
        ("conv_context", m.conv_context.is_some()),
        ("pre_encode_cache_size", m.pre_encode_cache_size.is_some()),
        ("sample_rate", m.sample_rate.is_some()),
        ("chunk_samples", m.chunk_samples.is_some()),
        ("blank_id", m.blank_id.is_some()),
        ("max_symbols_per_step", m.max_symbols_per_step.is_some()),
        ("left_context_samples", m.left_context_samples.is_some()),
        ("right_context_samples", m.right_context_samples.is_some()),
        ("tdt_durations", m.tdt_durations.is_some()),
    ];
    push_set(out, "model", &scalars);
    if let Some(d) = &m.decoder {
        decoder_paths(d, "model.decoder", out);
    }
    let sections = [
        ("draft", m.draft.is_some()),
        ("encoder", m.encoder.is_some()),
        ("embedding", m.embedding.is_some()),
        ("vision", m.vision.is_some()),
        ("speech", m.speech.is_some()),
        ("joiner", m.joiner.is_some()),
        ("vad", m.vad.is_some()),
        ("mtp", m.mtp.is_some()),
        ("dflash2", m.dflash2.is_some()),
        ("dspark", m.dspark.is_some()),
        ("moonshine", m.moonshine.is_some()),
        ("audio_output", m.audio_output.is_some()),
    ];
    push_set(out, "model", &sections);
}

fn decoder_paths(d: &RawDecoder, path: &str, out: &mut Vec<String>) {
    let parts = [
        ("conv_cache_size", d.conv_cache_size.is_some()),
        ("pipeline", d.pipeline.is_some()),
        ("layer_types", d.layer_types.is_some()),
        ("shared_initializers", d.shared_initializers.is_some()),
        ("state_groups", d.state_groups.is_some()),
        ("state_update_capacity", d.state_update_capacity.is_some()),
    ];
    push_set(out, path, &parts);
    if let Some(inputs) = &d.inputs {
        for (key, _) in inputs.entries() {
            if !CORE_INPUTS.contains(&key) {
                out.push(format!("{path}.inputs.{key}"));
            }
        }
    }
    if let Some(outputs) = &d.outputs {
        for (key, _) in outputs.entries() {
            if !CORE_OUTPUTS.contains(&key) {
                out.push(format!("{path}.outputs.{key}"));
            }
        }
    }
}
