//! `OgaGenerator`: one generation (append tokens, generate the next token, logits, rewind,
//! sequences), with the official runtime's semantics from `genai_engine::Generator`.

use crate::OgaResult;
use crate::ffi::{
    Error, Handle, Result, borrow, check_out, destroy, guard, guard_value, into_handle, read_slice,
    read_str, write_out,
};
use crate::model::{self, OgaModel};
use crate::params::OgaGeneratorParams;
use crate::sequences::OgaSequences;
use crate::tensor::{ElementType, OgaTensor};
use genai_engine::Generator;
use genai_runtime::Session;
use half::{bf16, f16};
use std::ffi::c_char;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A generation. Thread-safety: calls on one generator are serialised by a lock (use one
/// generator from one thread at a time); `OgaGenerator_SetRuntimeOption("terminate_session")`
/// may be called from any thread while another is generating, and takes effect at its next step.
/// Pointers returned by `GetSequenceData` and `GetNextTokens` stay valid until the next call
/// that changes the generator.
pub struct OgaGenerator {
    session: Arc<Session>,
    generator: Mutex<Generator>,
    cancel: Arc<AtomicBool>,
}

impl Handle for OgaGenerator {
    const KIND: &'static str = "OgaGenerator";
}

impl OgaGenerator {
    fn lock(&self) -> MutexGuard<'_, Generator> {
        // A panic inside a call was turned into an error; the generator's own state is updated
        // only after each fallible step, so it stays usable.
        self.generator
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Borrows a generator handle.
///
/// # Safety
/// `generator` is null or a live generator.
unsafe fn generator<'a>(
    generator: *const OgaGenerator,
    function: &'static str,
) -> Result<&'a OgaGenerator> {
    // SAFETY: forwarded contract; checked against the registry.
    unsafe { borrow(generator, function, "generator") }
}

/// `OgaResult* OgaCreateGenerator(const OgaModel*, const OgaGeneratorParams*, OgaGenerator**)`.
///
/// # Safety
/// `model` and `params` are null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateGenerator(
    model: *const OgaModel,
    params: *const OgaGeneratorParams,
    out: *mut *mut OgaGenerator,
) -> *mut OgaResult {
    const F: &str = "OgaCreateGenerator";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let model = unsafe { borrow(model, F, "model") }?;
        // SAFETY: checked against the registry.
        let params = unsafe { borrow(params, F, "params") }?;
        if !Arc::ptr_eq(&model.session, &params.session) {
            crate::log::info("OgaCreateGenerator: the params were made from another model");
        }
        let search = params.search().clone();
        let generator = model::generator(&model.session, &search)?;
        let handle = OgaGenerator {
            session: Arc::clone(&model.session),
            cancel: generator.cancel_handle(),
            generator: Mutex::new(generator),
        };
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(handle), F, "out") }
    })
}

/// `void OgaDestroyGenerator(OgaGenerator*)`.
///
/// # Safety
/// `generator` is null or live and no other thread is using it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyGenerator(generator: *mut OgaGenerator) {
    // SAFETY: checked against the registry inside.
    unsafe { destroy(generator) }
}

/// `bool OgaGenerator_IsDone(OgaGenerator*)`: true for an invalid handle too, so a loop on it
/// ends.
///
/// # Safety
/// `generator` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_IsDone(g: *mut OgaGenerator) -> bool {
    const F: &str = "OgaGenerator_IsDone";
    // SAFETY: checked against the registry.
    guard_value(F, true, || Ok(unsafe { generator(g, F) }?.lock().is_done()))
}

/// `bool OgaGenerator_IsSessionTerminated(const OgaGenerator*)`.
///
/// # Safety
/// `generator` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_IsSessionTerminated(g: *const OgaGenerator) -> bool {
    const F: &str = "OgaGenerator_IsSessionTerminated";
    guard_value(F, false, || {
        // SAFETY: checked against the registry.
        Ok(unsafe { generator(g, F) }?.cancel.load(Ordering::SeqCst))
    })
}

fn append_rows(generator: &OgaGenerator, rows: &[Vec<i32>]) -> Result<()> {
    let mut g = generator.lock();
    let batch = g.batch_size();
    if rows.len() != batch {
        return Err(Error::Invalid(format!(
            "the batch size is {batch} but {} sequences were given",
            rows.len()
        )));
    }
    let width = rows.iter().map(Vec::len).max().unwrap_or(0);
    let pad = generator.session.config().model.pad_token_id;
    let mut flat = Vec::with_capacity(width * batch);
    for row in rows {
        flat.extend_from_slice(row);
        flat.resize(flat.len() + width - row.len(), pad);
    }
    Ok(g.append_tokens(&flat)?)
}

