//! Fuzz target `stream_decode`: arbitrary id sequences (in and out of the vocabulary, negative,
//! special) through `Tokenizer::decode` and the streaming decoder (`push`, `flush`, `reset`) of
//! every fixture tokenizer. Nothing may panic; a streamed text is valid UTF-8 by construction.

#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

use genai_tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

/// Fixtures with distinct tokenizers (byte-level BPE, SentencePiece-style, with added tokens).
const FIXTURES: &[&str] = &[
    "qwen2-fp32-cpu",
    "llama-fp32-cpu",
    "phi3-fp32-cpu",
    "mistral-fp32-cpu",
    "qwen3-fp32-cpu",
];

fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/fixtures")
}

static TOKENIZERS: LazyLock<Vec<Tokenizer>> = LazyLock::new(|| {
    FIXTURES
        .iter()
        .map(|name| {
            let dir = fixtures_dir().join(name);
            let config = genai_config::Config::load(&dir).expect("fixture config loads");
            genai_runtime::load_tokenizer(&config).expect("fixture tokenizer loads")
        })
        .collect()
});

/// Input layout: one byte choosing the tokenizer, then ids as little-endian i16 (the fixture
/// vocabularies are small, so this covers ids in, just past and far past the vocabulary, and
/// negative ones); the i16 `-32768` escapes a full little-endian i32 id.
fn ids(data: &[u8]) -> Vec<i32> {
    let mut ids = Vec::new();
    let mut rest = data;
    while let Some((chunk, tail)) = rest.split_first_chunk::<2>() {
        rest = tail;
        let short = i16::from_le_bytes(*chunk);
        if short != i16::MIN {
            ids.push(i32::from(short));
        } else if let Some((long, tail)) = rest.split_first_chunk::<4>() {
            rest = tail;
            ids.push(i32::from_le_bytes(*long));
        }
    }
    ids
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let tokenizer = &TOKENIZERS[usize::from(selector) % FIXTURES.len()];
    let ids = ids(rest);
    let _ = tokenizer.decode(&ids);
    let mut stream = tokenizer.stream();
    for (n, &i) in ids.iter().enumerate() {
        let _ = stream.push(i);
        if n % 97 == 96 {
            let _ = stream.flush();
        }
        if n % 211 == 210 {
            stream.reset();
        }
    }
    let _ = stream.flush();
    let _ = stream.window_len();
});
