//! What every check of the self-test shares: its outcome ([`Check`]), the seeded generator,
//! the relative difference, and the context (stream, kernels, CPU pool) with its copies.

use crate::cpu::threads::ThreadPool;
use crate::cuda::kernels::{Kernels, Ops};
use crate::cuda::memory::DevBuf;
use crate::error::Error;
use cudarc::driver::CudaStream;
use std::sync::Arc;

/// One check's outcome.
#[derive(Debug, Clone)]
pub struct Check {
    pub name: String,
    /// Largest |cuda - cpu| relative to the largest |cpu| value.
    pub rel_diff: f32,
    pub limit: f32,
}

impl Check {
    pub fn pass(&self) -> bool {
        self.rel_diff <= self.limit
    }
}

/// A small seeded generator (xorshift), values in [-1, 1).
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }
    pub(super) fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
    pub(super) fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n)
            .map(|_| (self.0.wrapping_mul(31) >> 3) as u8 ^ self.next().to_bits() as u8)
            .collect()
    }
}

/// Largest |got - want| relative to the largest |want| value (infinite where one is NaN and the
/// other not).
pub(super) fn rel(got: &[f32], want: &[f32]) -> f32 {
    let scale = want.iter().fold(1e-30f32, |m, v| m.max(v.abs()));
    let diff = got.iter().zip(want).fold(0f32, |m, (a, b)| {
        if a.is_nan() != b.is_nan() {
            f32::INFINITY
        } else {
            m.max((a - b).abs())
        }
    });
    diff / scale
}

/// The device, kernels and CPU pool every check runs with.
pub(super) struct Ctx {
    pub(super) stream: Arc<CudaStream>,
    pub(super) kernels: Kernels,
    pub(super) pool: ThreadPool,
}

impl Ctx {
    pub(super) fn ops(&self) -> Ops<'_> {
        Ops {
            k: &self.kernels,
            stream: &self.stream,
            pdl: self.kernels.pdl,
        }
    }
    pub(super) fn up<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
        &self,
        v: &[T],
    ) -> Result<DevBuf<T>, Error> {
        DevBuf::from_host(&self.stream, v)
    }
    pub(super) fn down<
        T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits + Clone + Default,
    >(
        &self,
        b: &DevBuf<T>,
        n: usize,
    ) -> Result<Vec<T>, Error> {
        let mut v = vec![T::default(); n];
        b.read(&self.stream, &mut v)?;
        self.stream.synchronize().map_err(|e| Error::Cuda {
            what: "sync",
            message: format!("{e:?}"),
        })?;
        Ok(v)
    }
}
