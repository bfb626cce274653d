//! `OgaSequences`: a list of token sequences (what `OgaTokenizerEncode` fills and
//! `OgaGenerator_AppendTokenSequences` reads).

use crate::OgaResult;
use crate::ffi::{
    Error, Handle, Result, borrow, check_out, destroy, guard, guard_value, into_handle, read_slice,
    write_out,
};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Token sequences. Thread-safety: calls are serialised by a lock; a data pointer returned by
/// `OgaSequencesGetSequenceData` stays valid until the sequences are changed or destroyed.
#[derive(Default)]
pub struct OgaSequences {
    rows: Mutex<Vec<Vec<i32>>>,
}

impl Handle for OgaSequences {
    const KIND: &'static str = "OgaSequences";
}

impl OgaSequences {
    /// Adds a sequence at the end.
    pub fn push(&self, ids: Vec<i32>) {
        self.rows().push(ids);
    }

    /// The sequences, locked.
    pub fn rows(&self) -> MutexGuard<'_, Vec<Vec<i32>>> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `OgaResult* OgaCreateSequences(OgaSequences** out)`.
///
/// # Safety
/// `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateSequences(out: *mut *mut OgaSequences) -> *mut OgaResult {
    const F: &str = "OgaCreateSequences";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(OgaSequences::default()), F, "out") }
    })
}

/// `void OgaDestroySequences(OgaSequences*)`.
///
/// # Safety
/// `sequences` is null or live and no other thread is using it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroySequences(sequences: *mut OgaSequences) {
    // SAFETY: checked against the registry inside.
    unsafe { destroy(sequences) }
}

/// `size_t OgaSequencesCount(const OgaSequences*)`: 0 for an invalid handle.
///
/// # Safety
/// `sequences` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaSequencesCount(sequences: *const OgaSequences) -> usize {
    const F: &str = "OgaSequencesCount";
    guard_value(F, 0, || {
        // SAFETY: checked against the registry.
        Ok(unsafe { borrow(sequences, F, "sequences") }?.rows().len())
    })
}

/// `OgaResult* OgaAppendTokenSequence(const int32_t* token_ptr, size_t token_cnt,
/// OgaSequences*)`.
///
/// # Safety
/// `token_ptr` holds `token_cnt` ids; `sequences` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaAppendTokenSequence(
    token_ptr: *const i32,
    token_cnt: usize,
    sequences: *mut OgaSequences,
) -> *mut OgaResult {
    const F: &str = "OgaAppendTokenSequence";
    guard(F, || {
        // SAFETY: checked against the registry.
        let sequences = unsafe { borrow(sequences.cast_const(), F, "sequences") }?;
        // SAFETY: C contract.
        let ids = unsafe { read_slice(token_ptr, token_cnt, F, "token_ptr") }?;
        sequences.push(ids.to_vec());
        Ok(())
    })
}

/// `OgaResult* OgaAppendTokenToSequence(int32_t token, OgaSequences*, size_t sequence_index)`:
/// appends to an existing sequence, or starts a new one when the index equals the count.
///
/// # Safety
/// `sequences` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaAppendTokenToSequence(
    token: i32,
    sequences: *mut OgaSequences,
    sequence_index: usize,
) -> *mut OgaResult {
    const F: &str = "OgaAppendTokenToSequence";
    guard(F, || -> Result<()> {
        // SAFETY: checked against the registry.
        let sequences = unsafe { borrow(sequences.cast_const(), F, "sequences") }?;
        let mut rows = sequences.rows();
        let count = rows.len();
        match sequence_index {
            i if i < count => rows[i].push(token),
            i if i == count => rows.push(vec![token]),
            i => {
                return Err(Error::Invalid(format!(
                    "{F}: sequence index {i} is out of range (there are {count} sequences)"
                )));
            }
        }
        Ok(())
    })
}

/// `size_t OgaSequencesGetSequenceCount(const OgaSequences*, size_t sequence_index)`: the
/// length of one sequence (0 for an invalid handle or index).
///
/// # Safety
/// `sequences` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaSequencesGetSequenceCount(
    sequences: *const OgaSequences,
    sequence_index: usize,
) -> usize {
    const F: &str = "OgaSequencesGetSequenceCount";
    guard_value(F, 0, || {
        // SAFETY: checked against the registry.
        let sequences = unsafe { borrow(sequences, F, "sequences") }?;
        let rows = sequences.rows();
        rows.get(sequence_index).map(Vec::len).ok_or_else(|| {
            Error::Invalid(format!(
                "{F}: sequence index {sequence_index} is out of range ({} sequences)",
                rows.len()
            ))
        })
    })
}

/// `const int32_t* OgaSequencesGetSequenceData(const OgaSequences*, size_t sequence_index)`:
/// null for an invalid handle or index.
///
/// # Safety
/// `sequences` is null or live.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaSequencesGetSequenceData(
    sequences: *const OgaSequences,
    sequence_index: usize,
) -> *const i32 {
    const F: &str = "OgaSequencesGetSequenceData";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: checked against the registry.
        let sequences = unsafe { borrow(sequences, F, "sequences") }?;
        let rows = sequences.rows();
        rows.get(sequence_index).map(|r| r.as_ptr()).ok_or_else(|| {
            Error::Invalid(format!(
                "{F}: sequence index {sequence_index} is out of range ({} sequences)",
                rows.len()
            ))
        })
    })
}
