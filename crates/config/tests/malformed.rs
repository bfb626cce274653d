//! A corpus of broken model folders: each must fail to load with an error that names the JSON
//! path (or the file) and says what is wrong. Messages are compared exactly so they cannot drift.

use std::path::Path;

use genai_config::{Config, Error};

const GOOD: &str = r#"{
  "model": {
    "type": "qwen2",
    "bos_token_id": 1,
    "eos_token_id": 2,
    "pad_token_id": 0,
    "context_length": 128,
    "vocab_size": 100,
    "decoder": {
      "filename": "model.onnx",
      "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
      "head_size": 16,
      "hidden_size": 64,
      "num_attention_heads": 4,
      "num_key_value_heads": 2,
      "num_hidden_layers": 2,
      "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                 "past_key_names": "past_key_values.%d.key",
                 "past_value_names": "past_key_values.%d.value"},
      "outputs": {"logits": "logits", "present_key_names": "present.%d.key",
                  "present_value_names": "present.%d.value"}
    }
  },
  "search": {"max_length": 128, "top_p": 1.0}
}"#;

/// Writes `config` (and `model.onnx`) to a fresh folder and loads it.
fn load(config: &str) -> Result<Config, Error> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("genai_config.json"), config).unwrap();
    std::fs::write(dir.path().join("model.onnx"), b"").unwrap();
    Config::load(dir.path())
}

fn err(config: &str) -> String {
    match load(config) {
        Ok(_) => panic!("config was accepted:\n{config}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_good_config_loads() {
    let c = load(GOOD).unwrap();
    assert_eq!(c.model.eos_token_ids, vec![2]);
}

#[test]
fn eos_as_a_list_loads() {
    let c = load(&GOOD.replace(r#""eos_token_id": 2"#, r#""eos_token_id": [2, 3, 4]"#)).unwrap();
    assert_eq!(c.model.eos_token_ids, vec![2, 3, 4]);
}

#[test]
fn unknown_nested_key() {
    let config = GOOD.replace(r#""session_options":"#, r#""sesion_options":"#);
    assert_eq!(
        err(&config),
        "model.decoder.sesion_options: unknown key (did you mean \"session_options\"?) (line 11, column 22)"
    );
    let config = GOOD.replace(r#""top_p": 1.0"#, r#""top_p": 1.0, "beam_count": 2"#);
    assert_eq!(
        err(&config),
        "search.beam_count: unknown key (line 24, column 58)"
    );
}

#[test]
fn unknown_top_level_section() {
    let config = GOOD.replacen('{', r#"{"serach": {"top_k": 1},"#, 1);
    assert_eq!(
        err(&config),
        "serach: unknown key (did you mean \"search\"?) (line 1, column 12)"
    );
}

#[test]
fn wrong_types() {
    let config = GOOD.replace(r#""vocab_size": 100"#, r#""vocab_size": "100""#);
    assert_eq!(
        err(&config),
        "model.vocab_size: invalid type: string \"100\", expected an integer (line 8, column 23)"
    );
    let config = GOOD.replace(r#""num_hidden_layers": 2"#, r#""num_hidden_layers": 2.5"#);
    assert_eq!(
        err(&config),
        "model.decoder.num_hidden_layers: value 2.5 is not an integer (line 16, column 30)"
    );
    let config = GOOD.replace(r#""log_id": "onnxruntime-genai""#, r#""session.foo": 1"#);
    assert_eq!(
        err(&config),
        "model.decoder.session_options.session.foo: invalid type: integer `1`, expected a string \
         (line 11, column 42)"
    );
    let config = GOOD.replace(r#""top_p": 1.0"#, r#""top_p": 1.0, "do_sample": null"#);
    assert_eq!(
        err(&config),
        "search.do_sample: invalid type: null, expected a boolean (line 24, column 63)"
    );
    let config = GOOD.replace(r#""eos_token_id": 2"#, r#""eos_token_id": [2, "3"]"#);
    assert_eq!(
        err(&config),
        "model.eos_token_id[1]: invalid type: string \"3\", expected an integer (line 5, column 27)"
    );
}

#[test]
fn eos_outside_vocabulary() {
    let config = GOOD.replace(r#""eos_token_id": 2"#, r#""eos_token_id": 100"#);
    assert_eq!(
        err(&config),
        "model.eos_token_id: token id 100 is outside the vocabulary [0, 100); fix the id or \
         model.vocab_size"
    );
}

#[test]
fn max_length_above_context() {
    let config = GOOD.replace(r#""max_length": 128"#, r#""max_length": 129"#);
    assert_eq!(
        err(&config),
        "search.max_length: 129 is above model.context_length (128); lower search.max_length \
         (it counts prompt and generated tokens together)"
    );
}

#[test]
fn impossible_search_values() {
    let config = GOOD.replace(r#""top_p": 1.0"#, r#""top_p": 1.5"#);
    assert_eq!(err(&config), "search.top_p: 1.5 must be between 0 and 1");
    let config = GOOD.replace(r#""top_p": 1.0"#, r#""top_p": 1.0, "temperature": -1"#);
    assert_eq!(err(&config), "search.temperature: -1 must not be negative");
}

#[test]
fn heads_not_divisible() {
    let config = GOOD.replace(r#""num_attention_heads": 4"#, r#""num_attention_heads": 5"#);
    assert_eq!(
        err(&config),
        "model.decoder.num_attention_heads: 5 is not a multiple of \
         model.decoder.num_key_value_heads (2); each KV head must serve a whole group of query heads"
    );
}

#[test]
fn missing_decoder_file() {
    let config = GOOD.replace(
        r#""filename": "model.onnx""#,
        r#""filename": "decoder.onnx""#,
    );
    let message = err(&config);
    assert!(message.starts_with("model.decoder.filename: "), "{message}");
    assert!(
        message.ends_with("decoder.onnx does not exist; put the file there or fix the name"),
        "{message}"
    );
    match load(&config) {
        Err(Error::MissingFile { path, file }) => {
            assert_eq!(path, "model.decoder.filename");
            assert_eq!(file.file_name().unwrap(), "decoder.onnx");
        }
        other => panic!("expected MissingFile, got {other:?}"),
    }
}

#[test]
fn missing_config_file() {
    let dir = tempfile::tempdir().unwrap();
    match Config::load(dir.path()) {
        Err(Error::MissingConfig { dir: d }) => assert_eq!(d, dir.path()),
        other => panic!("expected MissingConfig, got {other:?}"),
    }
    let e = Config::load(Path::new("no/such/model"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "no genai_config.json in no/such/model: point at a model folder written by the ONNX \
         Runtime GenAI model builder"
    );
}

#[test]
fn invalid_json() {
    let config = GOOD.replace(r#""pad_token_id": 0,"#, r#""pad_token_id": 0,,"#);
    assert_eq!(
        err(&config),
        "invalid JSON at line 6, column 23: key must be a string"
    );
    let truncated = &GOOD[..GOOD.len() - 20];
    let message = err(truncated);
    assert!(
        message.starts_with("invalid JSON at line 24, column 27: "),
        "{message}"
    );
    assert!(message.ends_with("EOF while parsing a value"), "{message}");
}

#[test]
fn zero_sizes() {
    let config = GOOD.replace(r#""head_size": 16"#, r#""head_size": 0"#);
    assert_eq!(
        err(&config),
        "model.decoder.head_size: must be greater than 0 (it is 0); set it to the size of one \
         attention head"
    );
    let config = GOOD.replace(r#""context_length": 128,"#, "");
    assert_eq!(
        err(&config),
        "model.context_length: missing; set it to the longest sequence the model supports"
    );
}
