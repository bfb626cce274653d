//! Unit tests for `search.rs`: defaults, by-name setters/getters and validation messages.

use super::*;
use crate::Config;

fn model() -> Model {
    let json = r#"{"model": {"type": "llama", "context_length": 512, "vocab_size": 1000,
        "eos_token_id": 2, "decoder": {"filename": "m.onnx", "head_size": 8,
        "num_hidden_layers": 2, "num_key_value_heads": 2}}}"#;
    Config::from_json(json, std::path::Path::new("m"))
        .unwrap()
        .model
}

#[test]
fn defaults_are_the_official_ones() {
    let s = Search::from_raw(&RawSearch::default(), 512).unwrap();
    assert!(!s.do_sample);
    assert_eq!(s.min_length, 0);
    assert_eq!(s.max_length, 512);
    assert_eq!(
        (s.batch_size, s.num_beams, s.num_return_sequences),
        (1, 1, 1)
    );
    assert_eq!(s.top_k, 50);
    assert_eq!(s.top_p, 0.0);
    assert_eq!(s.temperature, 1.0);
    assert_eq!((s.repetition_penalty, s.length_penalty), (1.0, 1.0));
    assert_eq!((s.no_repeat_ngram_size, s.diversity_penalty), (0, 0.0));
    assert!(s.early_stopping);
    assert!(!s.past_present_share_buffer);
    assert_eq!(s.random_seed, -1);
    assert_eq!(s.chunk_size, None);
    assert!(s.is_greedy());
}

#[test]
fn zero_max_length_means_context_length() {
    let raw = RawSearch {
        max_length: Some(Int(0)),
        ..Default::default()
    };
    assert_eq!(Search::from_raw(&raw, 77).unwrap().max_length, 77);
}

#[test]
fn negative_counts_name_the_key() {
    let raw = RawSearch {
        top_k: Some(Int(-3)),
        ..Default::default()
    };
    let e = Search::from_raw(&raw, 10).unwrap_err();
    assert_eq!(
        e.to_string(),
        "search.top_k: must not be negative (it is -3)"
    );
}

#[test]
fn chunk_size_follows_official_rule() {
    let raw = RawSearch {
        chunk_size: Some(-3.0),
        ..Default::default()
    };
    assert_eq!(Search::from_raw(&raw, 10).unwrap().chunk_size, None);
    let raw = RawSearch {
        chunk_size: Some(64.7),
        ..Default::default()
    };
    assert_eq!(Search::from_raw(&raw, 10).unwrap().chunk_size, Some(64));
}

#[test]
fn greedy_rule() {
    let mut s = Search {
        do_sample: true,
        ..Search::default()
    };
    assert!(!s.is_greedy());
    s.top_k = 1;
    assert!(s.is_greedy());
    s.top_k = 50;
    s.temperature = 0.0;
    assert!(s.is_greedy());
}

#[test]
fn set_and_get_by_name() {
    let mut s = Search::default();
    s.set_number("max_length", 100.0).unwrap();
    s.set_number("top_p", 0.9).unwrap();
    s.set_number("random_seed", 42.0).unwrap();
    s.set_number("chunk_size", 0.0).unwrap();
    s.set_bool("do_sample", true).unwrap();
    assert_eq!(s.get_number("max_length").unwrap(), 100.0);
    assert!((s.get_number("top_p").unwrap() - 0.9).abs() < 1e-6);
    assert_eq!(s.get_number("random_seed").unwrap(), 42.0);
    assert_eq!(s.get_number("chunk_size").unwrap(), 0.0);
    assert!(s.get_bool("do_sample").unwrap());
    assert!(s.get_bool("early_stopping").unwrap());
}

#[test]
fn setter_errors_name_the_option() {
    let mut s = Search::default();
    let e = s.set_number("max_lenght", 5.0).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("search option \"max_lenght\": unknown; known names: min_length"),
        "{e}"
    );
    let e = s.set_number("top_k", 2.5).unwrap_err();
    assert_eq!(
        e.to_string(),
        "search option \"top_k\": 2.5 is not a whole number"
    );
    let e = s.set_number("num_beams", -1.0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "search option \"num_beams\": -1 must not be negative"
    );
    let e = s.set_number("do_sample", 1.0).unwrap_err();
    assert_eq!(
        e.to_string(),
        "search option \"do_sample\": is a boolean option; set it with set_bool"
    );
    let e = s.set_bool("top_k", true).unwrap_err();
    assert_eq!(
        e.to_string(),
        "search option \"top_k\": is a number option; use set_number/get_number"
    );
    assert!(s.get_bool("nope").is_err());
    assert!(s.get_number("do_sample").is_err());
    let e = s.set_number("temperature", f64::NAN).unwrap_err();
    assert_eq!(
        e.to_string(),
        "search option \"temperature\": NaN is not finite"
    );
}

#[test]
fn validate_rejects_impossible_values() {
    let m = model();
    let ok = Search {
        max_length: 512,
        ..Search::default()
    };
    ok.validate(&m).unwrap();
    let check = |s: Search| s.validate(&m).unwrap_err().to_string();
    assert_eq!(
        check(Search {
            max_length: 513,
            ..ok.clone()
        }),
        "search.max_length: 513 is above model.context_length (512); lower search.max_length \
         (it counts prompt and generated tokens together)"
    );
    assert_eq!(
        check(Search {
            top_p: 1.5,
            ..ok.clone()
        }),
        "search.top_p: 1.5 must be between 0 and 1"
    );
    assert_eq!(
        check(Search {
            temperature: -0.5,
            ..ok.clone()
        }),
        "search.temperature: -0.5 must not be negative"
    );
    assert!(
        check(Search {
            repetition_penalty: 0.0,
            ..ok.clone()
        })
        .starts_with("search.repetition_penalty:")
    );
    assert!(
        check(Search {
            num_beams: 0,
            ..ok.clone()
        })
        .starts_with("search.num_beams:")
    );
    assert!(
        check(Search {
            batch_size: 0,
            ..ok.clone()
        })
        .starts_with("search.batch_size:")
    );
    assert!(
        check(Search {
            num_return_sequences: 2,
            ..ok.clone()
        })
        .starts_with("search.num_return_sequences: 2 must be between 1 and search.num_beams (1)")
    );
    assert!(
        check(Search {
            do_sample: true,
            top_k: 5000,
            ..ok.clone()
        })
        .starts_with("search.top_k: 5000 is above model.vocab_size (1000)")
    );
    assert!(
        check(Search {
            do_sample: true,
            num_beams: 4,
            ..ok.clone()
        })
        .starts_with("search.do_sample:")
    );
    // Greedy runs ignore top_k, as in the official generator.
    Search {
        top_k: 5000,
        ..ok.clone()
    }
    .validate(&m)
    .unwrap();
}
