//! Unit tests for `Config`: building from JSON, model/decoder validation, overlays and the
//! unsupported-feature list.

use super::*;

const LLAMA: &str = r#"{
  "model": {
    "bos_token_id": 128000,
    "context_length": 8192,
    "decoder": {
      "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
      "filename": "model.onnx",
      "head_size": 128,
      "hidden_size": 4096,
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
      "num_hidden_layers": 32,
      "num_key_value_heads": 8
    },
    "eos_token_id": [128001, 128009],
    "pad_token_id": 128001,
    "type": "llama",
    "vocab_size": 128256
  },
  "search": {"max_length": 8192, "past_present_share_buffer": true, "top_p": 1.0}
}"#;

fn dir() -> &'static Path {
    Path::new("model-dir")
}

fn cfg(json: &str) -> Result<Config, Error> {
    Config::from_json(json, dir())
}

/// LLAMA with one JSON edit applied at a dotted path.
fn edited(path: &str, value: serde_json::Value) -> String {
    let mut v: serde_json::Value = serde_json::from_str(LLAMA).unwrap();
    let mut node = &mut v;
    let keys: Vec<&str> = path.split('.').collect();
    for k in &keys[..keys.len() - 1] {
        node = node.get_mut(*k).unwrap();
    }
    node[keys[keys.len() - 1]] = value;
    v.to_string()
}

#[test]
fn llama_builder_config() {
    let c = cfg(LLAMA).unwrap();
    assert_eq!(c.model.model_type, "llama");
    assert!(c.model.is_decoder_only_llm());
    assert_eq!(c.model.bos_token_id, Some(128000));
    assert_eq!(c.model.eos_token_ids, vec![128001, 128009]);
    assert!(c.model.is_eos(128009));
    let d = &c.model.decoder;
    assert_eq!(
        (d.num_attention_heads, d.num_key_value_heads, d.head_size),
        (32, 8, 128)
    );
    assert_eq!(d.inputs.past.key(31), "past_key_values.31.key");
    assert_eq!(d.outputs.present.value(0), "present.0.value");
    assert_eq!(
        d.session_options.log_id.as_deref(),
        Some("onnxruntime-genai")
    );
    assert!(c.search.past_present_share_buffer);
    assert_eq!(c.search.top_p, 1.0);
    assert_eq!(c.decoder_path(), dir().join("model.onnx"));
    assert_eq!(c.tokenizer_dir(), dir());
    assert!(c.unsupported.is_empty() && c.ignored.is_empty());
    assert_eq!(c.speculative, None);
    assert_eq!(c.engine, None);
}

#[test]
fn decoder_defaults_when_omitted() {
    let json = r#"{"model": {"type": "gpt2", "context_length": 16, "vocab_size": 10,
        "decoder": {"filename": "m.onnx", "head_size": 4, "num_hidden_layers": 1,
        "num_key_value_heads": 2}}}"#;
    let c = cfg(json).unwrap();
    let d = &c.model.decoder;
    assert_eq!(d.num_attention_heads, 2);
    assert_eq!(d.hidden_size, 8);
    assert_eq!(c.model.pad_token_id, 0);
    assert_eq!(c.model.eos_token_ids, vec![0]);
    assert_eq!(c.model.bos_token_id, None);
    assert_eq!(c.search.max_length, 16);
}

#[test]
fn shape_errors_say_what_to_fix() {
    let e = cfg(&edited("model.decoder.num_attention_heads", 30.into())).unwrap_err();
    assert_eq!(
        e.to_string(),
        "model.decoder.num_attention_heads: 30 is not a multiple of \
         model.decoder.num_key_value_heads (8); each KV head must serve a whole group of query heads"
    );
    let e = cfg(&edited("model.decoder.head_size", 0.into())).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("model.decoder.head_size: must be greater than 0 (it is 0)")
    );
    let e = cfg(&edited("model.decoder.num_hidden_layers", 0.into())).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("model.decoder.num_hidden_layers: must be greater than 0")
    );
    let e = cfg(&edited("model.context_length", 0.into())).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("model.context_length: must be greater than 0")
    );
    let e = cfg(&edited("model.decoder.filename", "../x.onnx".into())).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("model.decoder.filename: \"../x.onnx\" must stay inside")
    );
}

#[test]
fn token_ids_must_fit_the_vocabulary() {
    let e = cfg(&edited(
        "model.eos_token_id",
        serde_json::json!([128001, 200000]),
    ))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "model.eos_token_id[1]: token id 200000 is outside the vocabulary [0, 128256); fix the id \
         or model.vocab_size"
    );
    let e = cfg(&edited("model.bos_token_id", 128256.into())).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("model.bos_token_id: token id 128256 is outside")
    );
    let e = cfg(&edited("model.pad_token_id", (-1).into())).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("model.pad_token_id: token id -1 is outside")
    );
    // pad may equal eos
    cfg(&edited("model.pad_token_id", 128009.into())).unwrap();
}

#[test]
fn combined_kv_names_need_both_sides() {
    let json = edited(
        "model.decoder.inputs",
        serde_json::json!({"past_names": "past_%d"}),
    );
    let e = cfg(&json).unwrap_err();
    assert_eq!(
        e.to_string(),
        "model.decoder.outputs.present_names: missing while model.decoder.inputs.past_names is \
         set; combined KV names need both"
    );
}

