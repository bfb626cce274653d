//! The Rust API under concurrency: one opened decoder shared by many threads, each running its
//! own generators with different search options, gives exactly the single-threaded results, on
//! ONNX Runtime and on the native decoder; a generation cancelled from another thread stops.

use genai_config::{Config, Search};
use genai_engine::{BackendRequest, Decoder, Error, Generator};
use genai_runtime::{OpenOptions, Session};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

fn config() -> Config {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/fixtures/qwen2-fp32-cpu");
    Config::load(&dir).expect("fixture config")
}

fn decoder(config: &Config, backend: BackendRequest) -> Arc<dyn Decoder> {
    let options = OpenOptions {
        backend: Some(backend),
        ..OpenOptions::default()
    };
    let session = Session::from_config(config.clone(), &options).expect("open");
    Arc::clone(session.decoder())
}

/// Prompt and search options per job.
fn jobs(config: &Config) -> Vec<(Vec<i32>, Search)> {
    let with = |edits: &[(&str, f64)]| {
        let mut search = config.search.clone();
        for (name, value) in edits {
            search.set_number(name, *value).expect("search option");
        }
        search
    };
    vec![
        (vec![1, 2, 3], with(&[("max_length", 24.0)])),
        (
            vec![42, 7],
            with(&[("max_length", 20.0), ("repetition_penalty", 1.3)]),
        ),
        (
            vec![5],
            with(&[("max_length", 28.0), ("no_repeat_ngram_size", 2.0)]),
        ),
        (
            vec![9, 8, 7, 6],
            with(&[("max_length", 18.0), ("min_length", 16.0)]),
        ),
    ]
}

fn run(decoder: &dyn Decoder, config: &Config, prompt: &[i32], search: &Search) -> Vec<i32> {
    let mut g = Generator::new(decoder, &config.model, search).expect("generator");
    g.append_tokens(prompt).expect("append");
    while !g.is_done() {
        g.generate_next_token().expect("step");
    }
    g.sequence(0).expect("row 0").to_vec()
}

#[test]
fn threads_sharing_one_decoder_get_the_single_threaded_results() {
    let config = Arc::new(config());
    for backend in [BackendRequest::Ort, BackendRequest::Native] {
        let decoder = decoder(&config, backend);
        let jobs = Arc::new(jobs(&config));
        let expected: Arc<Vec<Vec<i32>>> = Arc::new(
            jobs.iter()
                .map(|(p, s)| run(decoder.as_ref(), &config, p, s))
                .collect(),
        );
        let threads: Vec<_> = (0..6)
            .map(|t| {
                let (decoder, config, jobs, expected) = (
                    Arc::clone(&decoder),
                    Arc::clone(&config),
                    Arc::clone(&jobs),
                    Arc::clone(&expected),
                );
                std::thread::spawn(move || {
                    for round in 0..3 {
                        for i in 0..jobs.len() {
                            let j = (i + t + round) % jobs.len();
                            let got = run(decoder.as_ref(), &config, &jobs[j].0, &jobs[j].1);
                            assert_eq!(got, expected[j], "{backend:?}: thread {t}, job {j}");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("worker panicked");
        }
    }
}

#[test]
fn a_generation_cancelled_from_another_thread_stops() {
    let config = config();
    let decoder = decoder(&config, BackendRequest::Native);
    let mut search = config.search.clone();
    search.set_number("max_length", 128.0).expect("max_length");
    let mut g = Generator::new(decoder.as_ref(), &config.model, &search).expect("generator");
    g.append_tokens(&[1, 2, 3]).expect("append");
    g.generate_next_token().expect("first step");
    let cancel = g.cancel_handle();
    let canceller = std::thread::spawn(move || cancel.store(true, Ordering::SeqCst));
    canceller.join().expect("canceller");
    assert!(matches!(g.generate_next_token(), Err(Error::Cancelled)));
    assert!(g.sequence_len() < 128);
}
