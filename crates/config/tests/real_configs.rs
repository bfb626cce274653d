//! Loads real configs: ONNX Runtime GenAI's own tiny GPT-2 test model (from the shared
//! conformance data) and configs shaped like what the official 0.18 builder writes for
//! Llama and Qwen2 models, on CPU and CUDA.

use std::path::{Path, PathBuf};

use genai_config::{Config, KvNames};

fn conformance_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/tiny-random-gpt2-fp32");
    assert!(
        dir.join("genai_config.json").is_file(),
        "conformance model missing at {}: the shared conformance data must be present",
        dir.display()
    );
    dir
}

/// A model folder holding `config` and an empty stand-in for each named file.
fn model_dir(config: &str, files: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("genai_config.json"), config).unwrap();
    for f in files {
        std::fs::write(dir.path().join(f), b"").unwrap();
    }
    dir
}

#[test]
fn tiny_gpt2_conformance_config() {
    let dir = conformance_dir();
    let c = Config::load(&dir).unwrap();
    let m = &c.model;
    assert_eq!(m.model_type, "gpt2");
    assert!(m.is_decoder_only_llm());
    assert_eq!((m.pad_token_id, m.bos_token_id), (98, Some(98)));
    assert_eq!(m.eos_token_ids, vec![98]);
    assert_eq!((m.vocab_size, m.context_length), (1000, 512));
    let d = &m.decoder;
    assert_eq!(d.filename, "past.onnx");
    assert_eq!(c.decoder_path(), dir.join("past.onnx"));
    assert_eq!(
        (d.num_key_value_heads, d.head_size, d.num_hidden_layers),
        (4, 8, 5)
    );
    // Not in the file: derived from the KV heads.
    assert_eq!((d.num_attention_heads, d.hidden_size), (4, 32));
    assert_eq!(
        d.session_options.config_entries,
        vec![(
            "session.use_device_allocator_for_initializers".to_string(),
            "0".to_string()
        )]
    );
    assert!(d.session_options.provider_options.is_empty());
    assert_eq!(
        d.run_options,
        vec![(
            "memory.enable_memory_arena_shrinkage".to_string(),
            String::new()
        )]
    );
    assert_eq!(d.inputs.past, KvNames::Combined("past_%d".into()));
    assert_eq!(d.inputs.past.combined(3).as_deref(), Some("past_3"));
    assert_eq!(d.outputs.present.combined(4).as_deref(), Some("present_4"));
    assert_eq!(d.inputs.input_ids, "input_ids");
    assert_eq!(d.inputs.attention_mask, "attention_mask");
    assert_eq!(d.inputs.position_ids, "position_ids");
    assert_eq!(d.outputs.logits, "logits");
    // No search section: every official default.
    let s = &c.search;
    assert_eq!(s.max_length, 512);
    assert_eq!((s.top_k, s.top_p, s.temperature), (50, 0.0, 1.0));
    assert!(!s.do_sample && s.early_stopping && !s.past_present_share_buffer);
    assert_eq!(s.random_seed, -1);
    assert!(c.unsupported.is_empty());
}