/// `OgaResult* OgaGenerator_AppendTokenSequences(OgaGenerator*, const OgaSequences*)`: one
/// sequence per row, padded on the right with `pad_token_id`.
///
/// # Safety
/// `generator` and `p_sequences` are null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_AppendTokenSequences(
    g: *mut OgaGenerator,
    p_sequences: *const OgaSequences,
) -> *mut OgaResult {
    const F: &str = "OgaGenerator_AppendTokenSequences";
    guard(F, || {
        // SAFETY: checked against the registry.
        let generator = unsafe { generator(g, F) }?;
        // SAFETY: checked against the registry.
        let sequences = unsafe { borrow(p_sequences, F, "sequences") }?;
        let rows = sequences.rows().clone();
        append_rows(generator, &rows)
    })
}

/// `OgaResult* OgaGenerator_AppendTokens(OgaGenerator*, const int32_t* input_ids, size_t
/// input_ids_count)`: row-major `[batch, n]`.
///
/// # Safety
/// `generator` is null or live; `input_ids` holds `input_ids_count` ids.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_AppendTokens(
    g: *mut OgaGenerator,
    input_ids: *const i32,
    input_ids_count: usize,
) -> *mut OgaResult {
    const F: &str = "OgaGenerator_AppendTokens";
    guard(F, || {
        // SAFETY: checked against the registry.
        let generator = unsafe { generator(g, F) }?;
        // SAFETY: C contract.
        let ids = unsafe { read_slice(input_ids, input_ids_count, F, "input_ids") }?;
        Ok(generator.lock().append_tokens(ids)?)
    })
}

/// `size_t OgaGenerator_TokenCount(const OgaGenerator*)`: tokens per row so far.
///
/// # Safety
/// `generator` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_TokenCount(g: *const OgaGenerator) -> usize {
    const F: &str = "OgaGenerator_TokenCount";
    // SAFETY: checked against the registry.
    guard_value(F, 0, || {
        Ok(unsafe { generator(g, F) }?.lock().sequence_len())
    })
}

/// `OgaResult* OgaGenerator_GenerateNextToken(OgaGenerator*)`.
///
/// # Safety
/// `generator` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_GenerateNextToken(g: *mut OgaGenerator) -> *mut OgaResult {
    const F: &str = "OgaGenerator_GenerateNextToken";
    guard(F, || {
        // SAFETY: checked against the registry.
        let generator = unsafe { generator(g, F) }?;
        Ok(generator.lock().generate_next_token()?)
    })
}

/// `OgaResult* OgaGenerator_GetNextTokens(const OgaGenerator*, const int32_t** out, size_t*
/// out_count)`: one token per row, owned by the generator.
///
/// # Safety
/// `generator` is null or live; the out pointers are writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_GetNextTokens(
    g: *const OgaGenerator,
    out: *mut *const i32,
    out_count: *mut usize,
) -> *mut OgaResult {
    const F: &str = "OgaGenerator_GetNextTokens";
    guard(F, || {
        check_out(out, F, "out")?;
        check_out(out_count, F, "out_count")?;
        // SAFETY: checked against the registry.
        let generator = unsafe { generator(g, F) }?;
        let g = generator.lock();
        let tokens = g.next_tokens();
        // SAFETY: both checked non-null; the slice lives in the generator until it changes.
        unsafe {
            write_out(out, tokens.as_ptr(), F, "out")?;
            write_out(out_count, tokens.len(), F, "out_count")
        }
    })
}

/// `OgaResult* OgaGenerator_SetRuntimeOption(OgaGenerator*, const char* key, const char*
/// value)`: `terminate_session` = "1" stops the generation at its next step ("0" resumes).
///
/// # Safety
/// `generator` is null or live; the strings are NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_SetRuntimeOption(
    g: *mut OgaGenerator,
    key: *const c_char,
    value: *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaGenerator_SetRuntimeOption";
    guard(F, || {
        // SAFETY: checked against the registry; no lock is taken, so this works while another
        // thread is inside a step.
        let generator = unsafe { generator(g, F) }?;
        // SAFETY: C contract.
        let (key, value) = unsafe { (read_str(key, F, "key")?, read_str(value, F, "value")?) };
        match (key, value) {
            ("terminate_session", "1") => generator.cancel.store(true, Ordering::SeqCst),
            ("terminate_session", "0") => generator.cancel.store(false, Ordering::SeqCst),
            ("terminate_session", other) => {
                return Err(Error::Invalid(format!(
                    "terminate_session must be \"0\" or \"1\", not \"{other}\""
                )));
            }
            // The official library ignores keys it does not know; so does this one.
            (other, _) => crate::log::info(&format!(
                "OgaGenerator_SetRuntimeOption: unknown option \"{other}\" ignored"
            )),
        }
        Ok(())
    })
}

/// `OgaResult* OgaGenerator_RewindTo(OgaGenerator*, size_t new_length)`.
///
/// # Safety
/// `generator` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_RewindTo(
    g: *mut OgaGenerator,
    new_length: usize,
) -> *mut OgaResult {
    const F: &str = "OgaGenerator_RewindTo";
    guard(F, || {
        // SAFETY: checked against the registry.
        let generator = unsafe { generator(g, F) }?;
        Ok(generator.lock().rewind_to(new_length)?)
    })
}

