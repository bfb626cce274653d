//! Encode/decode against the official runtime's recorded outputs, batch padding, and errors.

mod common;

use common::{BOS, BYTE0, EOS, SpStyle, conformance_dir, gpt2, sp_tokenizer};
use genai_tokenizer::{Error, SpecialTokens, Tokenizer};
use serde_json::Value;

#[test]
fn gpt2_matches_ort_genai_0_18_outputs() {
    let path = conformance_dir().join("expected_ort_genai_0.18.json");
    let text = std::fs::read_to_string(&path).expect("read expected outputs");
    let expected: Value = serde_json::from_str(&text).expect("parse expected outputs");
    let cases = expected["tokenizer"].as_array().expect("tokenizer cases");
    assert!(cases.len() >= 2, "expected at least two tokenizer cases");
    let tok = gpt2();
    for case in cases {
        let text = case["text"].as_str().expect("text");
        let ids: Vec<i32> = serde_json::from_value(case["ids"].clone()).expect("ids");
        let decoded = case["decoded"].as_str().expect("decoded");
        assert_eq!(tok.encode(text).unwrap(), ids, "encode {text:?}");
        assert_eq!(tok.decode(&ids).unwrap(), decoded, "decode {ids:?}");
    }
    // The first recorded case, spelled out so that a broken fixture cannot pass silently.
    assert_eq!(tok.encode("Hello world").unwrap(), vec![15496, 995]);
}

#[test]
fn gpt2_vocab_special_tokens_and_batches() {
    let tok = gpt2();
    // 50257 model tokens + 38 added tokens not already in the model vocabulary.
    assert_eq!(tok.vocab_size(), 50295);
    assert_eq!(tok.token_to_id("<|endoftext|>"), Some(50256));
    assert_eq!(tok.token_to_id("Hello"), Some(15496));
    assert_eq!(tok.token_to_id("no-such-token-anywhere"), None);
    // Special tokens in the text are recognised, and decode skips them.
    assert_eq!(
        tok.encode("Hello<|endoftext|>").unwrap(),
        vec![15496, 50256]
    );
    assert_eq!(tok.decode(&[15496, 50256, 995]).unwrap(), "Hello world");

    let batch = tok.encode_batch(&["Hello world", "Hello"]).unwrap();
    assert_eq!(batch, vec![vec![15496, 995], vec![15496, 98]]);
    assert_eq!(tok.encode_batch(&[]).unwrap(), Vec::<Vec<i32>>::new());
    let texts = tok.decode_batch(&[&[15496, 995], &[15496]]).unwrap();
    assert_eq!(texts, vec!["Hello world".to_owned(), "Hello".to_owned()]);
    assert_eq!(tok.chat_template(), None);
}

#[test]
fn sentencepiece_encode_adds_no_bos_and_round_trips() {
    for style in [SpStyle::Llama, SpStyle::Metaspace] {
        let tok = sp_tokenizer(style, None);
        let hello = tok.token_to_id("▁hello").unwrap();
        let world = tok.token_to_id("▁world").unwrap();
        let space = tok.token_to_id("▁").unwrap();
        // Only a decoder that strips a leading space (Llama's Strip) makes the runtime add the
        // dummy "▁" prefix; a Metaspace decoder without add_prefix_space does not.
        let id = |t: &str| tok.token_to_id(t).unwrap();
        let (prefix, expected) = match style {
            SpStyle::Llama => (" ", vec![hello, world]),
            SpStyle::Metaspace => ("", vec![id("h"), id("ell"), id("o"), world]),
        };
        assert_eq!(tok.encode("hello world").unwrap(), expected, "{style:?}");
        // "é" is not in the vocabulary: two byte-fallback tokens.
        let ids = tok.encode("hello é").unwrap();
        assert_eq!(
            ids[ids.len() - 3..],
            [space, BYTE0 + 0xC3, BYTE0 + 0xA9],
            "{style:?}"
        );
        for text in ["hello world", "héllo wörld", "日本 🎉 ok"] {
            let ids = tok.encode(text).unwrap();
            assert_ne!(
                ids.first(),
                Some(&BOS),
                "{style:?}: encode must not add BOS"
            );
            // The runtime keeps the leading space of the first piece.
            assert_eq!(
                tok.decode(&ids).unwrap(),
                format!("{prefix}{text}"),
                "{style:?}"
            );
        }
        // Decode skips special tokens; after one, the dummy prefix's space goes.
        let expected = if style == SpStyle::Llama {
            "helloworld"
        } else {
            " hello world"
        };
        assert_eq!(
            tok.decode(&[BOS, hello, EOS, world]).unwrap(),
            expected,
            "{style:?}"
        );
    }
}