#[test]
fn tiny_gpt2_with_overlay_like_the_conformance_runs() {
    let c = Config::load(&conformance_dir()).unwrap();
    let c = c.with_overlay(r#"{"search": {"max_length": 20}}"#).unwrap();
    assert_eq!(c.search.max_length, 20);
    let e = c
        .with_overlay(r#"{"model": {"decoder": {"filename": "nope.onnx"}}}"#)
        .unwrap_err();
    assert!(e.to_string().starts_with("model.decoder.filename: "), "{e}");
    assert!(
        e.to_string()
            .ends_with("nope.onnx does not exist; put the file there or fix the name")
    );
}

const LLAMA_CPU_INT4: &str = r#"{
    "model": {
        "bos_token_id": 128000,
        "context_length": 131072,
        "decoder": {
            "session_options": {
                "log_id": "onnxruntime-genai",
                "provider_options": []
            },
            "filename": "model.onnx",
            "head_size": 64,
            "hidden_size": 2048,
            "inputs": {
                "input_ids": "input_ids",
                "attention_mask": "attention_mask",
                "past_key_names": "past_key_values.%d.key",
                "past_value_names": "past_key_values.%d.value"
            },
            "outputs": {
                "logits": "logits",
                "present_key_names": "present.%d.key",
                "present_value_names": "present.%d.value"
            },
            "num_attention_heads": 32,
            "num_hidden_layers": 16,
            "num_key_value_heads": 8
        },
        "eos_token_id": [128001, 128008, 128009],
        "pad_token_id": 128001,
        "type": "llama",
        "vocab_size": 128256
    },
    "search": {
        "diversity_penalty": 0.0,
        "do_sample": true,
        "early_stopping": true,
        "length_penalty": 1.0,
        "max_length": 131072,
        "min_length": 0,
        "no_repeat_ngram_size": 0,
        "num_beams": 1,
        "num_return_sequences": 1,
        "past_present_share_buffer": true,
        "repetition_penalty": 1.0,
        "temperature": 0.6,
        "top_k": 50,
        "top_p": 0.9
    }
}"#;

#[test]
fn llama_builder_config_cpu() {
    let dir = model_dir(LLAMA_CPU_INT4, &["model.onnx", "model.onnx.data"]);
    let c = Config::load(dir.path()).unwrap();
    assert_eq!(c.model.eos_token_ids, vec![128001, 128008, 128009]);
    let d = &c.model.decoder;
    assert_eq!(d.inputs.past.key(15), "past_key_values.15.key");
    assert_eq!(d.inputs.past.value(0), "past_key_values.0.value");
    assert_eq!(d.outputs.present.key(7), "present.7.key");
    assert!(!d.inputs.past.is_combined());
    assert_eq!(d.num_attention_heads / d.num_key_value_heads, 4);
    let s = &c.search;
    assert!(s.do_sample && !s.is_greedy());
    assert_eq!((s.max_length, s.top_k), (131072, 50));
    assert!((s.top_p - 0.9).abs() < 1e-6 && (s.temperature - 0.6).abs() < 1e-6);
    assert!(s.past_present_share_buffer);
    assert!(c.unsupported.is_empty());
}

const QWEN2_CUDA_FP16: &str = r#"{
    "model": {
        "bos_token_id": 151643,
        "context_length": 32768,
        "decoder": {
            "session_options": {
                "log_id": "onnxruntime-genai",
                "provider_options": [
                    {"cuda": {"enable_cuda_graph": "0"}}
                ]
            },
            "filename": "model.onnx",
            "head_size": 64,
            "hidden_size": 896,
            "inputs": {
                "input_ids": "input_ids",
                "attention_mask": "attention_mask",
                "past_key_names": "past_key_values.%d.key",
                "past_value_names": "past_key_values.%d.value"
            },
            "outputs": {
                "logits": "logits",
                "present_key_names": "present.%d.key",
                "present_value_names": "present.%d.value"
            },
            "num_attention_heads": 14,
            "num_hidden_layers": 24,
            "num_key_value_heads": 2
        },
        "eos_token_id": [151645, 151643],
        "pad_token_id": 151643,
        "type": "qwen2",
        "vocab_size": 151936
    },
    "search": {
        "diversity_penalty": 0.0,
        "do_sample": true,
        "early_stopping": true,
        "length_penalty": 1.0,
        "max_length": 32768,
        "min_length": 0,
        "no_repeat_ngram_size": 0,
        "num_beams": 1,
        "num_return_sequences": 1,
        "past_present_share_buffer": true,
        "repetition_penalty": 1.1,
        "temperature": 0.7,
        "top_k": 20,
        "top_p": 0.8
    }
}"#;

#[test]
fn qwen2_builder_config_cuda() {
    let dir = model_dir(QWEN2_CUDA_FP16, &["model.onnx"]);
    let c = Config::load(dir.path()).unwrap();
    assert_eq!(c.model.model_type, "qwen2");
    assert_eq!(c.model.eos_token_ids, vec![151645, 151643]);
    assert_eq!(c.model.pad_token_id, 151643);
    let so = &c.model.decoder.session_options;
    let cuda = so.primary_provider().unwrap();
    assert_eq!(cuda.name, "cuda");
    assert_eq!(
        cuda.options,
        vec![("enable_cuda_graph".to_string(), "0".to_string())]
    );
    assert_eq!(c.model.decoder.hidden_size, 896);
    assert!((c.search.repetition_penalty - 1.1).abs() < 1e-6);
    assert_eq!(c.search.top_k, 20);

    // Switching to CPU the way OgaConfigClearProviders + overlays are used keeps the rest.
    let c2 = c
        .with_overlay(r#"{"model": {"decoder": {"session_options": {"intra_op_num_threads": 2}}}, "search": {"do_sample": false}}"#)
        .unwrap();
    assert_eq!(
        c2.model.decoder.session_options.intra_op_num_threads,
        Some(2)
    );
    assert_eq!(c2.model.decoder.session_options.provider_options.len(), 1);
    assert!(c2.search.is_greedy());
}

#[test]
fn qwen2_with_provider_order_preserved() {
    let json = QWEN2_CUDA_FP16.replace(
        r#"{"cuda": {"enable_cuda_graph": "0"}}"#,
        r#"{"DmlExecutionProvider": {"device_id": "1"}}, {"cuda": {"b": "2", "a": "1"}}"#,
    );
    let dir = model_dir(&json, &["model.onnx"]);
    let c = Config::load(dir.path()).unwrap();
    let p = &c.model.decoder.session_options.provider_options;
    let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, vec!["DML", "cuda"]);
    assert_eq!(
        p[1].options,
        vec![
            ("b".to_string(), "2".to_string()),
            ("a".to_string(), "1".to_string())
        ]
    );
}
