//! Streaming detokenization: chunks never split a character, add up to `decode` on valid text,
//! and skip broken bytes the way the official stream does.

mod common;

use common::{BYTE0, EOS, SpStyle, gpt2, sp_tokenizer};
use genai_tokenizer::Tokenizer;

const TEXTS: [&str; 7] = [
    "hello world",
    "héllo wörld, naïve café",
    "€100 – “quoted” text",
    "hello 你好 world 日本語のテキスト",
    "emoji 🎉 and 👋🏽 and 👨‍👩‍👧",
    " leading space\nand\ttabs",
    "Ünïcödé ŝtrïñg ✓",
];

/// Streams `ids` one at a time, checking every chunk, and returns the chunks.
fn stream_chunks(tok: &Tokenizer, ids: &[i32]) -> Vec<String> {
    let mut stream = tok.stream();
    let mut chunks = Vec::new();
    for &id in ids {
        if let Some(chunk) = stream.push(id).unwrap() {
            chunks.push(chunk);
        }
    }
    if let Some(chunk) = stream.flush().unwrap() {
        chunks.push(chunk);
    }
    for chunk in &chunks {
        assert!(!chunk.is_empty(), "empty chunk in {chunks:?}");
        assert!(
            !chunk.contains('\u{FFFD}'),
            "broken character in {chunks:?}"
        );
    }
    chunks
}

/// Checks every text; `prefix` is what decode puts before it (the space of SentencePiece's dummy
/// prefix, which the runtime keeps).
fn assert_streams_like_decode(tok: &Tokenizer, label: &str, prefix: &str) {
    for text in TEXTS {
        let ids = tok.encode(text).unwrap();
        let chunks = stream_chunks(tok, &ids);
        let joined: String = chunks.concat();
        assert_eq!(
            joined,
            tok.decode(&ids).unwrap(),
            "{label}: {text:?} -> {chunks:?}"
        );
        assert_eq!(joined, format!("{prefix}{text}"), "{label}: {text:?}");
    }
}

#[test]
fn gpt2_byte_level_streams_whole_characters() {
    assert_streams_like_decode(&gpt2(), "gpt2", "");
}

#[test]
fn sentencepiece_byte_fallback_streams_whole_characters() {
    assert_streams_like_decode(&sp_tokenizer(SpStyle::Llama, None), "llama", " ");
    assert_streams_like_decode(&sp_tokenizer(SpStyle::Metaspace, None), "metaspace", "");
}

#[test]
fn byte_fallback_euro_is_held_until_complete() {
    let tok = sp_tokenizer(SpStyle::Llama, None);
    let space = tok.token_to_id("▁").unwrap();
    let hello = tok.token_to_id("▁hello").unwrap();
    let mut stream = tok.stream();
    assert_eq!(stream.push(hello).unwrap().as_deref(), Some(" hello"));
    assert_eq!(stream.push(space).unwrap().as_deref(), Some(" "));
    assert_eq!(stream.push(BYTE0 + 0xE2).unwrap(), None);
    assert_eq!(stream.push(BYTE0 + 0x82).unwrap(), None);
    assert_eq!(stream.push(BYTE0 + 0xAC).unwrap().as_deref(), Some("€"));
    assert_eq!(stream.push(hello).unwrap().as_deref(), Some(" hello"));
    assert_eq!(stream.flush().unwrap(), None);
}

#[test]
fn byte_level_pieces_of_one_character_are_held() {
    let tok = gpt2();
    // GPT-2's byte-level alphabet spells the bytes E2 82 AC ("€") as "â", "Ĥ", "¬".
    let pieces: Vec<i32> = ["â", "Ĥ", "¬"]
        .iter()
        .map(|p| tok.token_to_id(p).unwrap())
        .collect();
    let mut stream = tok.stream();
    assert_eq!(stream.push(pieces[0]).unwrap(), None);
    assert_eq!(stream.push(pieces[1]).unwrap(), None);
    assert_eq!(stream.push(pieces[2]).unwrap().as_deref(), Some("€"));
    assert_eq!(tok.decode(&pieces).unwrap(), "€");
}

#[test]
fn incomplete_character_is_never_emitted() {
    // The official stream has no flush: a character still short at the end never appears.
    let tok = sp_tokenizer(SpStyle::Llama, None);
    let hello = tok.token_to_id("▁hello").unwrap();
    let mut stream = tok.stream();
    assert_eq!(stream.push(hello).unwrap().as_deref(), Some(" hello"));
    assert_eq!(stream.push(BYTE0 + 0xE2).unwrap(), None);
    assert_eq!(stream.push(BYTE0 + 0x82).unwrap(), None);
    assert_eq!(stream.flush().unwrap(), None);
    assert_eq!(stream.window_len(), 0);
}

