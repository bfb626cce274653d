//! `OgaTensor`: a typed n-dimensional buffer, either over the caller's memory
//! (`OgaCreateTensorFromBuffer` with data) or owned by the library (created with null data, or
//! returned by the library, e.g. logits).

use crate::OgaResult;
use crate::ffi::{
    Error, Handle, Result, borrow, check_out, destroy, guard, into_handle, read_slice, write_out,
};
use genai_onnx::DataType;
use std::ffi::c_void;
use std::sync::Arc;

/// Upper bound on a tensor the library allocates, so a hostile shape cannot exhaust memory.
const MAX_OWNED_BYTES: usize = 1 << 34;

/// `OgaElementType`: a tensor's element type, as the ONNX data type code (an `int` in C).
pub type OgaElementType = i32;

#[allow(non_upper_case_globals)]
pub const OgaElementType_undefined: OgaElementType = 0;
#[allow(non_upper_case_globals)]
pub const OgaElementType_float32: OgaElementType = 1;
#[allow(non_upper_case_globals)]
pub const OgaElementType_uint8: OgaElementType = 2;
#[allow(non_upper_case_globals)]
pub const OgaElementType_int8: OgaElementType = 3;
#[allow(non_upper_case_globals)]
pub const OgaElementType_uint16: OgaElementType = 4;
#[allow(non_upper_case_globals)]
pub const OgaElementType_int16: OgaElementType = 5;
#[allow(non_upper_case_globals)]
pub const OgaElementType_int32: OgaElementType = 6;
#[allow(non_upper_case_globals)]
pub const OgaElementType_int64: OgaElementType = 7;
#[allow(non_upper_case_globals)]
pub const OgaElementType_string: OgaElementType = 8;
#[allow(non_upper_case_globals)]
pub const OgaElementType_bool: OgaElementType = 9;
#[allow(non_upper_case_globals)]
pub const OgaElementType_float16: OgaElementType = 10;
#[allow(non_upper_case_globals)]
pub const OgaElementType_float64: OgaElementType = 11;
#[allow(non_upper_case_globals)]
pub const OgaElementType_uint32: OgaElementType = 12;
#[allow(non_upper_case_globals)]
pub const OgaElementType_uint64: OgaElementType = 13;
#[allow(non_upper_case_globals)]
pub const OgaElementType_complex64: OgaElementType = 14;
#[allow(non_upper_case_globals)]
pub const OgaElementType_complex128: OgaElementType = 15;
#[allow(non_upper_case_globals)]
pub const OgaElementType_bfloat16: OgaElementType = 16;

/// A tensor element type: `OgaElementType` uses the ONNX data type codes, so this is the
/// loader's type, restricted to those a tensor can hold here (whole bytes, no strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElementType(DataType);

impl ElementType {
    pub const INT32: ElementType = ElementType(DataType::Int32);
    pub const FLOAT32: ElementType = ElementType(DataType::Float);
    pub const FLOAT16: ElementType = ElementType(DataType::Float16);
    pub const BFLOAT16: ElementType = ElementType(DataType::BFloat16);

    /// The type for a C value.
    pub fn from_c(value: OgaElementType) -> Result<Self> {
        let supported = DataType::from_onnx(value)
            .filter(|t| t.bits().is_some_and(|b| b % 8 == 0) && *t != DataType::String);
        supported.map(ElementType).ok_or_else(|| {
            Error::Invalid(format!(
                "element type {value} is not supported (undefined, string and sub-byte tensors \
                 cannot be created)"
            ))
        })
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        self.0.bits().map_or(1, |b| b as usize / 8)
    }

    /// The C value.
    pub fn to_c(self) -> OgaElementType {
        self.0.to_onnx()
    }
}

/// The memory behind a tensor.
struct Buffer {
    data: *mut u8,
    bytes: usize,
    /// Words allocated by the library (8-byte aligned), freed on drop; `None` for the caller's
    /// memory.
    owned: Option<*mut [u64]>,
}

// SAFETY: the buffer is plain bytes. Owned memory is freed only in drop; borrowed memory belongs
// to the caller, who keeps it valid while the tensor lives (the C API contract) — the same
// promise whatever thread touches it.
unsafe impl Send for Buffer {}
// SAFETY: as above; the library only reads through `data` while the caller may write, which is
// the caller's synchronisation to provide, as with the official library.
unsafe impl Sync for Buffer {}

impl Drop for Buffer {
    fn drop(&mut self) {
        if let Some(words) = self.owned.take() {
            // SAFETY: made by `Box::into_raw` in `Buffer::zeroed` and dropped only here.
            drop(unsafe { Box::from_raw(words) });
        }
    }
}

