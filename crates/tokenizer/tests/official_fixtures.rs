//! Every bundled model fixture (and the GPT-2 conformance model) against the outputs the official
//! onnxruntime-genai 0.18 package recorded: encode, decode, decode of given ids, chat template.

use std::path::{Path, PathBuf};

use genai_tokenizer::{SpecialTokens, Tokenizer};
use serde_json::Value;

const EXPECTED: &str = "expected_ort_genai_0.18.json";

/// The folders to check: every fixture with recorded outputs, then the conformance model.
fn folders() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixtures = root.join("../../models/fixtures");
    let entries = std::fs::read_dir(&fixtures)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", fixtures.display()));
    let mut dirs: Vec<PathBuf> = entries
        .map(|entry| entry.expect("fixture entry").path())
        .filter(|dir| dir.join(EXPECTED).is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 5,
        "only {} fixtures with {EXPECTED} under {}",
        dirs.len(),
        fixtures.display()
    );
    let conformance = root.join("../../../shared/conformance/tiny-random-gpt2-fp32");
    assert!(
        conformance.join(EXPECTED).is_file(),
        "conformance model missing: {}",
        conformance.display()
    );
    dirs.push(conformance);
    dirs
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON in {}: {e}", path.display()))
}

/// The special token ids of genai_config.json (`eos_token_id` may be a number or a list).
fn special_tokens(dir: &Path) -> SpecialTokens {
    let config = read_json(&dir.join("genai_config.json"));
    let model = &config["model"];
    let id = |v: &Value| i32::try_from(v.as_i64().expect("integer token id")).expect("i32 id");
    let eos = match &model["eos_token_id"] {
        Value::Array(list) => list.iter().map(id).collect(),
        other => vec![id(other)],
    };
    SpecialTokens {
        bos: model.get("bos_token_id").filter(|v| !v.is_null()).map(id),
        eos,
        pad: id(&model["pad_token_id"]),
    }
}

fn ids_of(case: &Value) -> Vec<i32> {
    serde_json::from_value(case["ids"].clone()).expect("ids")
}

fn str_of<'a>(case: &'a Value, key: &str) -> &'a str {
    case[key]
        .as_str()
        .unwrap_or_else(|| panic!("{key} is not a string"))
}

/// Records a mismatch (all of them are reported together at the end).
fn expect_eq(failures: &mut Vec<String>, what: String, got: &str, want: &str) {
    if got != want {
        failures.push(format!("{what}:\n    got  {got:?}\n    want {want:?}"));
    }
}

/// The streamed text of `ids`: the chunks of a [`genai_tokenizer::StreamDecoder`], joined.
fn streamed(tok: &Tokenizer, ids: &[i32]) -> String {
    let mut stream = tok.stream();
    let mut text = String::new();
    for &id in ids {
        text.push_str(&stream.push(id).unwrap().unwrap_or_default());
    }
    text.push_str(&stream.flush().unwrap().unwrap_or_default());
    text
}

/// Checks one folder, adding mismatches to `failures`; returns the number of cases checked.
fn check_folder(dir: &Path, failures: &mut Vec<String>) -> usize {
    let name = dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let expected = read_json(&dir.join(EXPECTED));
    let tok = Tokenizer::from_dir(dir, special_tokens(dir))
        .unwrap_or_else(|e| panic!("{name}: load failed: {e}"));
    let mut check = |what: String, got: &str, want: &str| expect_eq(failures, what, got, want);
    let mut checked = 0;
    let cases = expected["tokenizer"].as_array().expect("tokenizer cases");
    assert!(!cases.is_empty(), "{name}: no tokenizer cases");
    let decode_cases = expected["decode_cases"].as_array().into_iter().flatten();
    for case in cases.iter().chain(decode_cases) {
        let (ids, want) = (ids_of(case), str_of(case, "decoded"));
        if let Some(text) = case["text"].as_str() {
            let got = format!("{:?}", tok.encode(text).unwrap());
            check(
                format!("{name}: encode {text:?}"),
                &got,
                &format!("{ids:?}"),
            );
        }
        check(
            format!("{name}: decode {ids:?}"),
            &tok.decode(&ids).unwrap(),
            want,
        );
        // The official stream skips broken bytes where decode stops at them, so the two agree
        // only on text without U+FFFD (streams over broken bytes are compared with the official
        // stream itself by the C ABI drop-in tests).
        if !want.contains('\u{FFFD}') {
            check(
                format!("{name}: stream {ids:?}"),
                &streamed(&tok, &ids),
                want,
            );
        }
        checked += 1;
    }
    if let Some(special) = expected.get("tokenizer_special_ids") {
        let ours = tok.special_tokens();
        let got = format!("{:?} {:?} {}", ours.bos, ours.eos, ours.pad);
        let want = format!(
            "{:?} {:?} {}",
            special["bos_token_id"]
                .as_i64()
                .map(|id| i32::try_from(id).expect("i32 id")),
            ids_of(&serde_json::json!({"ids": special["eos_token_ids"]})),
            special["pad_token_id"]
        );
        check(format!("{name}: special ids"), &got, &want);
    }
    if let Some(output) = expected.get("chat_template_output") {
        let messages = expected["chat_template_messages"].to_string();
        let rendered = tok
            .apply_chat_template(None, &messages, None, true)
            .unwrap();
        let want = output.as_str().expect("chat_template_output is a string");
        check(format!("{name}: chat template"), &rendered, want);
        checked += 1;
    }
    checked
}

#[test]
fn every_fixture_matches_the_official_runtime() {
    let (mut total, mut failures) = (0, Vec::new());
    for dir in folders() {
        total += check_folder(&dir, &mut failures);
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(total >= 50, "only {total} cases checked");
}
