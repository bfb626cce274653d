//! `OgaTokenizerStream`: decoding generated ids one at a time into text, with the official
//! runtime's streaming rules.

use crate::OgaResult;
use crate::ffi::{Handle, borrow, c_string, check_out, destroy, guard, into_handle, write_out};
use crate::tokenizer::OgaTokenizer;
use genai_tokenizer::{StreamDecoder, Tokenizer};
use std::ffi::{CString, c_char};
use std::sync::{Arc, Mutex, PoisonError};

/// A streaming decoder. Thread-safety: one stream must not be used by two threads at once;
/// calls are serialised by a lock, so doing so is safe but interleaves the text.
pub struct OgaTokenizerStream {
    state: Mutex<StreamState>,
}

struct StreamState {
    decoder: StreamDecoder<Arc<Tokenizer>>,
    /// The text of the last decode, owned by the stream until the next call.
    chunk: CString,
}

impl Handle for OgaTokenizerStream {
    const KIND: &'static str = "OgaTokenizerStream";
}

/// `OgaResult* OgaCreateTokenizerStream(const OgaTokenizer*, OgaTokenizerStream** out)`.
///
/// # Safety
/// `tokenizer` is null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateTokenizerStream(
    tokenizer: *const OgaTokenizer,
    out: *mut *mut OgaTokenizerStream,
) -> *mut OgaResult {
    const F: &str = "OgaCreateTokenizerStream";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let tokenizer = unsafe { borrow(tokenizer, F, "tokenizer") }?;
        let stream = OgaTokenizerStream {
            state: Mutex::new(StreamState {
                decoder: StreamDecoder::shared(Arc::clone(&tokenizer.tokenizer)),
                chunk: CString::default(),
            }),
        };
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(stream), F, "out") }
    })
}

/// `void OgaDestroyTokenizerStream(OgaTokenizerStream*)`.
///
/// # Safety
/// `stream` is null or a live stream no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyTokenizerStream(stream: *mut OgaTokenizerStream) {
    // SAFETY: checked against the registry inside.
    unsafe { destroy(stream) }
}

/// `OgaResult* OgaTokenizerStreamDecode(OgaTokenizerStream*, int32_t token, const char** out)`:
/// the text this token completes (often empty); owned by the stream until its next call.
///
/// # Safety
/// `stream` is null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTokenizerStreamDecode(
    stream: *mut OgaTokenizerStream,
    token: i32,
    out: *mut *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaTokenizerStreamDecode";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let stream = unsafe { borrow(stream.cast_const(), F, "tokenizer_stream") }?;
        let mut state = stream.state.lock().unwrap_or_else(PoisonError::into_inner);
        let text = state.decoder.push(token)?.unwrap_or_default();
        state.chunk = c_string(text);
        // SAFETY: checked non-null; the pointer stays valid until the next call on the stream.
        unsafe { write_out(out, state.chunk.as_ptr(), F, "out") }
    })
}
