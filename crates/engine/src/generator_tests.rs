//! Generator semantics against a scripted backend whose next token is always `last + 1`.

use super::*;
use crate::backend::BackendInfo;
use genai_config::Config;
use std::sync::Mutex;

const VOCAB: usize = 10;

/// Records every forward call as (new tokens, total length).
#[derive(Default)]
struct Script {
    calls: Mutex<Vec<(Vec<i32>, usize)>>,
}

struct Counting {
    script: Arc<Script>,
    info: BackendInfo,
}

struct CountingState {
    script: Arc<Script>,
    batch: usize,
    cached: usize,
}

impl Decoder for Counting {
    fn start(&self, options: &StartOptions) -> Result<Box<dyn DecodeBackend>> {
        Ok(Box::new(CountingState {
            script: Arc::clone(&self.script),
            batch: options.batch,
            cached: 0,
        }))
    }
    fn info(&self) -> &BackendInfo {
        &self.info
    }
    fn vocab_size(&self) -> usize {
        VOCAB
    }
}

impl DecodeBackend for CountingState {
    fn forward(&mut self, input: &StepInput<'_>) -> Result<Vec<f32>> {
        assert_eq!(
            input.total_len - input.new_len,
            self.cached,
            "step must start where the cache ends"
        );
        self.script
            .calls
            .lock()
            .unwrap()
            .push((input.tokens.to_vec(), input.total_len));
        self.cached = input.total_len;
        let mut logits = vec![0.0; self.batch * VOCAB];
        for row in 0..self.batch {
            let last = input.tokens[(row + 1) * input.new_len - 1] as usize;
            logits[row * VOCAB + (last + 1) % VOCAB] = 5.0;
        }
        Ok(logits)
    }
    fn rewind_to(&mut self, len: usize) -> Result<()> {
        self.cached = len;
        Ok(())
    }
    fn cached_len(&self) -> usize {
        self.cached
    }
}

/// A one-layer llama config of `vocab` tokens (EOS 7 and 9) with `search_json`, its model folder,
/// and a backend description on `device`: the generator tests' fixture.
pub(super) fn test_config(
    search_json: &str,
    vocab: usize,
    device: &str,
) -> (Config, BackendInfo, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("model.onnx"), b"").unwrap();
    let json = format!(
        r#"{{"model": {{"type": "llama", "vocab_size": {vocab}, "context_length": 64, "eos_token_id": [7, 9],
        "pad_token_id": 0, "bos_token_id": 1, "decoder": {{"filename": "model.onnx", "head_size": 4,
        "hidden_size": 8, "num_attention_heads": 2, "num_key_value_heads": 1, "num_hidden_layers": 1}}}},
        "search": {search_json}}}"#
    );
    let config = Config::from_json(&json, dir.path()).unwrap();
    let info = BackendInfo {
        backend: "test".into(),
        device: device.into(),
        reasons: vec![],
    };
    (config, info, dir)
}

fn setup(search_json: &str) -> (Counting, Config, tempfile::TempDir) {
    let (config, info, dir) = test_config(search_json, VOCAB, "cpu");
    (
        Counting {
            script: Arc::default(),
            info,
        },
        config,
        dir,
    )
}

fn run_to_end(generator: &mut Generator) {
    while !generator.is_done() {
        generator.generate_next_token().unwrap();
    }
}

