//! Page-locked host memory (allocated once at load): the source of every streamed weight copy
//! (the driver copies from it at full link speed without staging, and a captured graph may
//! hold copies from it), and, mapped into the device's address space, tables the kernels read
//! in place.

use crate::cuda::memory::DevPtr;
use crate::error::Error;
use cudarc::driver::{CudaContext, DeviceRepr, sys};
use std::ffi::c_void;
use std::sync::Arc;

/// A page-locked host allocation of `len` bytes, freed on drop.
pub(crate) struct PinnedBuf {
    ctx: Arc<CudaContext>,
    ptr: *mut c_void,
    len: usize,
    /// The device's address of the memory, when mapped.
    device: Option<DevPtr>,
}

// SAFETY: the allocation is owned by this value alone; the host writes it only through
// `&mut self` (at load) and the device reads it through copies and kernels that the owner's
// decoder orders, so sharing the handle between threads cannot race.
unsafe impl Send for PinnedBuf {}
// SAFETY: as above: `&self` gives only the addresses and read access.
unsafe impl Sync for PinnedBuf {}

fn check(what: &'static str, r: sys::CUresult) -> Result<(), Error> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(Error::Cuda {
            what,
            message: format!("{r:?}"),
        })
    }
}

impl PinnedBuf {
    /// A copy of `data` in page-locked memory; `mapped` also maps it into the device's
    /// address space.
    pub fn from_slice<T: DeviceRepr>(
        ctx: &Arc<CudaContext>,
        data: &[T],
        mapped: bool,
    ) -> Result<Self, Error> {
        let bytes = std::mem::size_of_val(data);
        let len = bytes.max(1);
        ctx.bind_to_thread().map_err(|e| Error::Cuda {
            what: "pinned allocation",
            message: format!("{e:?}"),
        })?;
        let flags = if mapped {
            sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE
        } else {
            sys::CU_MEMHOSTALLOC_PORTABLE
        };
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `ptr` is a valid out-pointer; the context is bound to this thread.
        let r = unsafe { sys::cuMemHostAlloc(&mut ptr, len, flags) };
        if r != sys::CUresult::CUDA_SUCCESS || ptr.is_null() {
            return Err(Error::Cuda {
                what: "pinned allocation",
                message: format!(
                    "{len} bytes of page-locked host memory: {r:?} (not enough host memory \
                     can be locked for the streamed weights)"
                ),
            });
        }
        let mut buf = PinnedBuf {
            ctx: Arc::clone(ctx),
            ptr,
            len,
            device: None,
        };
        // SAFETY: `ptr` points to `len >= bytes` writable bytes owned by `buf`; `data` spans
        // `bytes` readable bytes of plain device values (DeviceRepr types have no padding);
        // the regions cannot overlap (the allocation is fresh).
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr().cast::<u8>(), ptr.cast::<u8>(), bytes)
        };
        if mapped {
            let mut dptr: sys::CUdeviceptr = 0;
            // SAFETY: `ptr` was allocated with DEVICEMAP in this (bound) context.
            check("mapped host memory", unsafe {
                sys::cuMemHostGetDevicePointer_v2(&mut dptr, ptr, 0)
            })?;
            buf.device = Some(dptr);
        }
        Ok(buf)
    }

    /// The host address (the source of copies).
    pub fn host_ptr(&self) -> *const c_void {
        self.ptr
    }

    /// Bytes held (at least one).
    pub fn len(&self) -> usize {
        self.len
    }

    /// The device's address of a mapped allocation.
    pub fn device_ptr(&self) -> Result<DevPtr, Error> {
        self.device.ok_or(Error::Invalid {
            what: "pinned memory",
            why: "not mapped into the device's address space".into(),
        })
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        // Errors cannot be reported from drop; the context outlives this value (held here).
        let _ = self.ctx.bind_to_thread();
        // SAFETY: `ptr` came from cuMemHostAlloc and is freed exactly once, here; every copy or
        // kernel reading it belongs to a decoder whose streams are synchronized before the
        // decoder (and so this buffer) is dropped.
        let _ = unsafe { sys::cuMemFreeHost(self.ptr) };
    }
}