#[test]
fn decode_follows_the_runtime_utf8_rules() {
    let tok = sp_tokenizer(SpStyle::Llama, None);
    let hello = tok.token_to_id("▁hello").unwrap();
    let byte = |b: i32| BYTE0 + b;
    // Cut at the first invalid or incomplete sequence, with one U+FFFD for all the rest.
    let cases: [(&[i32], &str); 9] = [
        (&[hello, byte(0x80), hello, byte(0x80)], " hello\u{FFFD}"),
        (&[hello, byte(0xE2), byte(0x82)], " hello\u{FFFD}"),
        (&[hello, byte(0xE2), byte(0x82), byte(0xAC)], " hello€"),
        // U+FFFF is rejected, as are overlong forms.
        (
            &[hello, byte(0xEF), byte(0xBF), byte(0xBF)],
            " hello\u{FFFD}",
        ),
        (&[byte(0xC0), byte(0x80)], "\u{FFFD}"),
        // A NUL ends the text (a C string); at the very start that leaves nothing: U+FFFD.
        (&[hello, byte(0), hello], " hello"),
        (&[byte(0), hello], "\u{FFFD}"),
        // Only special tokens: empty text, which the runtime reports as U+FFFD.
        (&[BOS, EOS], "\u{FFFD}"),
        (&[], ""),
    ];
    for (ids, expected) in cases {
        assert_eq!(tok.decode(ids).unwrap(), expected, "{ids:?}");
    }
    // Encode reads the text up to its first NUL.
    assert_eq!(
        tok.encode("hello\0world").unwrap(),
        tok.encode("hello").unwrap()
    );
}

#[test]
fn ids_outside_the_vocabulary_decode_as_the_unknown_token_or_nothing() {
    // GPT-2 has no unknown token: such ids add nothing.
    let tok = gpt2();
    let vocab = i32::try_from(tok.vocab_size()).unwrap();
    let hello = tok.decode(&[15496]).unwrap();
    for bad in [-1, vocab, i32::MAX, i32::MIN] {
        assert_eq!(tok.decode(&[15496, bad]).unwrap(), hello, "{bad}");
        assert_eq!(tok.decode_batch(&[&[15496, bad]]).unwrap()[0], hello);
    }
}

#[test]
fn missing_or_invalid_files_are_named() {
    let special = SpecialTokens {
        bos: None,
        eos: vec![],
        pad: 0,
    };
    let empty = tempfile::tempdir().unwrap();
    let err = Tokenizer::from_dir(empty.path(), special.clone()).unwrap_err();
    assert!(matches!(&err, Error::MissingFile { path } if path.ends_with("tokenizer.json")));
    assert!(err.to_string().contains("tokenizer.json"), "{err}");

    let garbage = common::model_dir(&[("tokenizer.json", "{not json".to_owned())]);
    let err = Tokenizer::from_dir(garbage.path(), special.clone()).unwrap_err();
    assert!(matches!(&err, Error::InvalidFile { path, .. } if path.ends_with("tokenizer.json")));
    assert!(err.to_string().contains("tokenizer.json"), "{err}");

    let tokenizer_json = common::sp_tokenizer_json(SpStyle::Llama).to_string();
    let bad_config = common::model_dir(&[
        ("tokenizer.json", tokenizer_json.clone()),
        ("tokenizer_config.json", "[1, 2".to_owned()),
    ]);
    let err = Tokenizer::from_dir(bad_config.path(), special.clone()).unwrap_err();
    assert!(err.to_string().contains("tokenizer_config.json"), "{err}");

    // tokenizer_config.json is optional.
    let bare = common::model_dir(&[("tokenizer.json", tokenizer_json)]);
    assert!(Tokenizer::from_dir(bare.path(), special).is_ok());
}
