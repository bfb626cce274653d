//! Device buffers: an owned cudarc allocation with its raw address, which the kernels and the
//! captured graph use directly (addresses are fixed for the buffer's life).

use crate::error::Error;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DeviceRepr, ValidAsZeroBits};
use std::sync::Arc;

/// A device address (0 for an absent optional argument).
pub(crate) type DevPtr = u64;

/// An allocation of `len` values of `T` (at least one, so the address is never 0).
pub(crate) struct DevBuf<T> {
    slice: CudaSlice<T>,
    pub ptr: DevPtr,
    pub len: usize,
}

fn alloc_error(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Cuda {
        what,
        message: format!("{e:?}"),
    }
}

impl<T: DeviceRepr + ValidAsZeroBits> DevBuf<T> {
    /// `len` zeroed values.
    pub fn zeros(stream: &Arc<CudaStream>, len: usize) -> Result<Self, Error> {
        let slice = stream
            .alloc_zeros::<T>(len.max(1))
            .map_err(alloc_error("allocation"))?;
        Ok(Self::wrap(stream, slice, len))
    }

    /// A copy of `host`.
    pub fn from_host(stream: &Arc<CudaStream>, host: &[T]) -> Result<Self, Error> {
        if host.is_empty() {
            return Self::zeros(stream, 0);
        }
        let slice = stream
            .clone_htod(host)
            .map_err(alloc_error("host to device copy"))?;
        Ok(Self::wrap(stream, slice, host.len()))
    }

    fn wrap(stream: &CudaStream, slice: CudaSlice<T>, len: usize) -> Self {
        let ptr = {
            let (ptr, _sync) = slice.device_ptr(stream);
            ptr
        };
        DevBuf { slice, ptr, len }
    }

    /// Copies `host` to the start of the buffer (stream-ordered).
    pub fn write(&mut self, stream: &Arc<CudaStream>, host: &[T]) -> Result<(), Error> {
        if host.len() > self.len {
            return Err(Error::Length {
                what: "device write",
                expected: self.len,
                got: host.len(),
            });
        }
        let mut view = self.slice.slice_mut(0..host.len());
        stream
            .memcpy_htod(host, &mut view)
            .map_err(alloc_error("host to device copy"))
    }

    /// Copies the first `host.len()` values to `host` (waits for the stream).
    pub fn read(&self, stream: &Arc<CudaStream>, host: &mut [T]) -> Result<(), Error> {
        if host.len() > self.len {
            return Err(Error::Length {
                what: "device read",
                expected: self.len,
                got: host.len(),
            });
        }
        let view = self.slice.slice(0..host.len());
        stream
            .memcpy_dtoh(&view, host)
            .map_err(alloc_error("device to host copy"))
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
}