#[test]
fn sliding_window_is_validated() {
    let c = cfg(&edited(
        "model.decoder.sliding_window",
        serde_json::json!({"window_size": 4096, "slide_key_value_cache": false, "layers": [0, 2]}),
    ))
    .unwrap();
    let w = c.model.decoder.sliding_window.unwrap();
    assert_eq!(
        (w.window_size, w.alignment, w.slide_inputs),
        (4096, Alignment::Right, true)
    );
    assert!(!w.slide_key_value_cache);
    assert_eq!(w.layers, vec![0, 2]);
    let e = cfg(&edited(
        "model.decoder.sliding_window",
        serde_json::json!({"window_size": 8, "layers": [40]}),
    ))
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "model.decoder.sliding_window.layers[0]: layer 40 does not exist; the decoder has 32 layers"
    );
}

#[test]
fn overlay_merges_and_revalidates() {
    let base = cfg(LLAMA).unwrap();
    let c = base
        .with_overlay(
            r#"{"search": {"top_k": 3, "do_sample": true}, "model": {"eos_token_id": [1]}}"#,
        )
        .unwrap();
    assert_eq!(c.search.top_k, 3);
    assert!(c.search.do_sample);
    assert_eq!(c.search.max_length, 8192);
    assert_eq!(c.model.eos_token_ids, vec![128001, 128009, 1]);
    let c = base
        .with_overlay(
            r#"{"model": {"decoder": {"session_options": {"provider_options": [{"cuda": {"enable_cuda_graph": "1"}}]}}}}"#,
        )
        .unwrap();
    let p = &c.model.decoder.session_options.provider_options;
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].name, "cuda");
    assert_eq!(p[0].option("enable_cuda_graph"), Some("1"));
    assert_eq!(
        c.model.decoder.session_options.log_id.as_deref(),
        Some("onnxruntime-genai")
    );

    let e = base
        .with_overlay(r#"{"search": {"max_lenght": 5}}"#)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "config overlay: search.max_lenght: unknown key (did you mean \"max_length\"?) (line 1, column 24)"
    );
    let e = base
        .with_overlay(r#"{"search": {"max_length": 9000}}"#)
        .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("search.max_length: 9000 is above model.context_length (8192)")
    );
}

#[test]
fn overlay_context_length_moves_defaulted_max_length() {
    let json = r#"{"model": {"type": "qwen2", "context_length": 100, "vocab_size": 10,
        "decoder": {"filename": "m.onnx", "head_size": 4, "num_hidden_layers": 1,
        "num_key_value_heads": 1}}}"#;
    let c = cfg(json)
        .unwrap()
        .with_overlay(r#"{"model": {"context_length": 50}}"#)
        .unwrap();
    assert_eq!((c.model.context_length, c.search.max_length), (50, 50));
}

#[test]
fn unsupported_features_are_listed() {
    let mut v: serde_json::Value = serde_json::from_str(LLAMA).unwrap();
    v["model"]["vision"] = serde_json::json!({"filename": "vision.onnx"});
    v["model"]["image_token_id"] = 5.into();
    v["model"]["decoder"]["inputs"]["block_table"] = "block_table".into();
    v["model"]["decoder"]["pipeline"] = serde_json::json!([{"embeddings": {"filename": "e.onnx"}}]);
    v["model"]["dflash2"] = serde_json::json!({"anything": [1, 2]});
    v["search"]["blank_penalty"] = 0.5.into();
    v["schema_version"] = 2.into();
    v["model"]["type"] = "phi3v".into();
    let c = cfg(&v.to_string()).unwrap();
    assert_eq!(
        c.unsupported,
        vec![
            "model.type",
            "model.image_token_id",
            "model.decoder.pipeline",
            "model.decoder.inputs.block_table",
            "model.vision",
            "model.dflash2",
            "search.blank_penalty",
        ]
    );
    assert_eq!(c.ignored, vec!["schema_version"]);
    assert_eq!(
        c.model.decoder.inputs.other,
        vec![("block_table".to_string(), "block_table".to_string())]
    );
    assert!(!c.model.is_decoder_only_llm());
}

#[test]
fn speculative_and_engine_sections() {
    let mut v: serde_json::Value = serde_json::from_str(LLAMA).unwrap();
    v["speculative"] = serde_json::json!({"ngram_size": 4});
    v["engine"] = serde_json::json!({"static_batching": {"max_batch_size": 2}});
    let c = cfg(&v.to_string()).unwrap();
    assert_eq!(c.speculative.unwrap().ngram_size, 4);
    assert_eq!(c.engine, Some(Engine::Static { max_batch_size: 2 }));
}

#[test]
fn missing_sections() {
    let e = cfg("{}").unwrap_err();
    assert_eq!(
        e.to_string(),
        "model: missing; the file must have a \"model\" section"
    );
    let e =
        cfg(r#"{"model": {"type": "llama", "context_length": 8, "vocab_size": 8}}"#).unwrap_err();
    assert!(e.to_string().starts_with("model.decoder: missing"));
    let e = cfg(r#"{"model": {"context_length": 8}}"#).unwrap_err();
    assert!(e.to_string().starts_with("model.type: missing"));
}

#[test]
fn trailing_text_and_bom() {
    let e = cfg(&format!("{LLAMA} x")).unwrap_err();
    assert!(matches!(e, Error::Syntax { .. }), "{e}");
    cfg(&format!("\u{feff}{LLAMA}")).unwrap();
}

#[test]
fn top_level_must_be_an_object() {
    let e = cfg("[1, 2]").unwrap_err();
    assert_eq!(
        e.to_string(),
        "(top level): invalid type: sequence, expected a genai_config.json object (line 1, column 1)"
    );
}

#[test]
fn errors_can_cross_threads() {
    fn assert_send_sync<T: Send + Sync + 'static + std::error::Error>() {}
    assert_send_sync::<Error>();
}
