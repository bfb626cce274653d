//! `OgaGeneratorParams`: the search options of one generation, starting from the model's
//! genai_config.json `search` section.

use crate::OgaResult;
use crate::ffi::{Handle, borrow, check_out, destroy, guard, into_handle, read_str, write_out};
use crate::model::OgaModel;
use genai_config::Search;
use genai_runtime::Session;
use std::ffi::c_char;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// Search options. Thread-safety: calls are serialised by a lock.
pub struct OgaGeneratorParams {
    pub(crate) session: Arc<Session>,
    search: Mutex<Search>,
}

impl Handle for OgaGeneratorParams {
    const KIND: &'static str = "OgaGeneratorParams";
}

impl OgaGeneratorParams {
    /// The options, locked.
    pub fn search(&self) -> MutexGuard<'_, Search> {
        self.search.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `OgaResult* OgaCreateGeneratorParams(const OgaModel*, OgaGeneratorParams** out)`.
///
/// # Safety
/// `model` is null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateGeneratorParams(
    model: *const OgaModel,
    out: *mut *mut OgaGeneratorParams,
) -> *mut OgaResult {
    const F: &str = "OgaCreateGeneratorParams";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let model = unsafe { borrow(model, F, "model") }?;
        let params = OgaGeneratorParams {
            session: Arc::clone(&model.session),
            search: Mutex::new(model.session.search().clone()),
        };
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(params), F, "out") }
    })
}

/// `void OgaDestroyGeneratorParams(OgaGeneratorParams*)`.
///
/// # Safety
/// `params` is null or live and no other thread is using it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyGeneratorParams(params: *mut OgaGeneratorParams) {
    // SAFETY: checked against the registry inside.
    unsafe { destroy(params) }
}

/// `OgaResult* OgaGeneratorParamsSetSearchNumber(OgaGeneratorParams*, const char* name, double
/// value)`.
///
/// # Safety
/// `params` is null or live; `name` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGeneratorParamsSetSearchNumber(
    params: *mut OgaGeneratorParams,
    name: *const c_char,
    value: f64,
) -> *mut OgaResult {
    const F: &str = "OgaGeneratorParamsSetSearchNumber";
    guard(F, || {
        // SAFETY: checked against the registry.
        let params = unsafe { borrow(params.cast_const(), F, "params") }?;
        // SAFETY: C contract.
        let name = unsafe { read_str(name, F, "name") }?;
        Ok(params.search().set_number(name, value)?)
    })
}

/// `OgaResult* OgaGeneratorParamsSetSearchBool(OgaGeneratorParams*, const char* name, bool
/// value)`.
///
/// # Safety
/// `params` is null or live; `name` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGeneratorParamsSetSearchBool(
    params: *mut OgaGeneratorParams,
    name: *const c_char,
    value: bool,
) -> *mut OgaResult {
    const F: &str = "OgaGeneratorParamsSetSearchBool";
    guard(F, || {
        // SAFETY: checked against the registry.
        let params = unsafe { borrow(params.cast_const(), F, "params") }?;
        // SAFETY: C contract.
        let name = unsafe { read_str(name, F, "name") }?;
        Ok(params.search().set_bool(name, value)?)
    })
}

/// `OgaResult* OgaGeneratorParamsGetSearchNumber(const OgaGeneratorParams*, const char* name,
/// double* value)`.
///
/// # Safety
/// `params` is null or live; `name` is NUL-terminated; `value` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGeneratorParamsGetSearchNumber(
    params: *const OgaGeneratorParams,
    name: *const c_char,
    value: *mut f64,
) -> *mut OgaResult {
    const F: &str = "OgaGeneratorParamsGetSearchNumber";
    guard(F, || {
        check_out(value, F, "value")?;
        // SAFETY: checked against the registry.
        let params = unsafe { borrow(params, F, "params") }?;
        // SAFETY: C contract.
        let name = unsafe { read_str(name, F, "name") }?;
        let number = params.search().get_number(name)?;
        // SAFETY: checked non-null.
        unsafe { write_out(value, number, F, "value") }
    })
}

/// `OgaResult* OgaGeneratorParamsGetSearchBool(const OgaGeneratorParams*, const char* name,
/// bool* value)`.
///
/// # Safety
/// `params` is null or live; `name` is NUL-terminated; `value` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGeneratorParamsGetSearchBool(
    params: *const OgaGeneratorParams,
    name: *const c_char,
    value: *mut bool,
) -> *mut OgaResult {
    const F: &str = "OgaGeneratorParamsGetSearchBool";
    guard(F, || {
        check_out(value, F, "value")?;
        // SAFETY: checked against the registry.
        let params = unsafe { borrow(params, F, "params") }?;
        // SAFETY: C contract.
        let name = unsafe { read_str(name, F, "name") }?;
        let flag = params.search().get_bool(name)?;
        // SAFETY: checked non-null.
        unsafe { write_out(value, flag, F, "value") }
    })
}
