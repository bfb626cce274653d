//! Concurrency, cancellation and lifetime through the C ABI: many threads sharing one model get
//! exactly the single-threaded results; `terminate_session` from another thread stops a
//! generation promptly; thousands of create/destroy cycles leave no live handle behind and keep
//! resident memory bounded.

mod common;

use common::ffi::*;
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Instant;

fn fixture(name: &str) -> String {
    format!(
        "{}/../../models/fixtures/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A prompt and its search options.
type Job = (Vec<i32>, Vec<(&'static str, f64)>);

/// Different prompts and search options, one generation each.
fn jobs() -> Vec<Job> {
    vec![
        (vec![1, 2, 3], vec![("max_length", 24.0)]),
        (
            vec![42, 7],
            vec![("max_length", 20.0), ("repetition_penalty", 1.3)],
        ),
        (
            vec![5],
            vec![("max_length", 28.0), ("no_repeat_ngram_size", 2.0)],
        ),
        (
            vec![9, 8, 7, 6],
            vec![("max_length", 18.0), ("min_length", 16.0)],
        ),
        (
            vec![100, 200, 300],
            vec![("max_length", 22.0), ("top_k", 1.0)],
        ),
        (
            vec![11, 12],
            vec![("max_length", 26.0), ("temperature", 0.0)],
        ),
    ]
}

/// Runs every job on `threads` threads at once (each thread in its own order, twice) and checks
/// each result against the single-threaded one.
fn shared_model_matches_single_threaded(backend: &'static str, threads: usize) {
    // SAFETY (env): the tests in this file that read GENAI_BRIDGE_BACKEND run one at a time
    // under SERIAL, and the library reads it only while a model is being created.
    unsafe { std::env::set_var("GENAI_BRIDGE_BACKEND", backend) };
    let model = Arc::new(Model::open(&fixture("qwen2-fp32-cpu")).expect("open the model"));
    let jobs = jobs();
    let expected: Vec<Vec<i32>> = jobs
        .iter()
        .map(|(prompt, options)| generate(&model, prompt, options).expect("single-threaded"))
        .collect();
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (model, barrier, jobs, expected) = (
                Arc::clone(&model),
                Arc::clone(&barrier),
                jobs.clone(),
                expected.clone(),
            );
            std::thread::spawn(move || {
                barrier.wait();
                for round in 0..3 {
                    for i in 0..jobs.len() {
                        let j = (i + t + round) % jobs.len();
                        let (prompt, options) = &jobs[j];
                        let got = generate(&model, prompt, options).expect("generate");
                        assert_eq!(got, expected[j], "{backend}: thread {t}, job {j}");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("a worker thread panicked");
    }
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn threads_sharing_one_model_get_the_single_threaded_results() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for backend in ["ort", "native"] {
        let start = Instant::now();
        shared_model_matches_single_threaded(backend, 8);
        println!(
            "{backend}: 8 threads × 3 rounds × {} jobs matched in {:.1?}",
            jobs().len(),
            start.elapsed()
        );
    }
}

#[test]
fn terminate_session_from_another_thread_stops_the_generation() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY (env): serialised as above.
    unsafe { std::env::set_var("GENAI_BRIDGE_BACKEND", "native") };
    let model = Model::open(&fixture("qwen2-fp32-cpu")).expect("open");
    let mut params = ptr::null_mut();
    let mut generator = ptr::null_mut();
    // SAFETY: live model; valid out pointers and strings.
    unsafe {
        check(OgaCreateGeneratorParams(model.0, &mut params)).expect("params");
        check(OgaGeneratorParamsSetSearchNumber(
            params,
            c("max_length").as_ptr(),
            128.0,
        ))
        .expect("max_length");
        check(OgaCreateGenerator(model.0, params, &mut generator)).expect("generator");
        check(OgaGenerator_AppendTokens(generator, [1, 2, 3].as_ptr(), 3)).expect("append");
    }
    struct Handle(*mut OgaGenerator);
    // SAFETY: the C ABI allows SetRuntimeOption("terminate_session") from another thread.
    unsafe impl Send for Handle {}
    let remote = Handle(generator);
    let started = Arc::new(AtomicBool::new(false));
    let started_seen = Arc::clone(&started);
    let worker = std::thread::spawn(move || {
        let remote = remote;
        let mut steps = 0;
        loop {
            // SAFETY: live generator, used by this thread only (plus the option call).
            match check(unsafe { OgaGenerator_GenerateNextToken(remote.0) }) {
                Ok(()) => steps += 1,
                Err(message) => return (steps, message),
            }
            started_seen.store(true, Ordering::SeqCst);
            // SAFETY: as above.
            if unsafe { OgaGenerator_IsDone(remote.0) } {
                return (steps, String::new());
            }
        }
    });
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    let asked = Instant::now();
    // SAFETY: live generator; this call is documented as safe from another thread.
    check(unsafe {
        OgaGenerator_SetRuntimeOption(generator, c("terminate_session").as_ptr(), c("1").as_ptr())
    })
    .expect("terminate");
    let (steps, message) = worker.join().expect("worker");
    let waited = asked.elapsed();
    println!("terminated after {steps} steps, {waited:?} after the request: {message}");
    assert!(
        message.contains("cancelled"),
        "expected a cancellation, got {message:?}"
    );
    assert!(steps < 124, "the generation ran to the end ({steps} steps)");
    // SAFETY: live generator; resuming is allowed after "0".
    unsafe {
        check(OgaGenerator_SetRuntimeOption(
            generator,
            c("terminate_session").as_ptr(),
            c("0").as_ptr(),
        ))
        .expect("resume");
        check(OgaGenerator_GenerateNextToken(generator)).expect("a step after resuming");
        OgaDestroyGenerator(generator);
        OgaDestroyGeneratorParams(params);
    }
}

/// Resident set size of this process, in bytes.
#[cfg(target_os = "linux")]
fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("resident pages");
    pages * 4096
}

/// One cycle of every short-lived object: tokenizer, stream, sequences, params, generator.
fn one_cycle(model: &Model) {
    let mut tokenizer = ptr::null_mut();
    let mut stream = ptr::null_mut();
    let mut sequences = ptr::null_mut();
    let mut text = ptr::null();
    // SAFETY: live model; every handle created here is destroyed here, once.
    unsafe {
        check(OgaCreateTokenizer(model.0, &mut tokenizer)).expect("tokenizer");
        check(OgaCreateTokenizerStream(tokenizer, &mut stream)).expect("stream");
        check(OgaCreateSequences(&mut sequences)).expect("sequences");
        check(OgaTokenizerEncode(
            tokenizer,
            c("hello world").as_ptr(),
            sequences,
        ))
        .expect("encode");
        assert_eq!(OgaSequencesCount(sequences), 1);
        let mut piece = ptr::null();
        check(OgaTokenizerStreamDecode(stream, 42, &mut piece)).expect("stream decode");
        check(OgaTokenizerDecode(
            tokenizer,
            [42, 43].as_ptr(),
            2,
            &mut text,
        ))
        .expect("decode");
        OgaDestroyString(text);
        OgaDestroySequences(sequences);
        OgaDestroyTokenizerStream(stream);
        OgaDestroyTokenizer(tokenizer);
    }
    generate(model, &[1, 2], &[("max_length", 4.0)]).expect("generate");
}

#[test]
#[cfg(target_os = "linux")]
fn create_destroy_cycles_leave_nothing_behind() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY (env): serialised as above.
    unsafe { std::env::set_var("GENAI_BRIDGE_BACKEND", "ort") };
    let baseline = onnxruntime_genai::live_count();
    let model = Model::open(&fixture("qwen2-fp32-cpu")).expect("open");
    for _ in 0..200 {
        one_cycle(&model);
    }
    let warm = resident_bytes();
    let cycles = 2000;
    for _ in 0..cycles {
        one_cycle(&model);
    }
    let after_cycles = resident_bytes();
    drop(model);
    for _ in 0..20 {
        let model = Model::open(&fixture("qwen2-fp32-cpu")).expect("open");
        one_cycle(&model);
    }
    let after_models = resident_bytes();
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    println!(
        "resident: {:.1} MB after warm-up, {:.1} MB after {cycles} cycles, {:.1} MB after 20 \
         model create/destroy cycles",
        mb(warm),
        mb(after_cycles),
        mb(after_models)
    );
    assert_eq!(
        onnxruntime_genai::live_count(),
        baseline,
        "handles or strings left alive"
    );
    assert!(
        after_cycles.saturating_sub(warm) < 16 << 20,
        "resident memory grew by {:.1} MB over {cycles} cycles",
        mb(after_cycles.saturating_sub(warm))
    );
    assert!(
        after_models.saturating_sub(warm) < 64 << 20,
        "resident memory grew by {:.1} MB over 20 model cycles",
        mb(after_models.saturating_sub(warm))
    );
}
