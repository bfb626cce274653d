//! The token choice on the device behind `DecodeBackend::forward_choose`: the step's parameters
//! and ids go up, `logits_process_f32` and the argmax or `sample_f32` run on the logits where
//! the pass left them, and only the 4-byte id comes back, through page-locked memory read
//! after an explicit stream synchronize.

use crate::cuda::kernels::{ARGMAX_PARTS, Ops};

use crate::cuda::memory::DevPtr;
use crate::cuda::span::DevSpan;

use crate::cuda::launch::{cfg, int, launch, launch_error};
use crate::cuda::memory::DevBuf;
use crate::cuda::pinned::PinnedBuf;
use crate::error::Error;
use cudarc::driver::{CudaStream, sys};
use genai_engine::{Choice, SamplingSpec};
use std::collections::HashSet;
use std::sync::Arc;

/// Entries of the parameter block (`SP_*` in kernels/sampling.cu).
pub(crate) const PARAMS: usize = 8;
/// Threads of the one `sample_f32` block (`SAMPLE_THREADS`).
const SAMPLE_THREADS: u32 = 1024;
/// Threads per `logits_process_f32` block.
const PROCESS_THREADS: usize = 256;
/// Suppressed ids at most, besides one penalised id per position.
const EXTRA_IDS: usize = 64;
/// Written to the result before each copy (and by `sample_f32` before it chooses): reading it
/// back means the copy did not land or nothing was chosen.
const SENTINEL: i32 = -1;

/// The kernel's parameter block for a spec over `vocab` logits, with `ids` ids (penalised
/// first, then `suppressed`).
pub(crate) fn params(spec: &SamplingSpec<'_>, vocab: usize, penalized: usize) -> [i32; PARAMS] {
    let (top_k, top_p, temperature, uniform) = match spec.choice {
        Choice::Greedy => (1, 1.0f32, 1.0f32, 0.0f32),
        Choice::Sample {
            top_k,
            top_p,
            temperature,
            uniform,
        } => (top_k, top_p, temperature, uniform),
    };
    // 0 and anything at or above the vocabulary keep every token.
    let top_k = if top_k >= vocab { 0 } else { top_k as i32 };
    [
        top_k,
        top_p.to_bits() as i32,
        temperature.to_bits() as i32,
        uniform.to_bits() as i32,
        spec.penalty.to_bits() as i32,
        penalized as i32,
        spec.suppressed.len() as i32,
        0,
    ]
}

/// The ids the processing kernel reads: the distinct penalised ids (none without a penalty),
/// then the suppressed ones.
pub(crate) fn process_ids(spec: &SamplingSpec<'_>) -> (Vec<i32>, usize) {
    let mut ids = Vec::with_capacity(spec.penalized.len() + spec.suppressed.len());
    if spec.penalty != 1.0 && spec.penalty > 0.0 {
        let mut seen = HashSet::with_capacity(spec.penalized.len());
        ids.extend(spec.penalized.iter().copied().filter(|id| seen.insert(*id)));
    }
    let penalized = ids.len();
    ids.extend_from_slice(spec.suppressed);
    (ids, penalized)
}

impl Ops<'_> {
    /// Applies the penalty to the first `params[5]` ids of `ids` and sets the next `params[6]`
    /// to -inf, in place; the grid covers `capacity` ids (fixed, so it can be captured).
    pub fn logits_process(
        &self,
        logits: DevSpan<'_, f32>,
        n: usize,
        params: DevSpan<'_, i32>,
        ids: DevSpan<'_, i32>,
    ) -> Result<(), Error> {
        const K: &str = "logits_process_f32";
        let capacity = ids.len();
        let logits = logits.need(K, "logits", n)?;
        let params = params.need(K, "params", PARAMS)?;
        let ids = ids.ptr();
        let ni = int("vocab", n)?;
        let blocks = u32::try_from(capacity.div_ceil(PROCESS_THREADS).max(1)).map_err(|_| {
            Error::Invalid {
                what: "penalty ids",
                why: format!("{capacity} ids"),
            }
        })?;
        let f = self.k.get("logits_process_f32")?;
        let c = cfg((blocks, 1, 1), PROCESS_THREADS as u32, 0);
        launch!(self, f, c, &logits, &ni, &params, &ids)
    }

    /// out[0] = the sampled token of `n` logits with the parameters at `params`.
    pub fn sample(
        &self,
        logits: DevSpan<'_, f32>,
        n: usize,
        params: DevSpan<'_, i32>,
        out: DevSpan<'_, i32>,
    ) -> Result<(), Error> {
        const K: &str = "sample_f32";
        let logits = logits.need(K, "logits", n)?;
        let params = params.need(K, "params", PARAMS)?;
        let out = out.need(K, "out", 1)?;
        let ni = int("vocab", n)?;
        let f = self.k.get("sample_f32")?;
        launch!(
            self,
            f,
            cfg((1, 1, 1), SAMPLE_THREADS, 0),
            &logits,
            &ni,
            &params,
            &out
        )
    }
}

