//! The CUDA pager: streamed weights in page-locked host memory, a fixed pool of device slots,
//! a copy stream, and the events that order copies against compute as the step scheduler
//! ([`PassSchedule`]) says. A pass issues the same calls eager or under stream capture, so the
//! decode step stays one CUDA graph with its copies inside. Timing events around every copy and
//! every wait measure the link's achieved bandwidth and the compute stalled on copies.

use crate::cuda::memory::DevBuf;
use crate::cuda::memory::DevPtr;
use crate::cuda::pinned::PinnedBuf;
use crate::error::Error;
use crate::paging::{PagerOp, PassSchedule, slot_of};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, sys};
use std::cell::RefCell;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

fn cuda(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> Error {
    move |e| Error::Cuda {
        what,
        message: format!("{e:?}"),
    }
}

/// Timing events of one streamed weight: its copy's start and end (copy stream), and the
/// compute stream's wait for it.
struct Timing {
    copy_start: CudaEvent,
    copy_end: CudaEvent,
    wait_start: CudaEvent,
    wait_end: CudaEvent,
}

/// Measured over decode passes.
#[derive(Debug, Clone, Default)]
pub(crate) struct PagerStats {
    pub passes: u64,
    pub streamed_bytes: u64,
    pub copy_ms: f64,
    pub stall_ms: f64,
    /// Passes whose timing could not be read (reported, not guessed).
    pub untimed_passes: u64,
}

/// Streamed weights and their slots.
pub(crate) struct Pager {
    ctx: Arc<CudaContext>,
    copy: Arc<CudaStream>,
    slots: Vec<DevBuf<u8>>,
    pub slot_bytes: usize,
    host: Vec<PinnedBuf>,
    ready: Vec<CudaEvent>,
    released: Vec<CudaEvent>,
    fork: CudaEvent,
    join: CudaEvent,
    timing: Vec<Timing>,
    /// One pass at a time: generations on this decoder share the slots.
    lock: Mutex<()>,
    stats: Mutex<PagerStats>,
}

fn event(ctx: &Arc<CudaContext>, timed: bool) -> Result<CudaEvent, Error> {
    let flags = if timed {
        sys::CUevent_flags::CU_EVENT_DEFAULT
    } else {
        sys::CUevent_flags::CU_EVENT_DISABLE_TIMING
    };
    ctx.new_event(Some(flags)).map_err(cuda("event"))
}

impl Pager {
    /// A pool of `slots` device slots of `slot_bytes` each, and a copy stream.
    pub fn new(stream: &Arc<CudaStream>, slots: usize, slot_bytes: usize) -> Result<Pager, Error> {
        let ctx = Arc::clone(stream.context());
        let pool = (0..slots)
            .map(|_| DevBuf::<u8>::zeros(stream, slot_bytes))
            .collect::<Result<Vec<_>, _>>()?;
        let events = |timed| {
            (0..slots)
                .map(|_| event(&ctx, timed))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Pager {
            copy: ctx.new_stream().map_err(cuda("copy stream"))?,
            slots: pool,
            slot_bytes,
            host: Vec::new(),
            ready: events(false)?,
            released: events(false)?,
            fork: event(&ctx, false)?,
            join: event(&ctx, false)?,
            timing: Vec::new(),
            lock: Mutex::new(()),
            stats: Mutex::new(PagerStats::default()),
            ctx,
        })
    }

    /// Takes a layer's image as the next streamed weight: returns its index and the address
    /// of the slot it will be read from.
    pub fn add(&mut self, image: &[u8]) -> Result<(usize, DevPtr), Error> {
        if image.len() > self.slot_bytes || self.slots.is_empty() {
            return Err(Error::Invalid {
                what: "pager",
                why: format!(
                    "a {}-byte weight does not fit a {}-byte slot",
                    image.len(),
                    self.slot_bytes
                ),
            });
        }
        let index = self.host.len();
        self.host
            .push(PinnedBuf::from_slice(&self.ctx, image, false)?);
        self.timing.push(Timing {
            copy_start: event(&self.ctx, true)?,
            copy_end: event(&self.ctx, true)?,
            wait_start: event(&self.ctx, true)?,
            wait_end: event(&self.ctx, true)?,
        });
        Ok((index, self.slots[slot_of(index, self.slots.len())].ptr))
    }

    /// Streamed weights.
    pub fn streamed(&self) -> usize {
        self.host.len()
    }

    /// Slots in the pool.
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Bytes one pass copies.
    pub fn bytes_per_pass(&self) -> u64 {
        self.host.iter().map(|h| h.len() as u64).sum()
    }

    /// Holds the slots for one generation's passes (until the guard drops).
    pub fn lock(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// After a decode pass has completed (its stream synchronized): adds its copy bytes and,
    /// from the timing events, its copy time and the compute time stalled on copies.
    pub fn account_pass(&self) {
        let mut copy_ms = 0.0f64;
        let mut stall_ms = 0.0f64;
        let mut timed = true;
        for t in &self.timing {
            match (
                t.copy_start.elapsed_ms(&t.copy_end),
                t.wait_start.elapsed_ms(&t.wait_end),
            ) {
                (Ok(c), Ok(w)) => {
                    copy_ms += f64::from(c);
                    stall_ms += f64::from(w);
                }
                _ => timed = false,
            }
        }
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        stats.passes += 1;
        stats.streamed_bytes += self.bytes_per_pass();
        if timed {
            stats.copy_ms += copy_ms;
            stats.stall_ms += stall_ms;
        } else {
            stats.untimed_passes += 1;
        }
    }

    pub fn stats(&self) -> PagerStats {
        self.stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// One forward pass's use of the pager (borrowed by the pass's `Ops`).
pub(crate) struct PagerPass<'a> {
    pager: &'a Pager,
    compute: &'a CudaStream,
    schedule: RefCell<PassSchedule>,
    /// Under stream capture: timing events become graph nodes (external records).
    capturing: bool,
}

impl<'a> PagerPass<'a> {
    /// Starts a pass on `compute`: forks the copy stream and fills every slot.
    pub fn begin(
        pager: &'a Pager,
        compute: &'a CudaStream,
        capturing: bool,
    ) -> Result<Self, Error> {
        let mut schedule = PassSchedule::new(pager.streamed(), pager.slots())?;
        let ops = schedule.begin();
        let pass = PagerPass {
            pager,
            compute,
            schedule: RefCell::new(schedule),
            capturing,
        };
        pass.issue(&ops, None)?;
        Ok(pass)
    }

    pub fn acquire(&self, j: usize) -> Result<(), Error> {
        let ops = self.schedule.borrow_mut().acquire(j)?;
        self.issue(&ops, Some(j))
    }

    pub fn release(&self, j: usize) -> Result<(), Error> {
        let ops = self.schedule.borrow_mut().release(j)?;
        self.issue(&ops, Some(j))
    }

    /// Ends the pass: the compute stream waits for the copy stream (joining it back).
    pub fn end(self) -> Result<(), Error> {
        let ops = self.schedule.borrow_mut().end()?;
        self.issue(&ops, None)
    }

    /// Records a timing event: a graph node under capture, a plain record otherwise.
    fn mark(&self, event: &CudaEvent, stream: &CudaStream) -> Result<(), Error> {
        if self.capturing {
            let flags = sys::CUevent_record_flags_enum::CU_EVENT_RECORD_EXTERNAL as u32;
            // SAFETY: both handles are alive (owned by the pager and the pass's stream) and
            // belong to the bound context.
            let r =
                unsafe { sys::cuEventRecordWithFlags(event.cu_event(), stream.cu_stream(), flags) };
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(Error::Cuda {
                    what: "timing event",
                    message: format!("{r:?}"),
                });
            }
            Ok(())
        } else {
            event.record(stream).map_err(cuda("timing event"))
        }
    }

    fn issue(&self, ops: &[PagerOp], weight: Option<usize>) -> Result<(), Error> {
        let p = self.pager;
        let copy: &CudaStream = &p.copy;
        for &op in ops {
            match op {
                PagerOp::Fork => {
                    p.fork.record(self.compute).map_err(cuda("fork"))?;
                    copy.wait(&p.fork).map_err(cuda("fork"))?;
                }
                PagerOp::WaitReleased { slot } => {
                    copy.wait(&p.released[slot]).map_err(cuda("slot wait"))?
                }
                PagerOp::Copy { weight, slot } => {
                    let (src, dst) = (&p.host[weight], p.slots[slot].ptr);
                    let t = &p.timing[weight];
                    self.mark(&t.copy_start, copy)?;
                    p.ctx.bind_to_thread().map_err(cuda("weight copy"))?;
                    // SAFETY: `src` is page-locked and holds `len` bytes for the pager's life;
                    // `dst` is a slot of `slot_bytes >= len` bytes (checked in `add`); the
                    // copy is ordered after the slot's release by the wait issued before it.
                    let r = unsafe {
                        sys::cuMemcpyHtoDAsync_v2(dst, src.host_ptr(), src.len(), copy.cu_stream())
                    };
                    if r != sys::CUresult::CUDA_SUCCESS {
                        return Err(Error::Cuda {
                            what: "weight copy",
                            message: format!("{r:?}"),
                        });
                    }
                    self.mark(&t.copy_end, copy)?;
                    p.ready[slot].record(copy).map_err(cuda("copy event"))?;
                }
                PagerOp::WaitCopied { slot } => {
                    let t = weight.map(|j| &p.timing[j]);
                    if let Some(t) = t {
                        self.mark(&t.wait_start, self.compute)?;
                    }
                    self.compute
                        .wait(&p.ready[slot])
                        .map_err(cuda("copy wait"))?;
                    if let Some(t) = t {
                        self.mark(&t.wait_end, self.compute)?;
                    }
                }
                PagerOp::Release { slot } => p.released[slot]
                    .record(self.compute)
                    .map_err(cuda("release"))?,
                PagerOp::Join => {
                    p.join.record(copy).map_err(cuda("join"))?;
                    self.compute.wait(&p.join).map_err(cuda("join"))?;
                }
            }
        }
        Ok(())
    }
}

/// Pinned host-to-device and device-to-device copy bandwidth (bytes/s), measured with
/// `bytes`-sized copies on `stream`: the costs the slot count is chosen from.
pub(crate) fn measure_link(stream: &Arc<CudaStream>, bytes: usize) -> Result<(f64, f64), Error> {
    let ctx = stream.context();
    let host = PinnedBuf::from_slice(ctx, &vec![1u8; bytes], false)?;
    let dev = DevBuf::<u8>::zeros(stream, 2 * bytes)?;
    let (start, end) = (event(ctx, true)?, event(ctx, true)?);
    let time = |f: &dyn Fn() -> sys::CUresult| -> Result<f64, Error> {
        // One warm-up, then three timed.
        for round in 0..4 {
            if round == 1 {
                start.record(stream).map_err(cuda("link timing"))?;
            }
            ctx.bind_to_thread().map_err(cuda("link timing"))?;
            let r = f();
            if r != sys::CUresult::CUDA_SUCCESS {
                return Err(Error::Cuda {
                    what: "link timing",
                    message: format!("{r:?}"),
                });
            }
        }
        end.record(stream).map_err(cuda("link timing"))?;
        let ms = start.elapsed_ms(&end).map_err(cuda("link timing"))?;
        Ok(3.0 * bytes as f64 / (f64::from(ms).max(1e-6) / 1e3))
    };
    // SAFETY: `host` holds `bytes` page-locked bytes and `dev` 2 x `bytes` device bytes, both
    // alive until the stream is synchronized by `elapsed_ms` above.
    let h2d = time(&|| unsafe {
        sys::cuMemcpyHtoDAsync_v2(dev.ptr, host.host_ptr(), bytes, stream.cu_stream())
    })?;
    // SAFETY: two disjoint halves of `dev`.
    let d2d = time(&|| unsafe {
        sys::cuMemcpyDtoDAsync_v2(dev.ptr + bytes as u64, dev.ptr, bytes, stream.cu_stream())
    })?;
    // A copy reads and writes: the kernels' bandwidth figure counts bytes read.
    Ok((h2d, 2.0 * d2d))
}
