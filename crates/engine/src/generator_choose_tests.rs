//! The generator's device-choice path against its full-logits path, with a backend that
//! emulates a device sampler on the host: same seed, same tokens; logits still reachable;
//! no_repeat_ngram keeps the full-logits path.

use super::*;
use crate::backend::BackendInfo;
use crate::sampling::select;
use genai_config::Config;
use std::sync::Mutex;

const VOCAB: usize = 48;

/// Pseudo-random logits of a position: a function of the last token and the length only.
fn logits_of(last: i32, total_len: usize) -> Vec<f32> {
    let mut x = (last as u64 + 1) * 0x9e37_79b9 + total_len as u64 * 0x85eb_ca6b;
    (0..VOCAB)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32) * 6.0 - 3.0
        })
        .collect()
}

#[derive(Default)]
struct Log {
    /// Steps chosen through `forward_choose`, and full-logits passes.
    chosen: usize,
    forwards: usize,
}

struct Emulated {
    device: bool,
    log: Arc<Mutex<Log>>,
    info: BackendInfo,
}

struct EmulatedState {
    device: bool,
    log: Arc<Mutex<Log>>,
    cached: usize,
}

impl Decoder for Emulated {
    fn start(&self, _: &StartOptions) -> Result<Box<dyn DecodeBackend>> {
        Ok(Box::new(EmulatedState {
            device: self.device,
            log: Arc::clone(&self.log),
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

impl EmulatedState {
    fn pass(&mut self, input: &StepInput<'_>) -> Vec<f32> {
        assert_eq!(input.total_len - input.new_len, self.cached);
        self.cached = input.total_len;
        logits_of(input.tokens[input.new_len - 1], input.total_len)
    }
}

impl DecodeBackend for EmulatedState {
    fn forward(&mut self, input: &StepInput<'_>) -> Result<Vec<f32>> {
        self.log.lock().unwrap().forwards += 1;
        Ok(self.pass(input))
    }
    fn forward_choose(
        &mut self,
        input: &StepInput<'_>,
        spec: &SamplingSpec<'_>,
    ) -> Result<Option<i32>> {
        if !self.device || spec.no_repeat_ngram != 0 {
            return Ok(None);
        }
        self.log.lock().unwrap().chosen += 1;
        let mut logits = self.pass(input);
        for &id in spec.suppressed {
            logits[id as usize] = f32::NEG_INFINITY;
        }
        if spec.penalty != 1.0 && spec.penalty > 0.0 {
            for &id in spec.penalized {
                let l = &mut logits[id as usize];
                *l = if *l < 0.0 {
                    *l * spec.penalty
                } else {
                    *l / spec.penalty
                };
            }
        }
        let id = match spec.choice {
            Choice::Greedy => crate::sampling::argmax(&logits),
            Choice::Sample {
                top_k,
                top_p,
                temperature,
                uniform,
            } => select(&logits, top_k, top_p, temperature, uniform, &mut Vec::new()),
        };
        Ok(Some(id as i32))
    }
    fn rewind_to(&mut self, len: usize) -> Result<()> {
        self.cached = len;
        Ok(())
    }
    fn cached_len(&self) -> usize {
        self.cached
    }
}

fn setup(search_json: &str, device: bool) -> (Emulated, Config, tempfile::TempDir) {
    let (config, info, dir) = super::tests::test_config(search_json, VOCAB, "emulated");
    let log = Arc::default();
    (Emulated { device, log, info }, config, dir)
}

/// The sequence of a generation, and how many steps the device chose.
fn generate(search: &str, device: bool) -> (Vec<i32>, usize, usize) {
    let (decoder, config, _dir) = setup(search, device);
    let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
    g.append_tokens(&[3, 5, 11]).unwrap();
    while !g.is_done() {
        g.generate_next_token().unwrap();
    }
    let log = decoder.log.lock().unwrap();
    (g.sequence(0).unwrap().to_vec(), log.chosen, log.forwards)
}

#[test]
fn device_choice_gives_the_host_path_tokens_for_a_seed() {
    let searches = [
        r#"{"max_length": 40, "min_length": 30}"#,
        r#"{"max_length": 40, "repetition_penalty": 1.5}"#,
        r#"{"max_length": 40, "do_sample": true, "top_k": 8, "temperature": 0.9, "random_seed": 3}"#,
        r#"{"max_length": 40, "do_sample": true, "top_k": 0, "top_p": 0.8, "random_seed": 4, "repetition_penalty": 1.3, "min_length": 20}"#,
        r#"{"max_length": 40, "do_sample": true, "top_k": 20, "top_p": 0.6, "temperature": 1.7, "random_seed": 5}"#,
    ];
    for search in searches {
        let (host, host_chosen, _) = generate(search, false);
        let (device, chosen, forwards) = generate(search, true);
        assert_eq!(host, device, "{search}");
        assert_eq!(host_chosen, 0);
        // Every decode step but the first choice after the prompt ran on the "device" (a
        // final EOS is chosen but not appended).
        let generated = device.len() - 3;
        assert!(chosen + 1 == generated || chosen == generated, "{search}");
        assert_eq!(forwards, 1, "{search}: only the prompt returned logits");
    }
}

#[test]
fn no_repeat_ngram_keeps_the_full_logits_path() {
    let search = r#"{"max_length": 30, "do_sample": true, "top_k": 8, "random_seed": 3, "no_repeat_ngram_size": 2}"#;
    let (host, _, _) = generate(search, false);
    let (device, chosen, _) = generate(search, true);
    assert_eq!(host, device);
    assert_eq!(chosen, 0);
}

#[test]
fn logits_stay_reachable_after_a_device_step() {
    let (decoder, config, _dir) = setup(r#"{"max_length": 20}"#, true);
    let mut g = Generator::new(&decoder, &config.model, &config.search).unwrap();
    g.append_tokens(&[3, 5]).unwrap();
    g.generate_next_token().unwrap();
    g.generate_next_token().unwrap();
    assert_eq!(decoder.log.lock().unwrap().chosen, 1);
    // The model's output of that step is computed again on request.
    let seq = g.sequence(0).unwrap().to_vec();
    let (positions, logits) = g.output_logits().unwrap();
    assert_eq!(positions, 1);
    assert_eq!(logits, logits_of(seq[2], 3));
    assert_eq!(g.sequence(0).unwrap(), seq.as_slice());
    // logits() runs the next step with full logits, and set_logits still applies to it.
    let next = g.logits().unwrap().to_vec();
    assert_eq!(next, logits_of(seq[3], 4));
    let mut forced = vec![0.0; VOCAB];
    forced[13] = 50.0;
    g.set_logits(&forced).unwrap();
    g.generate_next_token().unwrap();
    assert_eq!(g.next_tokens(), [13]);
    g.generate_next_token().unwrap();
    assert_eq!(decoder.log.lock().unwrap().chosen, 2);
}
