//! The device token choice end to end: on every fixture, seeded sampled (and greedy, penalised)
//! generations on the CUDA decoder with the device choice give the same token sequences as with
//! it turned off (full logits to the host's sampler). Needs a GPU: with none (as in CI) it
//! prints a loud NOT RUN line.
#![cfg(feature = "cuda")]

mod common;

use common::{fixtures, load};
use genai_backend_native::cuda::{self, CudaDecoder, CudaOptions};
use genai_config::Search;
use genai_engine::{Choice, Decoder, Generator, SamplingSpec, StartOptions, StepInput};

/// Generated tokens per generation at most.
const TOKENS: usize = 48;

fn searches(base: &Search, prompt: usize) -> Vec<Search> {
    let with = |f: &dyn Fn(&mut Search)| {
        let mut s = base.clone();
        s.max_length = prompt + TOKENS;
        s.batch_size = 1;
        s.num_beams = 1;
        s.no_repeat_ngram_size = 0;
        s.repetition_penalty = 1.0;
        s.min_length = 0;
        f(&mut s);
        s
    };
    vec![
        with(&|s| s.do_sample = false),
        with(&|s| {
            s.do_sample = false;
            s.repetition_penalty = 1.3;
            s.min_length = prompt + 20;
        }),
        with(&|s| {
            s.do_sample = true;
            s.top_k = 0;
            s.top_p = 1.0;
            s.temperature = 1.0;
            s.random_seed = 7;
        }),
        with(&|s| {
            s.do_sample = true;
            s.top_k = 20;
            s.top_p = 0.9;
            s.temperature = 0.8;
            s.random_seed = 11;
            s.repetition_penalty = 1.1;
        }),
        with(&|s| {
            s.do_sample = true;
            s.top_k = 0;
            s.top_p = 0.7;
            s.temperature = 1.5;
            s.random_seed = 12;
            s.min_length = prompt + 10;
        }),
    ]
}

fn generate(
    decoder: &CudaDecoder,
    l: &common::Loaded,
    search: &Search,
    prompt: &[i32],
) -> Vec<i32> {
    let mut g = Generator::new(decoder, &l.config.model, search).expect("generator");
    g.append_tokens(prompt).expect("prompt");
    while !g.is_done() {
        g.generate_next_token().expect("step");
    }
    g.sequence(0).expect("row").to_vec()
}

#[test]
fn device_choice_gives_the_host_choice_tokens_on_every_fixture() {
    if let Err(why) = cuda::probe() {
        eprintln!("NOT RUN: device_choice_gives_the_host_choice_tokens_on_every_fixture: {why}");
        return;
    }
    let mut failures = Vec::new();
    for dir in fixtures() {
        let l = load(&dir);
        let on = CudaOptions {
            device_sampling: Some(true),
            ..CudaOptions::default()
        };
        let off = CudaOptions {
            device_sampling: Some(false),
            ..CudaOptions::default()
        };
        let device = CudaDecoder::load(&l.model, &l.plan, &on).expect("cuda");
        let host = CudaDecoder::load(&l.model, &l.plan, &off).expect("cuda");
        let vocab = device.vocab_size() as i32;
        let prompt: Vec<i32> = (1..=9).map(|i| (i * 7919) % vocab).collect();
        for (i, search) in searches(&l.config.search, prompt.len()).iter().enumerate() {
            let a = generate(&device, &l, search, &prompt);
            let b = generate(&host, &l, search, &prompt);
            println!(
                "{} search {i}: {} tokens, {}",
                dir.display(),
                a.len() - prompt.len(),
                if a == b { "identical" } else { "DIFFER" }
            );
            if a != b {
                failures.push(format!("{} search {i}: {a:?} vs {b:?}", dir.display()));
            }
        }
        // The device path really answers (and declines with no_repeat_ngram).
        let start = StartOptions {
            batch: 1,
            max_length: 32,
            past_present_share_buffer: true,
        };
        let mut state = device.start(&start).expect("start");
        let mask = vec![1i64; prompt.len()];
        let input = StepInput {
            tokens: &prompt,
            new_len: prompt.len(),
            attention_mask: &mask,
            total_len: prompt.len(),
        };
        let mut spec = SamplingSpec {
            choice: Choice::Greedy,
            penalty: 1.0,
            penalized: &[],
            suppressed: &[],
            no_repeat_ngram: 3,
        };
        assert_eq!(state.forward_choose(&input, &spec).expect("declines"), None);
        spec.no_repeat_ngram = 0;
        let id = state.forward_choose(&input, &spec).expect("chooses");
        assert!(id.is_some_and(|id| (0..vocab).contains(&id)), "{id:?}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
