//! The boundary itself: the error type, the `OgaResult` handle, the registry of live handles,
//! and the guards every exported function runs its body in (no panic crosses `extern "C"`,
//! every pointer is checked before it is read).

use std::any::Any;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

/// Everything an exported function can fail with; the message becomes the `OgaResult` text.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{function}: argument `{argument}` is null")]
    Null {
        function: &'static str,
        argument: &'static str,
    },
    #[error(
        "{function}: argument `{argument}` is not a live {kind} (it was destroyed, or it is a \
         pointer of another type)"
    )]
    BadHandle {
        function: &'static str,
        argument: &'static str,
        kind: &'static str,
    },
    #[error("{function}: argument `{argument}` is not valid UTF-8")]
    Utf8 {
        function: &'static str,
        argument: &'static str,
    },
    #[error("{function} is not supported by genai-bridge ({why})")]
    Unsupported {
        function: &'static str,
        why: &'static str,
    },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Config(#[from] genai_config::Error),
    #[error(transparent)]
    Engine(#[from] genai_engine::Error),
    #[error(transparent)]
    Tokenizer(#[from] genai_tokenizer::Error),
    #[error(transparent)]
    Runtime(#[from] genai_runtime::Error),
    #[error("{function}: internal error: {message}")]
    Panic {
        function: &'static str,
        message: String,
    },
}

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error object of a failed call (`NULL` is returned on success).
pub struct OgaResult {
    message: CString,
}

impl Handle for OgaResult {
    const KIND: &'static str = "OgaResult";
}

/// Converts text to a C string, replacing interior NUL bytes so nothing is cut silently.
pub fn c_string(text: impl Into<Vec<u8>>) -> CString {
    let mut bytes = text.into();
    for b in bytes.iter_mut().filter(|b| **b == 0) {
        *b = b'?';
    }
    CString::new(bytes).unwrap_or_default()
}

fn new_result(message: String) -> *mut OgaResult {
    crate::log::error(&message);
    into_handle(OgaResult {
        message: c_string(message),
    })
}

fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_string()
    }
}

/// Runs the body of a function that returns `OgaResult*`: `NULL` on success, an error object
/// otherwise, and a panic becomes an error object too.
pub fn guard(function: &'static str, body: impl FnOnce() -> Result<()>) -> *mut OgaResult {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => ptr::null_mut(),
        Ok(Err(e)) => new_result(e.to_string()),
        Err(payload) => new_result(
            Error::Panic {
                function,
                message: panic_message(payload.as_ref()),
            }
            .to_string(),
        ),
    }
}

/// Runs the body of a function that returns a plain value: on an error or a panic the error is
/// logged and `fallback` is returned (these functions have no way to report an error).
pub fn guard_value<T>(function: &'static str, fallback: T, body: impl FnOnce() -> Result<T>) -> T {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => value,
        Ok(Err(e)) => {
            crate::log::error(&e.to_string());
            fallback
        }
        Err(payload) => {
            crate::log::error(&format!(
                "{function}: internal error: {}",
                panic_message(payload.as_ref())
            ));
            fallback
        }
    }
}

/// A type handed out to C as an opaque pointer.
pub trait Handle: Send + Sync + 'static {
    /// The C type name, for error messages.
    const KIND: &'static str;
}

/// Addresses of every live handle (and of every string handed out), with their kind. Checking
/// against it turns a destroyed, foreign or mistyped pointer into an error instead of undefined
/// behaviour, and makes a second destroy a no-op.
static LIVE: LazyLock<Mutex<HashMap<usize, &'static str>>> = LazyLock::new(Default::default);

fn live() -> MutexGuard<'static, HashMap<usize, &'static str>> {
    // The map holds plain data; a panic while it was locked cannot leave it inconsistent.
    LIVE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Number of live handles and strings (for leak tests).
pub fn live_count() -> usize {
    live().len()
}

/// Boxes a value and registers it as a live handle.
pub fn into_handle<T: Handle>(value: T) -> *mut T {
    let ptr = Box::into_raw(Box::new(value));
    live().insert(ptr as usize, T::KIND);
    ptr
}

fn is_live(address: usize, kind: &'static str) -> bool {
    live().get(&address) == Some(&kind)
}

/// Borrows a handle after checking it is live and of type `T`.
///
/// # Safety
/// The caller must not destroy the handle on another thread while the borrow is used (the
/// documented contract of every `Destroy` function).
pub unsafe fn borrow<'a, T: Handle>(
    ptr: *const T,
    function: &'static str,
    argument: &'static str,
) -> Result<&'a T> {
    if ptr.is_null() {
        return Err(Error::Null { function, argument });
    }
    if !is_live(ptr as usize, T::KIND) {
        return Err(Error::BadHandle {
            function,
            argument,
            kind: T::KIND,
        });
    }
    // SAFETY: the registry holds this address with T's kind, so it came from `into_handle::<T>`
    // and has not been destroyed; the caller keeps it alive for the borrow.
    Ok(unsafe { &*ptr })
}

