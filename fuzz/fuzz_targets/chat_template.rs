//! Fuzz target `chat_template`: hostile templates, messages and tools JSON through
//! `Tokenizer::apply_chat_template`. It may fail, but must not panic, recurse without bound,
//! run without bound (libFuzzer's -timeout) or allocate without bound (-rss_limit_mb and
//! -malloc_limit_mb); templates have no loader, so no file or network access.

#![no_main]

use std::path::PathBuf;
use std::sync::LazyLock;

use genai_tokenizer::Tokenizer;
use libfuzzer_sys::fuzz_target;

static TOKENIZER: LazyLock<Tokenizer> = LazyLock::new(|| {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/fixtures/qwen2-fp32-cpu");
    let config = genai_config::Config::load(&dir).expect("fixture config loads");
    genai_runtime::load_tokenizer(&config).expect("fixture tokenizer loads")
});

/// Output the crate allows for the largest input this target makes (1 MiB + 4 bytes per input
/// byte, see crates/tokenizer/src/chat.rs), with room for rounding.
fn output_bound(input_len: usize) -> usize {
    (1 << 20) + 4 * input_len + 16
}

fuzz_target!(|data: &[u8]| {
    // Layout: flags byte, then template, messages JSON and tools JSON separated by NUL bytes.
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.split(|&b| b == 0);
    let template = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let messages = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let tools = parts.next().map(String::from_utf8_lossy);
    // flags bit 0: use the model's own template instead of the fuzzed one.
    let template = (flags & 1 == 0).then_some(template.as_ref());
    let add_generation_prompt = flags & 2 != 0;
    let input_len = messages.len() + tools.as_ref().map_or(0, |t| t.len());
    let out =
        TOKENIZER.apply_chat_template(template, &messages, tools.as_deref(), add_generation_prompt);
    if let Ok(text) = out {
        assert!(
            text.len() <= output_bound(input_len),
            "rendered {} bytes from {} input bytes",
            text.len(),
            input_len
        );
    }
});
