//! Generator semantics on a real model: ONNX Runtime's two KV cache modes agree, and rewinding
//! behaves as the official runtime does on ONNX Runtime and on the native CPU decoder.

mod common;

use common::*;
use genai_backend_ort::{Device, OrtDecoder, OrtOptions};
use genai_config::Config;
use genai_engine::Generator;

fn load(name: &str) -> (Config, OrtDecoder) {
    let config = Config::load(&repo_root().join("models/fixtures").join(name)).expect("config");
    let decoder = OrtDecoder::load(
        &config,
        &OrtOptions {
            device: Some(Device::Cpu),
            threads: Some(1),
        },
    )
    .expect("session");
    (config, decoder)
}

fn greedy(
    config: &Config,
    decoder: &OrtDecoder,
    share_buffer: bool,
    prompt: &[i32],
    max_length: usize,
) -> (Vec<i32>, Vec<f32>) {
    let mut search = config.search.clone();
    search.max_length = max_length;
    search.past_present_share_buffer = share_buffer;
    let mut generator = Generator::new(decoder, &config.model, &search).expect("generator");
    generator.append_tokens(prompt).expect("prompt");
    let mut last_logits = Vec::new();
    while !generator.is_done() {
        generator.generate_next_token().expect("step");
        if !generator.is_done() {
            last_logits = generator.logits().expect("logits").to_vec();
        }
    }
    (generator.sequence(0).expect("row").to_vec(), last_logits)
}

#[test]
fn static_and_growing_kv_caches_give_the_same_tokens_and_logits() {
    for name in ["qwen2-fp32-cpu", "llama-int4-cpu"] {
        let (config, decoder) = load(name);
        let prompt = [1, 100, 200, 300];
        let (shared, shared_logits) = greedy(&config, &decoder, true, &prompt, 40);
        let (growing, growing_logits) = greedy(&config, &decoder, false, &prompt, 40);
        assert_eq!(shared, growing, "{name}");
        assert!(shared.len() > prompt.len() + 4, "{name}: {shared:?}");
        let diff = shared_logits
            .iter()
            .zip(&growing_logits)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-4, "{name}: logits differ by {diff}");
    }
}

/// The official onnxruntime-genai 0.18.0 Python package on llama-fp32-cpu:
/// ```python
/// g = og.Generator(m, p)  # max_length 30
/// g.append_tokens([1, 100, 200, 300]); [g.generate_next_token() for _ in range(8)]
/// g.rewind_to(7); g.generate_next_token()   # -> prompt + [178, 226, 103, 305, 122]
/// g.rewind_to(4); g.append_tokens([5, 6]); g.generate_next_token()   # -> prompt + [5, 6, 29]
/// ```
fn native(config: &Config) -> genai_backend_native::CpuDecoder {
    let model = genai_onnx::OnnxModel::load(&config.decoder_path()).expect("model");
    let plan = genai_frontend::lift(&model, config).expect("lift");
    genai_backend_native::CpuDecoder::load(&model, &plan, &Default::default()).expect("native")
}

#[test]
fn rewind_matches_the_official_runtime() {
    let (config, ort) = load("llama-fp32-cpu");
    let native = native(&config);
    let decoders: [(&dyn genai_engine::Decoder, bool); 3] =
        [(&ort, true), (&ort, false), (&native, true)];
    for (decoder, share_buffer) in decoders {
        let mut search = config.search.clone();
        search.max_length = 30;
        search.past_present_share_buffer = share_buffer;
        let mut g = Generator::new(decoder, &config.model, &search).expect("generator");
        g.append_tokens(&[1, 100, 200, 300]).expect("prompt");
        for _ in 0..8 {
            g.generate_next_token().expect("step");
        }
        assert_eq!(
            g.sequence(0).unwrap(),
            &[1, 100, 200, 300, 178, 226, 103, 305, 122, 418, 136, 87]
        );
        g.rewind_to(7).expect("rewind");
        assert_eq!(g.sequence(0).unwrap(), &[1, 100, 200, 300, 178, 226, 103]);
        g.generate_next_token().expect("step");
        assert_eq!(
            g.sequence(0).unwrap(),
            &[1, 100, 200, 300, 178, 226, 103, 305, 122]
        );
        assert_eq!(g.next_tokens(), &[122]);
        g.rewind_to(4).expect("rewind");
        g.append_tokens(&[5, 6]).expect("append");
        g.generate_next_token().expect("step");
        assert_eq!(
            g.sequence(0).unwrap(),
            &[1, 100, 200, 300, 5, 6, 29],
            "share_buffer {share_buffer}"
        );
    }
}