impl Buffer {
    /// Zeroed library memory (lazily zeroed pages, as `calloc`); an allocation the system
    /// refuses is an error, not an abort.
    fn zeroed(bytes: usize) -> Result<Self> {
        let count = bytes.div_ceil(8);
        let words: Box<[u64]> = if count == 0 {
            Box::new([])
        } else {
            let layout = std::alloc::Layout::array::<u64>(count)
                .map_err(|_| Error::Invalid(format!("a {bytes}-byte tensor is too large")))?;
            // SAFETY: the layout has a non-zero size (count > 0).
            let ptr = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<u64>();
            if ptr.is_null() {
                return Err(Error::Invalid(format!(
                    "cannot allocate a {bytes}-byte tensor: out of memory"
                )));
            }
            // SAFETY: `ptr` is a live, zeroed allocation of exactly `Layout::array::<u64>(count)`
            // from the global allocator, which is the layout a `Box<[u64]>` of `count` values
            // owns and frees; zero is a valid u64.
            unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, count)) }
        };
        let raw = Box::into_raw(words);
        Ok(Buffer {
            data: raw.cast::<u8>(),
            bytes,
            owned: Some(raw),
        })
    }
}

/// A tensor handle; handles may share one buffer. Thread-safety: read-only calls may run on
/// any thread; the data pointer follows the caller's own synchronisation.
pub struct OgaTensor {
    buffer: Arc<Buffer>,
    shape: Vec<i64>,
    element_type: ElementType,
}

impl Handle for OgaTensor {
    const KIND: &'static str = "OgaTensor";
}

fn element_count(shape: &[i64]) -> Result<usize> {
    shape.iter().try_fold(1usize, |acc, &d| {
        let d = usize::try_from(d)
            .map_err(|_| Error::Invalid(format!("tensor dimension {d} is negative")))?;
        acc.checked_mul(d)
            .ok_or_else(|| Error::Invalid("tensor shape overflows".into()))
    })
}

impl OgaTensor {
    /// A library-owned tensor holding a copy of `values`.
    pub fn from_values<T: Copy>(values: &[T], shape: &[usize], ty: ElementType) -> Result<Self> {
        if size_of::<T>() != ty.size() {
            return Err(Error::Invalid(
                "element size does not match the type".into(),
            ));
        }
        let shape: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        if element_count(&shape)? != values.len() {
            return Err(Error::Invalid(
                "tensor shape does not match its values".into(),
            ));
        }
        let buffer = Buffer::zeroed(size_of_val(values))?;
        // SAFETY: the buffer has room for exactly these bytes and does not overlap `values`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                values.as_ptr().cast::<u8>(),
                buffer.data,
                size_of_val(values),
            );
        }
        Ok(OgaTensor {
            buffer: Arc::new(buffer),
            shape,
            element_type: ty,
        })
    }

    /// A new handle sharing this tensor's buffer.
    pub fn share(&self) -> OgaTensor {
        OgaTensor {
            buffer: Arc::clone(&self.buffer),
            shape: self.shape.clone(),
            element_type: self.element_type,
        }
    }

    /// The shape as `(rows, columns)` for a 1-D (one row) or 2-D tensor.
    pub fn matrix_shape(&self, function: &'static str) -> Result<(usize, usize)> {
        let dims: Vec<usize> = self.shape.iter().map(|&d| d.max(0) as usize).collect();
        match dims.as_slice() {
            [n] => Ok((1, *n)),
            [rows, cols] => Ok((*rows, *cols)),
            _ => Err(Error::Invalid(format!(
                "{function}: expected a 1-D or 2-D tensor, got shape {:?}",
                self.shape
            ))),
        }
    }

    fn elements(&self) -> usize {
        self.buffer.bytes / self.element_type.size()
    }

    /// The values of an int32 tensor.
    pub fn to_i32_vec(&self, function: &'static str) -> Result<Vec<i32>> {
        self.read::<i32>(ElementType::INT32, function)
    }

    /// The values of a float32 tensor.
    pub fn to_f32_vec(&self, function: &'static str) -> Result<Vec<f32>> {
        self.read::<f32>(ElementType::FLOAT32, function)
    }

    fn read<T: Copy + Default>(&self, ty: ElementType, function: &'static str) -> Result<Vec<T>> {
        if self.element_type != ty {
            return Err(Error::Invalid(format!(
                "{function}: expected a {ty:?} tensor, got {:?}",
                self.element_type
            )));
        }
        let mut values = vec![T::default(); self.elements()];
        // SAFETY: the buffer holds `bytes` readable bytes (owned, or the caller's promise), and
        // `values` has room for them; byte copies need no alignment.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.buffer.data,
                values.as_mut_ptr().cast::<u8>(),
                values.len() * size_of::<T>(),
            );
        }
        Ok(values)
    }
}

