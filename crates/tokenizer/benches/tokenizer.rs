//! Criterion benchmarks of the tokenizer on a bundled fixture: encoding a paragraph, decoding it
//! back, and streaming the decode token by token.

use criterion::{Criterion, criterion_group, criterion_main};
use genai_tokenizer::{SpecialTokens, Tokenizer};
use std::hint::black_box;
use std::path::Path;

const TEXT: &str = "Once upon a time, in a village at the edge of a great forest, there lived an old \
    clockmaker who repaired every clock in the valley. Élise, his apprentice, kept a notebook of \
    every repair: 中文 notes, numbers like 3.14159 and 2026, and the odd emoji 🙂 when a job went well.";

fn load(name: &str) -> Tokenizer {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/fixtures")
        .join(name);
    let special = SpecialTokens {
        bos: Some(1),
        eos: vec![2],
        pad: 0,
    };
    Tokenizer::from_dir(&dir, special).expect("fixture tokenizer")
}

fn tokenizer(c: &mut Criterion) {
    for (label, fixture) in [
        ("byte-level", "qwen2-fp32-cpu"),
        ("sentencepiece", "llama-fp32-cpu"),
    ] {
        let tok = load(fixture);
        let text = TEXT.repeat(4);
        let ids = tok.encode(&text).expect("encode");
        c.bench_function(
            &format!("{label} encode {} chars", text.chars().count()),
            |b| b.iter(|| tok.encode(black_box(&text)).expect("encode")),
        );
        c.bench_function(&format!("{label} decode {} ids", ids.len()), |b| {
            b.iter(|| tok.decode(black_box(&ids)).expect("decode"))
        });
        c.bench_function(&format!("{label} stream {} ids", ids.len()), |b| {
            b.iter(|| {
                let mut stream = tok.stream();
                let mut total = 0;
                for &id in &ids {
                    total += stream.push(id).expect("push").map_or(0, |s| s.len());
                }
                total
            })
        });
    }
}

criterion_group!(benches, tokenizer);
criterion_main!(benches);
