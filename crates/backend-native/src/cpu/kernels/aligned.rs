//! Zero-initialised buffers aligned to 64 bytes (a cache line, an AVX-512 vector), so that
//! weight rows and quantized activations that start at multiples of 64 bytes never make a
//! vector load straddle two cache lines (the allocator alone only guarantees 16 bytes).

use std::marker::PhantomData;

/// Element types that are plain bytes: every bit pattern valid, no padding, align <= 64.
///
/// # Safety
/// Implementors must be `Copy` plain-old-data types meeting the above.
pub(crate) unsafe trait Plain: Copy + Default {}
// SAFETY: primitive numbers: any bits are a valid value, no padding, alignment <= 8.
unsafe impl Plain for u8 {}
// SAFETY: as above.
unsafe impl Plain for i8 {}
// SAFETY: as above.
unsafe impl Plain for i32 {}
// SAFETY: as above.
unsafe impl Plain for f32 {}

#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// `len` values of `T`, zeroed, starting on a 64-byte boundary.
#[derive(Clone)]
pub(crate) struct Aligned<T: Plain> {
    lines: Vec<Line>,
    len: usize,
    _t: PhantomData<T>,
}

impl<T: Plain> Aligned<T> {
    pub(crate) fn zeroed(len: usize) -> Self {
        let bytes = len * size_of::<T>();
        Self {
            lines: vec![Line([0; 64]); bytes.div_ceil(64)],
            len,
            _t: PhantomData,
        }
    }

    pub(crate) fn as_slice(&self) -> &[T] {
        // SAFETY: `lines` holds at least len * size_of::<T>() initialised bytes at an address
        // aligned to 64 >= align_of::<T>(), and every bit pattern is a valid `T` (`Plain`).
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast(), self.len) }
    }

    pub(crate) fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`, with exclusive access through `&mut self`.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), self.len) }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        for len in [0usize, 1, 15, 16, 17, 1000] {
            let mut a = Aligned::<f32>::zeroed(len);
            assert_eq!(a.as_slice().len(), len);
            assert_eq!(a.as_slice().as_ptr() as usize % 64, 0);
            assert!(a.as_slice().iter().all(|&v| v == 0.0));
            a.as_mut_slice().iter_mut().for_each(|v| *v = 1.5);
            assert!(a.clone().as_slice().iter().all(|&v| v == 1.5));
        }
    }
}