/// `OgaResult* OgaCreateTensorFromBuffer(void* data, const int64_t* shape_dims, size_t
/// shape_dims_count, OgaElementType element_type, OgaTensor** out)`: over `data` (not copied,
/// must outlive the tensor), or over zeroed library memory when `data` is null.
///
/// # Safety
/// `data` is null or holds the tensor's bytes for the tensor's life; `shape_dims` holds
/// `shape_dims_count` values; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateTensorFromBuffer(
    data: *mut c_void,
    shape_dims: *const i64,
    shape_dims_count: usize,
    element_type: OgaElementType,
    out: *mut *mut OgaTensor,
) -> *mut OgaResult {
    const F: &str = "OgaCreateTensorFromBuffer";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: C contract.
        let shape = unsafe { read_slice(shape_dims, shape_dims_count, F, "shape_dims") }?.to_vec();
        let ty = ElementType::from_c(element_type)?;
        let bytes = element_count(&shape)?
            .checked_mul(ty.size())
            .ok_or_else(|| Error::Invalid("tensor size overflows".into()))?;
        let buffer = if data.is_null() {
            if bytes > MAX_OWNED_BYTES {
                return Err(Error::Invalid(format!(
                    "{F}: a {bytes}-byte tensor is larger than the library allocates \
                     ({MAX_OWNED_BYTES} bytes)"
                )));
            }
            Buffer::zeroed(bytes)?
        } else {
            Buffer {
                data: data.cast(),
                bytes,
                owned: None,
            }
        };
        let tensor = OgaTensor {
            buffer: Arc::new(buffer),
            shape,
            element_type: ty,
        };
        // SAFETY: checked non-null.
        unsafe { write_out(out, into_handle(tensor), F, "out") }
    })
}

/// `void OgaDestroyTensor(OgaTensor*)`.
///
/// # Safety
/// `tensor` is null or live and no other thread is using it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyTensor(tensor: *mut OgaTensor) {
    // SAFETY: checked against the registry inside.
    unsafe { destroy(tensor) }
}

/// `OgaResult* OgaTensorGetType(OgaTensor*, OgaElementType* out)`.
///
/// # Safety
/// `tensor` is null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTensorGetType(
    tensor: *mut OgaTensor,
    out: *mut OgaElementType,
) -> *mut OgaResult {
    const F: &str = "OgaTensorGetType";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let tensor = unsafe { borrow(tensor.cast_const(), F, "tensor") }?;
        // SAFETY: checked non-null.
        unsafe { write_out(out, tensor.element_type.to_c(), F, "out") }
    })
}

/// `OgaResult* OgaTensorGetShapeRank(OgaTensor*, size_t* out)`.
///
/// # Safety
/// `tensor` is null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTensorGetShapeRank(
    tensor: *mut OgaTensor,
    out: *mut usize,
) -> *mut OgaResult {
    const F: &str = "OgaTensorGetShapeRank";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let tensor = unsafe { borrow(tensor.cast_const(), F, "tensor") }?;
        // SAFETY: checked non-null.
        unsafe { write_out(out, tensor.shape.len(), F, "out") }
    })
}

/// `OgaResult* OgaTensorGetShape(OgaTensor*, int64_t* shape_dims, size_t shape_dims_count)`:
/// `shape_dims_count` must equal the rank.
///
/// # Safety
/// `tensor` is null or live; `shape_dims` has room for `shape_dims_count` values.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTensorGetShape(
    tensor: *mut OgaTensor,
    shape_dims: *mut i64,
    shape_dims_count: usize,
) -> *mut OgaResult {
    const F: &str = "OgaTensorGetShape";
    guard(F, || {
        // SAFETY: checked against the registry.
        let tensor = unsafe { borrow(tensor.cast_const(), F, "tensor") }?;
        if shape_dims_count != tensor.shape.len() {
            return Err(Error::Invalid(format!(
                "{F}: shape_dims_count is {shape_dims_count} but the tensor has rank {}",
                tensor.shape.len()
            )));
        }
        if shape_dims_count == 0 {
            return Ok(());
        }
        check_out(shape_dims, F, "shape_dims")?;
        // SAFETY: non-null, with room for `shape_dims_count` values (C contract), which equals
        // the rank being copied.
        unsafe {
            std::ptr::copy_nonoverlapping(tensor.shape.as_ptr(), shape_dims, shape_dims_count);
        }
        Ok(())
    })
}

/// `OgaResult* OgaTensorGetData(OgaTensor*, void** out)`: the buffer, valid while the tensor
/// (or another handle sharing it) lives.
///
/// # Safety
/// `tensor` is null or live; `out` is writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaTensorGetData(
    tensor: *mut OgaTensor,
    out: *mut *mut c_void,
) -> *mut OgaResult {
    const F: &str = "OgaTensorGetData";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: checked against the registry.
        let tensor = unsafe { borrow(tensor.cast_const(), F, "tensor") }?;
        // SAFETY: checked non-null.
        unsafe { write_out(out, tensor.buffer.data.cast(), F, "out") }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_allocations_are_errors_and_small_ones_are_zeroed() {
        assert!(Buffer::zeroed(usize::MAX).is_err());
        assert!(Buffer::zeroed(isize::MAX as usize).is_err());
        let buffer = Buffer::zeroed(20).expect("20 bytes");
        // SAFETY: the buffer owns 24 zeroed bytes (3 words), of which 20 are the tensor's.
        let bytes = unsafe { std::slice::from_raw_parts(buffer.data, buffer.bytes) };
        assert!(bytes.iter().all(|&b| b == 0));
        assert_eq!(Buffer::zeroed(0).expect("empty").bytes, 0);
    }
}
