//! The device token choice end to end: on every fixture, seeded sampled (and greedy, penalised)
//! generations on the CUDA decoder with the device choice give the same token sequences as with
//! it turned off (full logits to the host's sampler). Needs a GPU: with none (as in CI) it
//! prints a loud NOT RUN line.
#![cfg(feature = "cuda")]

mod common;

use common::{fixtures, load};
use genai_backend_native::cuda::{self, CudaDecoder};
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
        let on = common::cuda_with(|t| t.device_sampling = true);
        let off = common::cuda_with(|t| t.device_sampling = false);
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

/// Logits as their bits, so that answers compare exactly.
fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// A fixed sequence of calls on one generation that takes steps run ahead, and leaves them
/// untaken every way it can: another token, a rewind, several tokens, the full-logits path,
/// the end of the cache. Every answer, in order.
fn ahead_script(decoder: &CudaDecoder, vocab: i32) -> Vec<Vec<u32>> {
    let max_length = 32;
    let start = StartOptions {
        batch: 1,
        max_length,
        past_present_share_buffer: true,
    };
    let mut state = decoder.start(&start).expect("start");
    let greedy = SamplingSpec {
        choice: Choice::Greedy,
        penalty: 1.0,
        penalized: &[],
        suppressed: &[],
        no_repeat_ngram: 0,
    };
    let mask = vec![1i64; max_length];
    let mut total = 0;
    let mut answers = Vec::new();
    let choose =
        |state: &mut Box<dyn genai_engine::DecodeBackend>, total: &mut usize, tokens: &[i32]| {
            *total += tokens.len();
            let input = StepInput {
                tokens,
                new_len: tokens.len(),
                attention_mask: &mask[..*total],
                total_len: *total,
            };
            let id = state
                .forward_choose(&input, &greedy)
                .expect("step")
                .expect("device choice");
            assert!((0..vocab).contains(&id), "{id}");
            id
        };
    let prompt: Vec<i32> = (1..=9).map(|i| (i * 7919) % vocab).collect();
    let t1 = choose(&mut state, &mut total, &prompt);
    let t2 = choose(&mut state, &mut total, &[t1]); // takes the step ahead
    let other = (t2 + 1) % vocab;
    let t3 = choose(&mut state, &mut total, &[other]); // another token: not taken
    total += 1;
    let input = StepInput {
        tokens: &[t3],
        new_len: 1,
        attention_mask: &mask[..total],
        total_len: total,
    };
    answers.push(bits(&state.forward(&input).expect("logits"))); // the full-logits path takes it
    let t4 = choose(&mut state, &mut total, &[other]);
    state.rewind_to(10).expect("rewind"); // the step ahead on t4 is not taken
    total = 10;
    let t5 = choose(&mut state, &mut total, &[t2]);
    let t6 = choose(&mut state, &mut total, &[t5, 5, 6]); // several tokens: not taken
    let mut tokens = vec![t1, t2, t3, t4, t5, t6];
    let mut last = t6;
    while total < max_length {
        last = choose(&mut state, &mut total, &[last]); // none ahead at the cache's end
        tokens.push(last);
    }
    answers.push(tokens.iter().map(|&t| t as u32).collect());
    answers
}

#[test]
fn steps_run_ahead_give_the_answers_of_steps_run_in_turn() {
    if let Err(why) = cuda::probe() {
        eprintln!("NOT RUN: steps_run_ahead_give_the_answers_of_steps_run_in_turn: {why}");
        return;
    }
    let mut failures = Vec::new();
    for dir in fixtures() {
        let l = load(&dir);
        let with = |run_ahead| common::cuda_with(|t| t.run_ahead = run_ahead);
        let ahead = CudaDecoder::load(&l.model, &l.plan, &with(true)).expect("cuda");
        let in_turn = CudaDecoder::load(&l.model, &l.plan, &with(false)).expect("cuda");
        let vocab = ahead.vocab_size() as i32;
        let (a, b) = (ahead_script(&ahead, vocab), ahead_script(&in_turn, vocab));
        let (ca, cb) = (ahead.counters(), in_turn.counters());
        println!(
            "{}: {} answers {}, run ahead {} (unused {}), in turn {}",
            dir.display(),
            a.len(),
            if a == b { "identical" } else { "DIFFER" },
            ca.ahead_steps,
            ca.ahead_unused,
            cb.ahead_steps
        );
        if a != b {
            failures.push(format!("{}: answers differ", dir.display()));
        }
        // Untaken: after t2 (another token), t4 (the rewind) and t5 (several tokens); taken
        // after t1, t3 (by the logits) and from t6 to the cache's end.
        if ca.ahead_unused < 3 || ca.ahead_steps < ca.ahead_unused + 2 || cb.ahead_steps != 0 {
            failures.push(format!("{}: counters {ca:?} / {cb:?}", dir.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