#[test]
fn special_tokens_are_skipped_and_reset_starts_over() {
    let tok = sp_tokenizer(SpStyle::Llama, None);
    let hello = tok.token_to_id("▁hello").unwrap();
    let world = tok.token_to_id("▁world").unwrap();
    let ids = [common::BOS, hello, EOS, world, EOS];
    assert_eq!(
        stream_chunks(&tok, &ids).concat(),
        tok.decode(&ids).unwrap()
    );
    // Right after a special token, a piece loses its dummy-prefix space.
    assert_eq!(tok.decode(&ids).unwrap(), "helloworld");

    let mut stream = tok.stream();
    assert_eq!(stream.push(hello).unwrap().as_deref(), Some(" hello"));
    stream.reset();
    assert_eq!(stream.window_len(), 0);
    assert_eq!(stream.push(common::BOS).unwrap(), None);
    assert_eq!(stream.push(world).unwrap().as_deref(), Some("world"));
    stream.reset();
    assert_eq!(stream.push(world).unwrap().as_deref(), Some(" world"));
}

#[test]
fn stream_skips_broken_bytes_and_goes_on() {
    let tok = sp_tokenizer(SpStyle::Llama, None);
    let hello = tok.token_to_id("▁hello").unwrap();
    let byte = |b: u8| BYTE0 + i32::from(b);
    let cases: [(&[i32], &str); 7] = [
        // A stray continuation byte is one cut, dropped.
        (&[hello, byte(0x80), hello, hello], " hello hello hello"),
        // NUL is dropped too.
        (&[hello, byte(0), hello], " hello hello"),
        (&[byte(0), hello], " hello"),
        // A 4-byte lead takes the next three bytes with it, even ASCII ones.
        (
            &[byte(0xF0), byte(b'a'), byte(b'b'), byte(b'c'), byte(b'd')],
            "d",
        ),
        // A valid 2-byte character split over two ids.
        (&[byte(0xC3), byte(0xA9)], "é"),
        // Special tokens add nothing.
        (&[common::BOS, EOS], ""),
        (&[common::BOS, byte(0xE2)], ""),
    ];
    for (ids, want) in cases {
        let mut stream = tok.stream();
        let mut joined = String::new();
        for &id in ids {
            joined.push_str(&stream.push(id).unwrap().unwrap_or_default());
        }
        joined.push_str(&stream.flush().unwrap().unwrap_or_default());
        assert_eq!(joined, want, "{ids:?}");
        assert_eq!(stream.flush().unwrap(), None, "{ids:?}");
    }
}

#[test]
fn ids_outside_the_vocabulary_add_nothing_without_an_unknown_token() {
    let tok = gpt2();
    let ids = tok.encode("Hello world").unwrap();
    let mut stream = tok.stream();
    assert_eq!(stream.push(ids[0]).unwrap().as_deref(), Some("Hello"));
    assert_eq!(stream.push(-1).unwrap(), None);
    assert_eq!(stream.push(1 << 30).unwrap(), None);
    assert_eq!(stream.push(ids[1]).unwrap().as_deref(), Some(" world"));
}

#[test]
fn ids_outside_the_vocabulary_stream_as_the_unknown_token() {
    // tokenizer.json names "<unk>" as the model's unk_token: the official runtime prints it.
    let tok = sp_tokenizer(SpStyle::Llama, None);
    let hello = tok.token_to_id("▁hello").unwrap();
    let mut stream = tok.stream();
    assert_eq!(stream.push(hello).unwrap().as_deref(), Some(" hello"));
    assert_eq!(stream.push(-7).unwrap().as_deref(), Some("<unk>"));
    assert_eq!(stream.push(hello).unwrap().as_deref(), Some(" hello"));
    assert_eq!(
        tok.decode(&[hello, -7, hello]).unwrap(),
        " hello<unk> hello"
    );
}

#[test]
fn long_streams_keep_a_small_window() {
    let tok = gpt2();
    let unit = tok.encode("Stream 🎉 ünïcode 你好, ").unwrap();
    let ids: Vec<i32> = unit
        .iter()
        .copied()
        .cycle()
        .take(unit.len() * 400)
        .collect();
    let mut stream = tok.stream();
    let mut joined = String::new();
    let mut widest = 0;
    for &id in &ids {
        if let Some(chunk) = stream.push(id).unwrap() {
            joined.push_str(&chunk);
        }
        widest = widest.max(stream.window_len());
    }
    joined.push_str(&stream.flush().unwrap().unwrap_or_default());
    assert_eq!(joined, tok.decode(&ids).unwrap());
    assert!(widest <= 8, "window grew to {widest} tokens");
}

#[test]
fn endless_broken_bytes_keep_nothing() {
    // Stray UTF-8 continuation bytes never complete a character: each is dropped at once.
    let tok = sp_tokenizer(SpStyle::Llama, None);
    let ids = vec![BYTE0 + 0x80; 300];
    let mut stream = tok.stream();
    let mut joined = String::new();
    let mut widest = 0;
    for &id in &ids {
        if let Some(chunk) = stream.push(id).unwrap() {
            joined.push_str(&chunk);
        }
        widest = widest.max(stream.window_len());
    }
    joined.push_str(&stream.flush().unwrap().unwrap_or_default());
    assert_eq!(joined, "");
    assert_eq!(widest, 0, "kept {widest} bytes");
}