/// One generation's buffers for the device choice.
pub(crate) struct Chooser {
    params: DevBuf<i32>,
    ids: DevBuf<i32>,
    out: DevBuf<i32>,
    parts: (DevBuf<f32>, DevBuf<i32>),
    result: PinnedBuf,
}

impl Chooser {
    /// Buffers for sequences of up to `capacity` positions.
    pub fn new(stream: &Arc<CudaStream>, capacity: usize) -> Result<Self, Error> {
        Ok(Chooser {
            params: DevBuf::zeros(stream, PARAMS)?,
            ids: DevBuf::zeros(stream, capacity + EXTRA_IDS)?,
            out: DevBuf::zeros(stream, 1)?,
            parts: (
                DevBuf::zeros(stream, ARGMAX_PARTS)?,
                DevBuf::zeros(stream, ARGMAX_PARTS)?,
            ),
            result: PinnedBuf::from_slice(stream.context(), &[SENTINEL], false)?,
        })
    }

    /// Whether a spec's ids fit the buffer.
    pub fn fits(&self, ids: usize) -> bool {
        ids <= self.ids.len
    }

    /// Enqueues the choice over `logits` (`vocab` values, left processed) with the ids of
    /// [`process_ids`]`(spec)` and the copy of the id to page-locked memory. Read it with
    /// [`read`](Self::read) after synchronizing `ops`'s stream.
    pub fn enqueue(
        &mut self,
        stream: &Arc<CudaStream>,
        ops: &Ops<'_>,
        (logits, vocab): (DevSpan<'_, f32>, usize),
        spec: &SamplingSpec<'_>,
        (ids, penalized): (&[i32], usize),
    ) -> Result<(), Error> {
        if !self.fits(ids.len()) {
            return Err(Error::Length {
                what: "penalty ids",
                expected: self.ids.len,
                got: ids.len(),
            });
        }
        self.params.write(stream, &params(spec, vocab, penalized))?;
        if !ids.is_empty() {
            self.ids.write(stream, ids)?;
            ops.logits_process(logits, vocab, self.params.span(), self.ids.span())?;
        }
        match spec.choice {
            Choice::Greedy => {
                let parts = (self.parts.0.span(), self.parts.1.span());
                ops.argmax(logits, vocab, parts, self.out.span())?;
            }
            Choice::Sample { .. } => {
                ops.sample(logits, vocab, self.params.span(), self.out.span())?
            }
        }
        let dst = self.result.host_ptr().cast_mut();
        // SAFETY: the result allocation is page-locked, at least 4 bytes and owned by `self`,
        // and no other copy targets it. Only the host wrote it last (the sentinel below is
        // written after the previous read, which followed a stream synchronize).
        unsafe { std::ptr::write_volatile(dst.cast::<i32>(), SENTINEL) };
        // SAFETY: `out` is a live device allocation of at least 4 bytes; the copy is ordered on
        // `stream` after the kernels that write it, and the host reads `dst` only in `read`,
        // after the caller synchronized that stream.
        unsafe { sys::cuMemcpyDtoHAsync_v2(dst, self.out.ptr, 4, stream.cu_stream()) }
            .result()
            .map_err(launch_error("token copy"))
    }

    /// Where the choice leaves the chosen id on the device (4 bytes).
    pub fn chosen_ptr(&self) -> DevPtr {
        self.out.ptr
    }

    /// The chosen id, once the stream has been synchronized after [`enqueue`](Self::enqueue).
    pub fn read(&self) -> Result<i32, Error> {
        // SAFETY: the allocation holds at least 4 page-aligned bytes, and the caller
        // synchronized the stream after the copy into it, so no device write is in flight.
        let id = unsafe { std::ptr::read_volatile(self.result.host_ptr().cast::<i32>()) };
        if id == SENTINEL {
            return Err(Error::Cuda {
                what: "token copy",
                message: "no token id came back (the copy had not landed, or no token was \
                          chosen)"
                    .into(),
            });
        }
        Ok(id)
    }
}
