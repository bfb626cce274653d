//! Logging options of the C ABI (`OgaSetLogBool`, `OgaSetLogString`, `OgaSetLogCallback`) and
//! the sink the library writes to: a callback, else a file, else standard error, and only
//! while the `enabled` option is on (or `GENAI_BRIDGE_LOG=1` is set in the environment).

use crate::ffi::{Error, Result, guard, read_str};
use std::collections::HashMap;
use std::ffi::c_char;
use std::fs::File;
use std::io::Write;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

/// The boolean options the official library knows; any other name is an error, as there.
const BOOL_OPTIONS: &[&str] = &[
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

#[derive(Default)]
struct State {
    flags: HashMap<&'static str, bool>,
    file: Option<File>,
    callback: LogCallback,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(|| {
    let mut state = State::default();
    if std::env::var("GENAI_BRIDGE_LOG").is_ok_and(|v| v == "1") {
        state.flags.insert("enabled", true);
    }
    Mutex::new(state)
});

fn state() -> MutexGuard<'static, State> {
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

/// `OgaResult* OgaSetLogBool(const char* name, bool value)`.
///
/// # Safety
/// `name` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaSetLogBool(name: *const c_char, value: bool) -> *mut crate::OgaResult {
    guard("OgaSetLogBool", || {
        // SAFETY: forwarded C contract.
        let name = unsafe { read_str(name, "OgaSetLogBool", "name") }?;
        let Some(known) = BOOL_OPTIONS.iter().find(|o| **o == name) else {
            return Err(Error::Invalid(format!(
                "unknown log option \"{name}\"; known: {}",
                BOOL_OPTIONS.join(", ")
            )));
        };
        state().flags.insert(known, value);
        Ok(())
    })
}

/// `OgaResult* OgaSetLogString(const char* name, const char* value)`: `filename` sends the log
/// to a file (an empty value goes back to standard error).
///
/// # Safety
/// `name` and `value` are NUL-terminated strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaSetLogString(
    name: *const c_char,
    value: *const c_char,
) -> *mut crate::OgaResult {
    guard("OgaSetLogString", || {
        // SAFETY: forwarded C contract.
        let name = unsafe { read_str(name, "OgaSetLogString", "name") }?;
        // SAFETY: forwarded C contract.
        let value = unsafe { read_str(value, "OgaSetLogString", "value") }?;
        if name != "filename" {
            return Err(Error::Invalid(format!(
                "unknown log option \"{name}\"; known: filename"
            )));
        }
        let file =
            if value.is_empty() {
                None
            } else {
                Some(File::create(value).map_err(|e| {
                    Error::Invalid(format!("cannot open log file \"{value}\": {e}"))
                })?)
            };
        let mut state = state();
        state.callback = if file.is_some() { None } else { state.callback };
        state.file = file;
        Ok(())
    })
}

/// `OgaResult* OgaSetLogCallback(void (*callback)(const char*, size_t))`; null removes it.
///
/// # Safety
/// `callback` is null or a function that accepts any message bytes for as long as it is set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaSetLogCallback(callback: LogCallback) -> *mut crate::OgaResult {
    guard("OgaSetLogCallback", || -> Result<()> {
        let mut state = state();
        state.callback = callback;
        if callback.is_some() {
            state.file = None;
        }
        Ok(())
    })
}

/// `void OgaSetTelemetryEnabled(bool)`: genai-bridge sends no telemetry; accepted and ignored.
#[unsafe(no_mangle)]
pub extern "C" fn OgaSetTelemetryEnabled(_enabled: bool) {}
