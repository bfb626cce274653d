//! Shared fixtures for the tokenizer tests: the GPT-2 conformance model and small
//! SentencePiece-style (byte fallback) tokenizers written to a temporary folder.
#![allow(dead_code)] // each test file uses a different subset

use std::path::PathBuf;

use genai_tokenizer::{SpecialTokens, Tokenizer};
use serde_json::{Value, json};

/// The official runtime's tiny GPT-2 test model and its recorded outputs.
pub fn conformance_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/conformance/tiny-random-gpt2-fp32");
    assert!(
        dir.join("tokenizer.json").is_file(),
        "conformance model missing: {} (the shared/ folder must sit beside the repository)",
        dir.display()
    );
    dir
}

/// genai_config.json of the conformance model: pad/bos/eos are all 98.
pub fn gpt2_special() -> SpecialTokens {
    SpecialTokens {
        bos: Some(98),
        eos: vec![98],
        pad: 98,
    }
}

pub fn gpt2() -> Tokenizer {
    Tokenizer::from_dir(&conformance_dir(), gpt2_special()).expect("load GPT-2 tokenizer")
}

/// Which decoder set-up the SentencePiece-style tokenizer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpStyle {
    /// Llama 2: Prepend/Replace normalizer; Replace + ByteFallback + Fuse + Strip decoders.
    Llama,
    /// Metaspace pre-tokenizer; ByteFallback + Metaspace decoders.
    Metaspace,
}

pub const UNK: i32 = 0;
pub const BOS: i32 = 1;
pub const EOS: i32 = 2;
/// Id of the byte-fallback token `<0x00>`; byte b is `BYTE0 + b`.
pub const BYTE0: i32 = 3;

pub fn sp_special() -> SpecialTokens {
    SpecialTokens {
        bos: Some(BOS),
        eos: vec![EOS],
        pad: EOS,
    }
}

/// tokenizer.json of a small BPE SentencePiece-style model with byte fallback: three special
/// tokens, 256 byte tokens, a few letters and merges spelling "▁hello" and "▁world".
pub fn sp_tokenizer_json(style: SpStyle) -> Value {
    let special = |id: i32, content: &str| {
        json!({"id": id, "content": content, "single_word": false, "lstrip": false,
               "rstrip": false, "normalized": false, "special": true})
    };
    let mut vocab = serde_json::Map::new();
    for (id, tok) in ["<unk>", "<s>", "</s>"].iter().enumerate() {
        vocab.insert((*tok).to_owned(), json!(id));
    }
    for b in 0..256 {
        vocab.insert(format!("<0x{b:02X}>"), json!(BYTE0 + b));
    }
    let merges = [
        ("l", "l"),
        ("▁", "h"),
        ("e", "ll"),
        ("▁h", "ell"),
        ("▁hell", "o"),
        ("▁", "w"),
        ("o", "r"),
        ("▁w", "or"),
        ("l", "d"),
        ("▁wor", "ld"),
    ];
    let letters = [
        "▁", "a", "c", "d", "e", "h", "l", "n", "o", "r", "s", "t", "w",
    ];
    let merged = merges.iter().map(|(a, b)| format!("{a}{b}"));
    for piece in letters.iter().map(|s| (*s).to_owned()).chain(merged) {
        let id = vocab.len();
        vocab.insert(piece, json!(id));
    }
    let merges: Vec<Value> = merges.iter().map(|(a, b)| json!([a, b])).collect();
    let (normalizer, pre_tokenizer, decoder) = match style {
        SpStyle::Llama => (
            json!({"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": "▁"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}),
            Value::Null,
            json!({"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}),
        ),
        SpStyle::Metaspace => (
            Value::Null,
            json!({"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                   "split": false}),
            json!({"type": "Sequence", "decoders": [
                {"type": "ByteFallback"},
                {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first",
                 "split": false}]}),
        ),
    };
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [special(UNK, "<unk>"), special(BOS, "<s>"), special(EOS, "</s>")],
        "normalizer": normalizer,
        "pre_tokenizer": pre_tokenizer,
        // Adds BOS when special tokens are requested: encode must not ask for them.
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [BOS], "tokens": ["<s>"]}}
        },
        "decoder": decoder,
        "model": {
            "type": "BPE", "dropout": null, "unk_token": "<unk>",
            "continuing_subword_prefix": null, "end_of_word_suffix": null,
            "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
            "vocab": vocab, "merges": merges
        }
    })
}

/// A temporary model folder holding the given files (name, contents).
pub fn model_dir(files: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, contents) in files {
        std::fs::write(dir.path().join(name), contents).expect("write fixture");
    }
    dir
}

/// A SentencePiece-style tokenizer, optionally with a tokenizer_config.json.
pub fn sp_tokenizer(style: SpStyle, config: Option<Value>) -> Tokenizer {
    let mut files = vec![("tokenizer.json", sp_tokenizer_json(style).to_string())];
    if let Some(config) = config {
        files.push(("tokenizer_config.json", config.to_string()));
    }
    let dir = model_dir(&files);
    Tokenizer::from_dir(dir.path(), sp_special()).expect("load SP tokenizer")
}
