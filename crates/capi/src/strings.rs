//! `OgaStringArray`: a list of strings handed between C and the library (batched decode
//! results, prompts, tensor names).

use crate::OgaResult;
use crate::ffi::{
    Error, Handle, borrow, c_string, check_out, destroy, guard, into_handle, read_slice, read_str,
    write_out,
};
use std::ffi::{CString, c_char};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Strings. Thread-safety: calls are serialised by a lock; a string pointer returned by
/// `OgaStringArrayGetString` stays valid until the array is destroyed (strings are only added).
#[derive(Default)]
pub struct OgaStringArray {
    strings: Mutex<Vec<CString>>,
}

impl Handle for OgaStringArray {
    const KIND: &'static str = "OgaStringArray";
}

impl OgaStringArray {
    /// An array holding `strings`.
    pub fn from_strings(strings: Vec<String>) -> Self {
        OgaStringArray {
            strings: Mutex::new(strings.into_iter().map(c_string).collect()),
        }
    }

    fn strings(&self) -> MutexGuard<'_, Vec<CString>> {
        self.strings.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `OgaResult* OgaCreateStringArray(OgaStringArray** out)`.
///
/// # Safety
/// `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateStringArray(out: *mut *mut OgaStringArray) -> *mut OgaResult {
    const F: &str = "OgaCreateStringArray";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(OgaStringArray::default()), F, "out") }
    })
}

/// `OgaResult* OgaCreateStringArrayFromStrings(const char* const* strs, size_t count,
/// OgaStringArray** out)`.
///
/// # Safety
/// `strs` holds `count` NUL-terminated strings; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateStringArrayFromStrings(
    strs: *const *const c_char,
    count: usize,
    out: *mut *mut OgaStringArray,
) -> *mut OgaResult {
    const F: &str = "OgaCreateStringArrayFromStrings";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: C contract.
        let pointers = unsafe { read_slice(strs, count, F, "strs") }?;
        let strings = pointers
            .iter()
            // SAFETY: C contract: each is NUL-terminated.
            .map(|&p| unsafe { read_str(p, F, "strs[i]") }.map(str::to_string))
            .collect::<Result<Vec<_>, Error>>()?;
        let array = OgaStringArray::from_strings(strings);
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(array), F, "out") }
    })
}

/// `void OgaDestroyStringArray(OgaStringArray*)`.
///
/// # Safety
/// `string_array` is null or live and no other thread is using it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyStringArray(string_array: *mut OgaStringArray) {
    // SAFETY: checked against the registry inside.
    unsafe { destroy(string_array) }
}

/// `OgaResult* OgaStringArrayAddString(OgaStringArray*, const char* str)`.
///
/// # Safety
/// `string_array` is null or live; `str` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaStringArrayAddString(
    string_array: *mut OgaStringArray,
    str: *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaStringArrayAddString";
    guard(F, || {
        // SAFETY: checked against the registry.
        let array = unsafe { borrow(string_array.cast_const(), F, "string_array") }?;
        // SAFETY: C contract.
        let text = unsafe { read_str(str, F, "str") }?;
        array.strings().push(c_string(text));
        Ok(())
    })
}

/// `OgaResult* OgaStringArrayGetCount(const OgaStringArray*, size_t* out)`.
///
/// # Safety
/// `string_array` is null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaStringArrayGetCount(
    string_array: *const OgaStringArray,
    out: *mut usize,
) -> *mut OgaResult {
    const F: &str = "OgaStringArrayGetCount";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let array = unsafe { borrow(string_array, F, "string_array") }?;
        let count = array.strings().len();
        // SAFETY: checked non-null.
        unsafe { write_out(out, count, F, "out") }
    })
}

/// `OgaResult* OgaStringArrayGetString(const OgaStringArray*, size_t index, const char** out)`:
/// the string stays owned by the array.
///
/// # Safety
/// `string_array` is null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaStringArrayGetString(
    string_array: *const OgaStringArray,
    index: usize,
    out: *mut *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaStringArrayGetString";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let array = unsafe { borrow(string_array, F, "string_array") }?;
        let strings = array.strings();
        let text = strings.get(index).ok_or_else(|| {
            Error::Invalid(format!(
                "{F}: index {index} is out of range ({} strings)",
                strings.len()
            ))
        })?;
        // SAFETY: checked non-null; the CString's heap buffer does not move when the vector
        // grows, so the pointer stays valid until the array is destroyed.
        unsafe { write_out(out, text.as_ptr(), F, "out") }
    })
}