/// The last logits as a new `[batch, 1, vocab]` float32 tensor.
fn logits_tensor(generator: &OgaGenerator) -> Result<OgaTensor> {
    let mut g = generator.lock();
    let batch = g.batch_size();
    let logits = g.logits()?;
    let vocab = logits.len() / batch.max(1);
    OgaTensor::from_values(logits, &[batch, 1, vocab], ElementType::FLOAT32)
}

/// The model's `logits` output of its last run, in the model's activation type.
fn output_logits_tensor(generator: &OgaGenerator) -> Result<OgaTensor> {
    let mut g = generator.lock();
    let batch = g.batch_size();
    let (positions, values) = g.output_logits()?;
    let vocab = values.len() / (batch * positions).max(1);
    let shape = [batch, positions, vocab];
    let ty = model::logits_type(&generator.session);
    if ty == ElementType::FLOAT16 {
        let half: Vec<f16> = values.iter().map(|&v| f16::from_f32(v)).collect();
        OgaTensor::from_values(&half, &shape, ty)
    } else if ty == ElementType::BFLOAT16 {
        let half: Vec<bf16> = values.iter().map(|&v| bf16::from_f32(v)).collect();
        OgaTensor::from_values(&half, &shape, ty)
    } else {
        OgaTensor::from_values(&values, &shape, ElementType::FLOAT32)
    }
}

/// `OgaResult* OgaGenerator_GetLogits(OgaGenerator*, OgaTensor** out)`: the logits of the last
/// position of every row, computing them if the model has not run yet.
///
/// # Safety
/// `generator` is null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_GetLogits(
    g: *mut OgaGenerator,
    out: *mut *mut OgaTensor,
) -> *mut OgaResult {
    const F: &str = "OgaGenerator_GetLogits";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let tensor = logits_tensor(unsafe { generator(g, F) }?)?;
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(tensor), F, "out") }
    })
}

/// `OgaResult* OgaGenerator_SetLogits(OgaGenerator*, OgaTensor*)`: float32, batch × vocab values.
///
/// # Safety
/// `generator` and `tensor` are null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_SetLogits(
    g: *mut OgaGenerator,
    tensor: *mut OgaTensor,
) -> *mut OgaResult {
    const F: &str = "OgaGenerator_SetLogits";
    guard(F, || {
        // SAFETY: checked against the registry.
        let generator = unsafe { generator(g, F) }?;
        // SAFETY: checked against the registry.
        let tensor = unsafe { borrow(tensor.cast_const(), F, "tensor") }?;
        let values = tensor.to_f32_vec(F)?;
        Ok(generator.lock().set_logits(&values)?)
    })
}

/// `OgaResult* OgaGenerator_GetOutput(const OgaGenerator*, const char* name, OgaTensor** out)`:
/// `logits`, the model's output of its last run (`[batch, positions, vocab]` in the model's
/// activation type), is the output genai-bridge exposes.
///
/// # Safety
/// `generator` is null or live; `name` is NUL-terminated; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_GetOutput(
    g: *const OgaGenerator,
    name: *const c_char,
    out: *mut *mut OgaTensor,
) -> *mut OgaResult {
    const F: &str = "OgaGenerator_GetOutput";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let generator = unsafe { generator(g, F) }?;
        // SAFETY: C contract.
        let name = unsafe { read_str(name, F, "name") }?;
        if name != "logits" {
            return Err(Error::Invalid(format!(
                "model output \"{name}\" is not available from genai-bridge (only \"logits\")"
            )));
        }
        let tensor = output_logits_tensor(generator)?;
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(tensor), F, "out") }
    })
}

/// `size_t OgaGenerator_GetSequenceCount(const OgaGenerator*, size_t index)`: the length of one
/// row (0 for an invalid handle or row).
///
/// # Safety
/// `generator` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_GetSequenceCount(
    g: *const OgaGenerator,
    index: usize,
) -> usize {
    const F: &str = "OgaGenerator_GetSequenceCount";
    guard_value(F, 0, || {
        // SAFETY: checked against the registry.
        let generator = unsafe { generator(g, F) }?;
        let g = generator.lock();
        g.sequence(index)
            .map(<[i32]>::len)
            .ok_or_else(|| row_error(F, index, g.batch_size()))
    })
}

/// `const int32_t* OgaGenerator_GetSequenceData(const OgaGenerator*, size_t index)`: one row,
/// owned by the generator (null for an invalid handle or row).
///
/// # Safety
/// `generator` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaGenerator_GetSequenceData(
    g: *const OgaGenerator,
    index: usize,
) -> *const i32 {
    const F: &str = "OgaGenerator_GetSequenceData";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: checked against the registry.
        let generator = unsafe { generator(g, F) }?;
        let g = generator.lock();
        g.sequence(index)
            .map(<[i32]>::as_ptr)
            .ok_or_else(|| row_error(F, index, g.batch_size()))
    })
}

fn row_error(function: &'static str, index: usize, batch: usize) -> Error {
    Error::Invalid(format!(
        "{function}: row {index} is out of range (batch size {batch})"
    ))
}