/// Unregisters and drops a handle. Null, unknown and already destroyed pointers are ignored.
///
/// # Safety
/// No other thread may be using the handle (the documented contract of every `Destroy`).
pub unsafe fn destroy<T: Handle>(ptr: *mut T) {
    if ptr.is_null() {
        return;
    }
    let removed = {
        let mut map = live();
        match map.get(&(ptr as usize)) {
            Some(&kind) if kind == T::KIND => map.remove(&(ptr as usize)).is_some(),
            _ => false,
        }
    };
    if removed {
        // SAFETY: the address was registered by `into_handle::<T>` (a leaked Box<T>) and was
        // still live; removing it from the registry makes this the only drop.
        drop(unsafe { Box::from_raw(ptr) });
    } else {
        crate::log::error(&format!(
            "Destroy called on a pointer that is not a live {}; ignored",
            T::KIND
        ));
    }
}

const STRING_KIND: &str = "string";

/// Hands a string to C; the caller frees it with `OgaDestroyString`.
pub fn into_c_string(text: impl Into<Vec<u8>>) -> *const c_char {
    let ptr = c_string(text).into_raw();
    live().insert(ptr as usize, STRING_KIND);
    ptr
}

/// Frees a string made by [`into_c_string`]; anything else is ignored.
pub fn destroy_c_string(ptr: *const c_char) {
    if ptr.is_null() {
        return;
    }
    let removed = live().remove(&(ptr as usize));
    match removed {
        // SAFETY: registered by `into_c_string` from `CString::into_raw`, and removed from the
        // registry just now, so this is the only `from_raw` of it.
        Some(STRING_KIND) => drop(unsafe { CString::from_raw(ptr.cast_mut()) }),
        Some(kind) => {
            live().insert(ptr as usize, kind);
            crate::log::error("OgaDestroyString called on a handle that is not a string; ignored");
        }
        None => crate::log::error("OgaDestroyString called on an unknown pointer; ignored"),
    }
}

/// Reads a NUL-terminated UTF-8 argument.
///
/// # Safety
/// `ptr` is null or points to a NUL-terminated string that stays valid during the call.
pub unsafe fn read_str<'a>(
    ptr: *const c_char,
    function: &'static str,
    argument: &'static str,
) -> Result<&'a str> {
    if ptr.is_null() {
        return Err(Error::Null { function, argument });
    }
    // SAFETY: non-null, and the caller passes a NUL-terminated string (the C API contract).
    let text = unsafe { CStr::from_ptr(ptr) };
    text.to_str()
        .map_err(|_| Error::Utf8 { function, argument })
}

/// Like [`read_str`], but null reads as `None`.
///
/// # Safety
/// As for [`read_str`].
pub unsafe fn read_optional_str<'a>(
    ptr: *const c_char,
    function: &'static str,
    argument: &'static str,
) -> Result<Option<&'a str>> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: forwarded contract.
    unsafe { read_str(ptr, function, argument) }.map(Some)
}

/// Reads `len` values from a C array; a null pointer is allowed only when `len` is 0.
///
/// # Safety
/// When non-null, `ptr` points to `len` initialised values that stay valid during the call.
pub unsafe fn read_slice<'a, T>(
    ptr: *const T,
    len: usize,
    function: &'static str,
    argument: &'static str,
) -> Result<&'a [T]> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(Error::Null { function, argument });
    }
    if !ptr.is_aligned()
        || len
            .checked_mul(size_of::<T>())
            .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(Error::Invalid(format!(
            "{function}: argument `{argument}` is misaligned or its length {len} is impossible"
        )));
    }
    // SAFETY: non-null, aligned, size fits isize, and the caller promises `len` valid values.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Writes an out-parameter after checking it is not null.
///
/// # Safety
/// When non-null, `out` points to writable memory for one `T`.
pub unsafe fn write_out<T>(
    out: *mut T,
    value: T,
    function: &'static str,
    argument: &'static str,
) -> Result<()> {
    if out.is_null() {
        return Err(Error::Null { function, argument });
    }
    // SAFETY: non-null, and the caller passes storage for one T (the C API contract).
    unsafe { out.write(value) };
    Ok(())
}

/// Checks that an out-parameter is not null before any work is done.
pub fn check_out<T>(out: *mut T, function: &'static str, argument: &'static str) -> Result<()> {
    if out.is_null() {
        return Err(Error::Null { function, argument });
    }
    Ok(())
}

/// `const char* OgaResultGetError(const OgaResult*)`: the message, owned by the result.
///
/// # Safety
/// `result` is null or a pointer returned by this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaResultGetError(result: *const OgaResult) -> *const c_char {
    guard_value("OgaResultGetError", ptr::null(), || {
        // SAFETY: checked against the registry.
        let result = unsafe { borrow(result, "OgaResultGetError", "result") }?;
        Ok(result.message.as_ptr())
    })
}

/// `void OgaDestroyResult(OgaResult*)`.
///
/// # Safety
/// `result` is null or a pointer returned by this library, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyResult(result: *mut OgaResult) {
    // SAFETY: checked against the registry inside.
    guard_value("OgaDestroyResult", (), || {
        unsafe { destroy(result) };
        Ok(())
    })
}

/// `void OgaDestroyString(const char*)`: frees a string this library returned.
///
/// # Safety
/// `text` is null or a string returned by this library, not used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyString(text: *const c_char) {
    guard_value("OgaDestroyString", (), || {
        destroy_c_string(text);
        Ok(())
    })
}