#[test]
fn the_final_eos_is_reported_but_not_appended() {
    let (decoder, config, _dir) = setup(r#"{"max_length": 20}"#);
    let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
    g.append_tokens(&[3, 4]).unwrap();
    assert_eq!(g.next_tokens(), &[4]);
    run_to_end(&mut g);
    assert_eq!(g.sequence(0).unwrap(), &[3, 4, 5, 6]);
    assert_eq!(g.next_tokens(), &[7]);
    assert!(g.finished_by_eos());
    // Generating past the end does nothing: the sequence stays, every row reports the pad.
    g.generate_next_token().unwrap();
    assert_eq!(g.sequence(0).unwrap(), &[3, 4, 5, 6]);
    assert_eq!(g.next_tokens(), &[config.model.pad_token_id]);
}

#[test]
fn prompt_runs_at_once_and_the_first_step_only_samples() {
    let (decoder, config, _dir) = setup(r#"{"max_length": 6}"#);
    let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
    g.append_tokens(&[1, 2, 3]).unwrap();
    assert_eq!(
        decoder.script.calls.lock().unwrap().clone(),
        vec![(vec![1, 2, 3], 3)]
    );
    g.generate_next_token().unwrap();
    assert_eq!(
        decoder.script.calls.lock().unwrap().len(),
        1,
        "first token comes from the prompt's logits"
    );
    g.generate_next_token().unwrap();
    assert_eq!(decoder.script.calls.lock().unwrap()[1], (vec![4], 4));
    g.generate_next_token().unwrap();
    assert!(g.is_done(), "max_length 6 reached");
    assert_eq!(g.sequence(0).unwrap(), &[1, 2, 3, 4, 5, 6]);
    assert!(g.generate_next_token().is_err(), "no step past max_length");
}

#[test]
fn min_length_suppresses_eos() {
    let (decoder, config, _dir) = setup(r#"{"max_length": 8, "min_length": 6}"#);
    let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
    g.append_tokens(&[5]).unwrap();
    run_to_end(&mut g);
    // 7 (eos) is suppressed at length 2 < 6; the next best logit is token 0 (all zeros, lowest id).
    assert_eq!(g.sequence(0).unwrap(), &[5, 6, 0, 1, 2, 3, 4, 5]);
}

#[test]
fn finished_rows_are_padded_and_trailing_pads_masked() {
    let (decoder, config, _dir) = setup(r#"{"max_length": 6, "batch_size": 2}"#);
    let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
    g.append_tokens(&[5, 6, 2, 0]).unwrap();
    run_to_end(&mut g);
    // Row 0's EOS is appended because row 1 goes on; then row 0 is padded.
    assert_eq!(g.sequence(0).unwrap(), &[5, 6, 7, 0, 0, 0]);
    assert_eq!(g.sequence(1).unwrap(), &[2, 0, 1, 2, 3, 4]);
    assert!(g.append_tokens(&[1, 1]).is_err(), "batch > 1 appends once");
}

#[test]
fn rewind_continues_from_the_token_at_the_cut_like_the_official_runtime() {
    let (decoder, config, _dir) = setup(r#"{"max_length": 10}"#);
    let calls = || {
        decoder
            .script
            .calls
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap()
    };
    let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
    g.append_tokens(&[0, 1]).unwrap();
    for _ in 0..3 {
        g.generate_next_token().unwrap();
    }
    assert_eq!(g.sequence(0).unwrap(), &[0, 1, 2, 3, 4]);
    g.rewind_to(3).unwrap();
    assert_eq!(g.sequence(0).unwrap(), &[0, 1, 2]);
    // The step feeds the token that stood at position 3 and appends it before choosing.
    g.generate_next_token().unwrap();
    assert_eq!(calls(), (vec![3], 4));
    assert_eq!(g.sequence(0).unwrap(), &[0, 1, 2, 3, 4]);
    // Appending after a rewind drops that token.
    g.rewind_to(2).unwrap();
    g.append_tokens(&[5]).unwrap();
    assert_eq!(calls(), (vec![5], 3));
    g.generate_next_token().unwrap();
    assert_eq!(g.sequence(0).unwrap(), &[0, 1, 5, 6]);
    assert!(g.rewind_to(9).is_err());
    g.rewind_to(0).unwrap();
    assert!(g.generate_next_token().is_err(), "nothing to continue from");
}

#[test]
fn set_logits_replaces_what_is_chosen_from() {
    let (decoder, config, _dir) = setup(r#"{"max_length": 10}"#);
    let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
    g.append_tokens(&[2]).unwrap();
    assert_eq!(g.logits().unwrap()[3], 5.0);
    let mut forced = vec![0.0; VOCAB];
    forced[8] = 1.0;
    g.set_logits(&forced).unwrap();
    g.generate_next_token().unwrap();
    assert_eq!(g.next_tokens(), &[8]);
    // The next step's logits are not computed yet: nothing to replace.
    assert!(g.set_logits(&forced).is_err());
    assert_eq!(g.logits().unwrap().len(), VOCAB);
    assert!(g.set_logits(&[0.0; 3]).is_err(), "wrong size");
    g.generate_next_token().unwrap();
    assert_eq!(g.next_tokens(), &[9]);
}

#[test]
fn bad_tokens_and_lengths_are_errors() {
    let (decoder, config, _dir) = setup(r#"{"max_length": 4}"#);
    let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
    let message = g.append_tokens(&[1, 10]).unwrap_err().to_string();
    assert!(
        message.contains("10") && message.contains("out of range"),
        "{message}"
    );
    assert!(g.append_tokens(&[-1]).is_err());
    let message = g.append_tokens(&[1, 2, 3, 4, 5]).unwrap_err().to_string();
    assert!(message.contains("exceeds max_length 4"), "{message}");
    assert!(g.append_tokens(&[]).is_err());
}

#[test]
fn sampling_is_reproducible_with_a_seed() {
    let (decoder, config, _dir) = setup(
        r#"{"max_length": 30, "do_sample": true, "top_k": 5, "temperature": 2.0, "random_seed": 11}"#,
    );
    let run = || {
        let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
        g.append_tokens(&[1]).unwrap();
        run_to_end(&mut g);
        g.sequence(0).unwrap().to_vec()
    };
    let first = run();
    assert_eq!(first, run());
    // The scripted logits are nearly flat at temperature 2, so sampling leaves the +1 chain.
    let chain: Vec<i32> = (1..first.len() as i32 + 1)
        .map(|t| t % VOCAB as i32)
        .collect();
    assert_ne!(first, chain);
}
