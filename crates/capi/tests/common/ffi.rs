//! The C functions the stress and lifetime tests call, declared as a C client would (they
//! resolve to this crate's exports at link time), with small safe helpers over them.

use std::ffi::{CStr, CString, c_char};
use std::ptr;

/// Opaque handles, as C sees them.
pub enum OgaResult {}
pub enum OgaModel {}
pub enum OgaTokenizer {}
pub enum OgaTokenizerStream {}
pub enum OgaGeneratorParams {}
pub enum OgaGenerator {}
pub enum OgaSequences {}

unsafe extern "C" {
    pub fn OgaResultGetError(result: *const OgaResult) -> *const c_char;
    pub fn OgaDestroyResult(result: *mut OgaResult);
    pub fn OgaDestroyString(text: *const c_char);
    pub fn OgaCreateModel(path: *const c_char, out: *mut *mut OgaModel) -> *mut OgaResult;
    pub fn OgaDestroyModel(model: *mut OgaModel);
    pub fn OgaCreateTokenizer(
        model: *const OgaModel,
        out: *mut *mut OgaTokenizer,
    ) -> *mut OgaResult;
    pub fn OgaDestroyTokenizer(tokenizer: *mut OgaTokenizer);
    pub fn OgaCreateTokenizerStream(
        tokenizer: *const OgaTokenizer,
        out: *mut *mut OgaTokenizerStream,
    ) -> *mut OgaResult;
    pub fn OgaDestroyTokenizerStream(stream: *mut OgaTokenizerStream);
    pub fn OgaTokenizerStreamDecode(
        stream: *mut OgaTokenizerStream,
        token: i32,
        out: *mut *const c_char,
    ) -> *mut OgaResult;
    pub fn OgaTokenizerEncode(
        tokenizer: *const OgaTokenizer,
        text: *const c_char,
        sequences: *mut OgaSequences,
    ) -> *mut OgaResult;
    pub fn OgaTokenizerDecode(
        tokenizer: *const OgaTokenizer,
        tokens: *const i32,
        count: usize,
        out: *mut *const c_char,
    ) -> *mut OgaResult;
    pub fn OgaCreateSequences(out: *mut *mut OgaSequences) -> *mut OgaResult;
    pub fn OgaDestroySequences(sequences: *mut OgaSequences);
    pub fn OgaSequencesCount(sequences: *const OgaSequences) -> usize;
    pub fn OgaCreateGeneratorParams(
        model: *const OgaModel,
        out: *mut *mut OgaGeneratorParams,
    ) -> *mut OgaResult;
    pub fn OgaDestroyGeneratorParams(params: *mut OgaGeneratorParams);
    pub fn OgaGeneratorParamsSetSearchNumber(
        params: *mut OgaGeneratorParams,
        name: *const c_char,
        value: f64,
    ) -> *mut OgaResult;
    pub fn OgaCreateGenerator(
        model: *const OgaModel,
        params: *const OgaGeneratorParams,
        out: *mut *mut OgaGenerator,
    ) -> *mut OgaResult;
    pub fn OgaDestroyGenerator(generator: *mut OgaGenerator);
    pub fn OgaGenerator_AppendTokens(
        generator: *mut OgaGenerator,
        ids: *const i32,
        count: usize,
    ) -> *mut OgaResult;
    pub fn OgaGenerator_IsDone(generator: *mut OgaGenerator) -> bool;
    pub fn OgaGenerator_GenerateNextToken(generator: *mut OgaGenerator) -> *mut OgaResult;
    pub fn OgaGenerator_GetSequenceCount(generator: *const OgaGenerator, index: usize) -> usize;
    pub fn OgaGenerator_GetSequenceData(generator: *const OgaGenerator, index: usize)
    -> *const i32;
    pub fn OgaGenerator_SetRuntimeOption(
        generator: *mut OgaGenerator,
        key: *const c_char,
        value: *const c_char,
    ) -> *mut OgaResult;
}

/// Turns an `OgaResult*` into `Err(message)`, destroying it.
pub fn check(result: *mut OgaResult) -> Result<(), String> {
    if result.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null result from the library; its message lives until it is destroyed below.
    let message = unsafe { CStr::from_ptr(OgaResultGetError(result)) }
        .to_string_lossy()
        .into_owned();
    // SAFETY: destroyed once, not used again.
    unsafe { OgaDestroyResult(result) };
    Err(message)
}

pub fn c(text: &str) -> CString {
    CString::new(text).expect("no NUL in test strings")
}

/// A loaded model, destroyed on drop.
pub struct Model(pub *mut OgaModel);

// SAFETY: the C ABI documents a model as shareable between threads.
unsafe impl Send for Model {}
// SAFETY: as above.
unsafe impl Sync for Model {}

impl Model {
    pub fn open(dir: &str) -> Result<Self, String> {
        let mut model = ptr::null_mut();
        // SAFETY: valid C string and out pointer.
        check(unsafe { OgaCreateModel(c(dir).as_ptr(), &mut model) })?;
        Ok(Model(model))
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: created by OgaCreateModel; dropped once.
        unsafe { OgaDestroyModel(self.0) }
    }
}

/// Greedy (or per `options`) generation from `prompt`; returns the whole sequence.
pub fn generate(
    model: &Model,
    prompt: &[i32],
    options: &[(&str, f64)],
) -> Result<Vec<i32>, String> {
    let mut params = ptr::null_mut();
    // SAFETY: live model, valid out pointer.
    check(unsafe { OgaCreateGeneratorParams(model.0, &mut params) })?;
    let run = || -> Result<Vec<i32>, String> {
        for (name, value) in options {
            // SAFETY: live params, valid C string.
            check(unsafe { OgaGeneratorParamsSetSearchNumber(params, c(name).as_ptr(), *value) })?;
        }
        let mut generator = ptr::null_mut();
        // SAFETY: live model and params, valid out pointer.
        check(unsafe { OgaCreateGenerator(model.0, params, &mut generator) })?;
        let result = (|| {
            // SAFETY: live generator; the prompt slice is valid for the call.
            check(unsafe { OgaGenerator_AppendTokens(generator, prompt.as_ptr(), prompt.len()) })?;
            // SAFETY: live generator.
            while !unsafe { OgaGenerator_IsDone(generator) } {
                // SAFETY: live generator.
                check(unsafe { OgaGenerator_GenerateNextToken(generator) })?;
            }
            // SAFETY: live generator; the data stays valid until the generator changes.
            let sequence = unsafe {
                let n = OgaGenerator_GetSequenceCount(generator, 0);
                std::slice::from_raw_parts(OgaGenerator_GetSequenceData(generator, 0), n).to_vec()
            };
            Ok(sequence)
        })();
        // SAFETY: created above, destroyed once.
        unsafe { OgaDestroyGenerator(generator) };
        result
    };
    let result = run();
    // SAFETY: created above, destroyed once.
    unsafe { OgaDestroyGeneratorParams(params) };
    result
}
