//! Typed views of device memory ([`DevSpan`]): an address with the number of values of `T` it
//! holds, borrowed from a [`DevBuf`] (or a checked sub-range of one). The launch wrappers take
//! spans and check each against the extent the launch's dimensions make the kernel read or
//! write ([`DevSpan::need`]) before the launch, so a buffer too short is an [`Error::BadExtent`]
//! naming the kernel and the argument, never an out-of-bounds access.

use crate::cuda::memory::{DevBuf, DevPtr};
use crate::error::Error;
use std::marker::PhantomData;

/// `len` values of `T` at device address `ptr`, valid while the borrow `'a` lasts.
#[derive(Debug)]
pub(crate) struct DevSpan<'a, T> {
    ptr: DevPtr,
    len: usize,
    _values: PhantomData<&'a [T]>,
}

impl<T> Clone for DevSpan<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for DevSpan<'_, T> {}

impl<'a, T> DevSpan<'a, T> {
    /// A span over memory no [`DevBuf`] of the caller owns (a pager's slot, mapped host memory,
    /// a weight image's part).
    ///
    /// # Safety
    /// `ptr` must address at least `len` values of `T` of one live device allocation (or of
    /// host memory mapped into the device's address space) for as long as `'a` lasts.
    pub unsafe fn from_raw(ptr: DevPtr, len: usize) -> Self {
        DevSpan {
            ptr,
            len,
            _values: PhantomData,
        }
    }

    /// The device address of the first value.
    pub fn ptr(&self) -> DevPtr {
        self.ptr
    }

    /// Values the span holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The same memory as bytes.
    #[cfg(feature = "lab")]
    pub fn as_bytes(self) -> DevSpan<'a, u8> {
        DevSpan {
            ptr: self.ptr,
            len: self.len * std::mem::size_of::<T>(),
            _values: PhantomData,
        }
    }

    /// The values from `offset` on (an error past the end).
    pub fn from(self, offset: usize) -> Result<Self, Error> {
        if offset > self.len {
            return Err(Error::Invalid {
                what: "device span",
                why: format!("offset {offset} is past a span of {}", self.len),
            });
        }
        Ok(DevSpan {
            ptr: self.ptr + (offset * std::mem::size_of::<T>()) as u64,
            len: self.len - offset,
            _values: PhantomData,
        })
    }

    /// The address, when the span holds at least `needed` values (what `kernel` reads or
    /// writes through `arg` at the dimensions of its launch); else [`Error::BadExtent`].
    pub fn need(
        &self,
        kernel: &'static str,
        arg: &'static str,
        needed: usize,
    ) -> Result<DevPtr, Error> {
        if self.len >= needed {
            Ok(self.ptr)
        } else {
            Err(Error::BadExtent {
                kernel,
                arg,
                needed,
                given: self.len,
            })
        }
    }
}

/// [`DevSpan::need`] of an optional argument: 0 (the kernels' "absent") for none.
pub(crate) fn need_opt<T>(
    span: Option<DevSpan<'_, T>>,
    kernel: &'static str,
    arg: &'static str,
    needed: usize,
) -> Result<DevPtr, Error> {
    span.map_or(Ok(0), |s| s.need(kernel, arg, needed))
}

impl<T> DevBuf<T> {
    /// The whole buffer as a span.
    pub fn span(&self) -> DevSpan<'_, T> {
        DevSpan {
            ptr: self.ptr,
            len: self.len,
            _values: PhantomData,
        }
    }

    /// The values from `offset` on (an error past the end).
    pub fn span_from(&self, offset: usize) -> Result<DevSpan<'_, T>, Error> {
        self.span().from(offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_span_is_an_error_naming_the_kernel_and_argument() {
        // SAFETY: the span is only checked, never handed to a kernel.
        let s = unsafe { DevSpan::<f32>::from_raw(0x1000, 8) };
        assert_eq!(s.need("k", "x", 8), Ok(0x1000));
        assert_eq!(
            s.need("k", "x", 9),
            Err(Error::BadExtent {
                kernel: "k",
                arg: "x",
                needed: 9,
                given: 8
            })
        );
        let tail = s.from(3).expect("inside");
        assert_eq!((tail.ptr(), tail.len()), (0x1000 + 12, 5));
        assert!(s.from(9).is_err());
        assert_eq!(need_opt::<f32>(None, "k", "bias", 100), Ok(0));
    }
}
