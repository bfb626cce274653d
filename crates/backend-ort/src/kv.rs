//! The KV cache as ONNX Runtime values: one static buffer per tensor that past inputs and present
//! outputs alias (`past_present_share_buffer`), or present outputs fed back as the next pasts.

use crate::Error;
use crate::device::Device;
use crate::io::IoSpec;
use crate::tensors::{allocated, empty_float, truncate_axis};
use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{IoBinding, Session};
use ort::value::{DynTensor, DynValue};

/// The cache of one generation.
pub(crate) enum KvCache {
    /// `[.., capacity, head]` buffers written in place by the model, one per past input.
    Shared {
        buffers: Vec<DynTensor>,
        capacity: usize,
    },
    /// The previous step's present outputs, one per past input.
    PingPong { values: Vec<DynValue> },
}

impl KvCache {
    /// A static buffer of `capacity` positions per tensor, on the session's device.
    pub(crate) fn shared(
        session: &Session,
        io: &IoSpec,
        device: Device,
        batch: usize,
        capacity: usize,
    ) -> Result<Self, Error> {
        let shape = io
            .kv_layout
            .shape(batch, io.kv_heads, capacity, io.head_size);
        let device_allocator;
        let allocator = match device {
            Device::Cpu => session.allocator(),
            Device::Cuda => {
                let info = MemoryInfo::new(
                    AllocationDevice::CUDA,
                    0,
                    AllocatorType::Device,
                    MemoryType::Default,
                )
                .map_err(|e| Error::ort("CUDA memory info", e))?;
                device_allocator =
                    Allocator::new(session, info).map_err(|e| Error::ort("CUDA allocator", e))?;
                &device_allocator
            }
        };
        let buffers = io
            .past_inputs
            .iter()
            .map(|_| allocated(allocator, io.kv_dtype, shape.clone()))
            .collect::<Result<_, _>>()?;
        Ok(KvCache::Shared { buffers, capacity })
    }

    /// Empty pasts that grow every step.
    pub(crate) fn ping_pong(io: &IoSpec, batch: usize) -> Result<Self, Error> {
        let shape = io.kv_layout.shape(batch, io.kv_heads, 0, io.head_size);
        let values = io
            .past_inputs
            .iter()
            .map(|_| empty_float(io.kv_dtype, shape.clone()))
            .collect::<Result<_, _>>()?;
        Ok(KvCache::PingPong { values })
    }

    /// Drops every position from `keep` on. Static buffers need nothing: the mask's length says
    /// how much of them is valid.
    pub(crate) fn truncate(&mut self, io: &IoSpec, keep: usize) -> Result<(), Error> {
        if let KvCache::PingPong { values } = self {
            for value in values.iter_mut() {
                *value = truncate_axis(value, io.kv_layout.seq_axis(), keep)?;
            }
        }
        Ok(())
    }
}

/// Binds each shared buffer as its past input and as its present output (the step writes the
/// new positions in place), pairs in `(past, present)` order with `buffers`.
pub(crate) fn bind_shared<'a>(
    binding: &mut IoBinding,
    pairs: impl Iterator<Item = (&'a String, &'a String)>,
    buffers: &mut [DynTensor],
) -> Result<(), Error> {
    for ((past, present), buffer) in pairs.zip(buffers.iter_mut()) {
        binding
            .bind_input(past.as_str(), &*buffer)
            .map_err(|e| Error::ort(format!("binding {past}"), e))?;
        binding
            .bind_output(present.as_str(), &mut *buffer)
            .map_err(|e| Error::ort(format!("binding {present}"), e))?;
    }
    Ok(())
}
