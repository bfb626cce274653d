//! SCRATCH (to delete): runs encode/decode/stream on ORACLE_IN for ORACLE_DIR, writes ORACLE_OUT.
use genai_tokenizer::{SpecialTokens, Tokenizer};
use serde_json::{json, Value};

#[test]
fn scratch_oracle() {
    let Ok(dir) = std::env::var("ORACLE_DIR") else { return };
    let inp: Value = serde_json::from_str(&std::fs::read_to_string(std::env::var("ORACLE_IN").unwrap()).unwrap()).unwrap();
    let cfg: Value = serde_json::from_str(&std::fs::read_to_string(format!("{dir}/genai_config.json")).unwrap()).unwrap();
    let m = &cfg["model"];
    let id = |v: &Value| v.as_i64().unwrap() as i32;
    let eos = match &m["eos_token_id"] { Value::Array(a) => a.iter().map(id).collect(), o => vec![id(o)] };
    let tok = Tokenizer::from_dir(std::path::Path::new(&dir), SpecialTokens { bos: Some(id(&m["bos_token_id"])), eos, pad: id(&m["pad_token_id"]) }).unwrap();
    let mut enc = vec![];
    for t in inp["texts"].as_array().into_iter().flatten() {
        let t = t.as_str().unwrap();
        let ids = tok.encode(t).unwrap();
        let d = tok.decode(&ids).unwrap();
        enc.push(json!({"text": t, "ids": ids, "decoded": d}));
    }
    let mut dec = vec![];
    let mut streams = vec![];
    for ids in inp["ids"].as_array().into_iter().flatten() {
        let ids: Vec<i32> = serde_json::from_value(ids.clone()).unwrap();
        dec.push(json!({"ids": ids, "decoded": tok.decode(&ids).unwrap()}));
        let mut s = tok.stream();
        let mut chunks: Vec<String> = vec![];
        for &i in &ids { if let Some(c) = s.push(i).unwrap() { chunks.push(c) } }
        if let Some(c) = s.flush().unwrap() { chunks.push(c) }
        streams.push(json!(chunks));
    }
    std::fs::write(std::env::var("ORACLE_OUT").unwrap(), json!({"encode": enc, "decode": dec, "stream": streams}).to_string()).unwrap();
}
