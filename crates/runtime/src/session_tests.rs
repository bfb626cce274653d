//! The session on the bundled fixtures: shared across threads, the batch fallback to ONNX
//! Runtime, the tokenizer's loading, and errors that name each cause once.

use super::*;
use genai_engine::{BackendRequest, DecodeBackend, StartOptions};
use std::path::PathBuf;

fn fixture_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/fixtures")
        .join(name)
}

/// A writable copy of a bundled fixture.
fn copy_fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = temp.path().join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    for entry in std::fs::read_dir(fixture_dir(name)).expect("fixture") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, dir.join(path.file_name().expect("name"))).expect("copy");
    }
    (temp, dir)
}

/// Opens a fixture on `backend` with an empty environment.
fn session(dir: &Path, backend: BackendRequest, eager_tokenizer: bool) -> Result<Session, Error> {
    let config = load_config(dir)?;
    let options = OpenOptions {
        backend: Some(backend),
        eager_tokenizer,
        ..OpenOptions::default()
    };
    let settings = Settings::parse(&|_| None, &config, &options)?;
    Session::with_settings(config, &options, settings)
}

fn greedy(session: &Session, search: &Search, prompt: &[i32]) -> Vec<i32> {
    let mut g = session.generator(search).expect("generator");
    g.append_tokens(prompt).expect("append");
    while !g.is_done() {
        g.generate_next_token().expect("step");
    }
    g.sequence(0).expect("row 0").to_vec()
}

fn search_of(session: &Session, max_length: f64, batch: f64) -> Search {
    let mut search = session.search().clone();
    search
        .set_number("max_length", max_length)
        .expect("max_length");
    search.set_number("batch_size", batch).expect("batch_size");
    search
}

#[test]
fn one_session_serves_generations_on_many_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Session>();
    let dir = fixture_dir("qwen2-fp32-cpu");
    let session = Arc::new(session(&dir, BackendRequest::Native, false).expect("opens"));
    assert_eq!(session.route().backend, BackendKind::Native);
    assert_eq!(session.info().backend, "native");
    assert_eq!(session.device(), DeviceKind::Cpu);
    assert_eq!(session.logits_type(), Some(DataType::Float));
    let search = search_of(&session, 12.0, 1.0);
    let alone = greedy(&session, &search, &[1, 2, 3]);
    assert_eq!(alone.len(), 12);
    let threads: Vec<_> = (0..3)
        .map(|_| {
            let (session, search) = (Arc::clone(&session), search.clone());
            std::thread::spawn(move || greedy(&session, &search, &[1, 2, 3]))
        })
        .collect();
    for thread in threads {
        assert_eq!(thread.join().expect("thread"), alone);
    }
}

/// A decoder that runs one row only, as a native backend without batches does.
struct OneRow(Arc<dyn Decoder>);

impl Decoder for OneRow {
    fn start(&self, options: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
        if options.batch > 1 {
            return Err(genai_engine::Error::InvalidState("one row only".into()));
        }
        self.0.start(options)
    }
    fn info(&self) -> &BackendInfo {
        self.0.info()
    }
    fn vocab_size(&self) -> usize {
        self.0.vocab_size()
    }
}

#[test]
fn a_batch_the_native_decoder_cannot_run_goes_to_onnx_runtime() {
    let dir = fixture_dir("qwen2-fp32-cpu");
    let mut session = session(&dir, BackendRequest::Native, false).expect("opens");
    session.decoder = Arc::new(OneRow(Arc::clone(&session.decoder)));
    let one = session
        .start(&search_of(&session, 8.0, 1.0))
        .expect("batch 1");
    assert!(one.fallback.is_none());
    let two = session
        .start(&search_of(&session, 8.0, 2.0))
        .expect("batch 2");
    let why = two.fallback.expect("a fallback");
    assert!(
        why.starts_with("batch size 2 runs on ONNX Runtime"),
        "{why}"
    );
    assert!(why.contains("one row only"), "{why}");
    assert_eq!(two.generator.batch_size(), 2);
    // The fallback decoder opens once.
    let first = session.fallback_decoder().expect("fallback");
    let again = session.fallback_decoder().expect("fallback");
    assert!(Arc::ptr_eq(&first, &again));
}

#[test]
fn the_tokenizer_loads_at_open_only_when_asked() {
    let (_temp, dir) = copy_fixture("qwen2-fp32-cpu");
    std::fs::remove_file(dir.join("tokenizer.json")).expect("rm");
    let lazy = session(&dir, BackendRequest::Ort, false).expect("opens without a tokenizer");
    let Err(err) = lazy.tokenizer() else {
        panic!("a tokenizer without tokenizer.json");
    };
    assert!(err.to_string().contains("tokenizer.json"), "{err}");
    let err = session(&dir, BackendRequest::Ort, true)
        .err()
        .expect("eager fails");
    assert!(err.to_string().contains("tokenizer.json"), "{err}");
    let whole = session(&fixture_dir("qwen2-fp32-cpu"), BackendRequest::Ort, true).expect("ok");
    let a = whole.tokenizer().expect("loaded");
    let b = whole.tokenizer().expect("loaded");
    assert!(Arc::ptr_eq(&a, &b));
}

/// Every message of an error and its sources, as a chain printer joins them.
fn chain(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut next = error.source();
    while let Some(cause) = next {
        parts.push(cause.to_string());
        next = cause.source();
    }
    parts.join(": ")
}

#[test]
fn a_truncated_data_file_names_its_cause_once() {
    let (_temp, dir) = copy_fixture("llama-fp32-cpu");
    let data = dir.join("model.onnx.data");
    let bytes = std::fs::read(&data).expect("read");
    std::fs::write(&data, &bytes[..bytes.len() / 2]).expect("truncate");
    let err = session(&dir, BackendRequest::Ort, false)
        .err()
        .expect("a truncated model does not open");
    let printed = chain(&err);
    assert_eq!(
        printed.matches("lies past the end of").count(),
        1,
        "{printed}"
    );
    assert!(printed.contains("model.onnx.data"), "{printed}");
}

#[test]
fn a_missing_config_names_its_cause_once() {
    let temp = tempfile::tempdir().expect("temp dir");
    let err = Session::open(temp.path(), &OpenOptions::default())
        .err()
        .expect("no config");
    let printed = chain(&err);
    assert_eq!(
        printed.matches("no genai_config.json").count(),
        1,
        "{printed}"
    );
}

#[test]
fn the_logits_type_is_the_one_the_graph_declares() {
    for (name, want) in [
        ("qwen2-fp32-cpu", DataType::Float),
        ("qwen2-int4-cpu", DataType::Float),
        ("llama-fp16-cuda", DataType::Float16),
        // The builder's bf16 models declare float32 logits: the weights' precision does
        // not say it.
        ("llama-bf16-cuda", DataType::Float),
    ] {
        let config = load_config(&fixture_dir(name)).expect("fixture config");
        let model = crate::load_graph(&config).expect("fixture graph");
        let logits = &config.model.decoder.outputs.logits;
        assert_eq!(model.output_type(logits), Some(want), "{name}");
    }
    let config = load_config(&fixture_dir("qwen2-fp32-cpu")).expect("fixture config");
    let model = crate::load_graph(&config).expect("fixture graph");
    assert_eq!(model.output_type("no_such_output"), None);
    // A graph input is not an output.
    assert_eq!(model.output_type("input_ids"), None);
}
