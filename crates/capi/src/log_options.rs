//! The C ABI's logging options: `OgaSetLogBool`, `OgaSetLogString` and `OgaSetLogCallback`,
//! which set what the log sink (`log`) writes and where.

use crate::ffi::{Error, Result, guard, read_str};
use crate::log::{BOOL_OPTIONS, LogCallback, state};
use std::ffi::c_char;
use std::fs::File;

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
