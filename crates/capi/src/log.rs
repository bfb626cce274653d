//! The log sink the library writes to: a callback, else a file, else standard error, and only
//! while the `enabled` option is on (or `GENAI_BRIDGE_LOG=1` is set in the environment); its
//! options are set through `log_options`.

use genai_runtime::Settings;
use genai_runtime::settings::process_env;
use std::collections::HashMap;
use std::ffi::c_char;
use std::fs::File;
use std::io::Write;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

/// The boolean options the official library knows; any other name is an error, as there.
pub const BOOL_OPTIONS: &[&str] = &[
    "enabled",
    "ansi_tags",
    "warning",
    "generate_next_token",
    "append_next_tokens",
    "hit_eos",
    "hit_max_length",
    "model_input_values",
    "model_output_shapes",
    "model_output_values",
    "model_logits",
    "ort_lib",
    "value_stats",
];

/// A log callback: receives the message bytes and their length (not NUL-terminated).
pub type LogCallback = Option<unsafe extern "C" fn(message: *const c_char, length: usize)>;

/// The log's options.
#[derive(Default)]
pub struct State {
    pub flags: HashMap<&'static str, bool>,
    pub file: Option<File>,
    pub callback: LogCallback,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| {
    let mut state = State::default();
    // A malformed value leaves the log off here; opening a model reports it.
    if Settings::log_enabled(&process_env).unwrap_or(false) {
        state.flags.insert("enabled", true);
    }
    Mutex::new(state)
});

/// The log's options, locked.
pub fn state() -> MutexGuard<'static, State> {
    // Plain data; a panic while it was held cannot break an invariant.
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

fn flag(state: &State, name: &str) -> bool {
    state.flags.get(name).copied().unwrap_or(false)
}

/// Writes one line when logging is enabled and `option` (if any) is on.
pub fn write(label: &str, option: Option<&str>, message: &str) {
    let mut state = state();
    if !flag(&state, "enabled") || option.is_some_and(|o| !flag(&state, o)) {
        return;
    }
    let line = if flag(&state, "ansi_tags") {
        format!("\x1b[1m\x1b[44m  {label}  \x1b[0m {message}\n")
    } else {
        format!("{label}: {message}\n")
    };
    if let Some(callback) = state.callback {
        // The callback may call back into this library: release the lock first.
        drop(state);
        // SAFETY: the caller registered this function for exactly this signature; the bytes
        // stay valid for the duration of the call.
        unsafe { callback(line.as_ptr().cast(), line.len()) };
    } else if let Some(file) = state.file.as_mut() {
        let _ = file.write_all(line.as_bytes());
    } else {
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
}

/// Logs an error message that is also returned to the caller.
pub fn error(message: &str) {
    write("error", None, message);
}

/// Logs an informational message (routing decisions and the like).
pub fn info(message: &str) {
    write("info", None, message);
}
