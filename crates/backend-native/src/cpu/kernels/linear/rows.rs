//! Row-major helpers of the linear layers: a view of `m` rows of one slice, zero padding of rows
//! to a longer stride, and rounding up to a multiple.

use crate::cpu::kernels::aligned::Aligned;

/// `m` rows of `stride` elements each in one slice.
pub(crate) struct Rows<'a, T> {
    pub(super) data: &'a [T],
    pub(super) stride: usize,
    len: usize,
}

impl<'a, T> Rows<'a, T> {
    pub(crate) fn new(data: &'a [T], stride: usize, len: usize) -> Self {
        assert!(data.len() >= stride * len);
        Self { data, stride, len }
    }

    pub(crate) fn row(&self, r: usize) -> &'a [T] {
        &self.data[r * self.stride..(r + 1) * self.stride]
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

/// Copies `[m, k]` rows into `[m, kp]` with zeros after column `k`.
pub(crate) fn pad_rows(x: &[f32], m: usize, k: usize, kp: usize) -> Aligned<f32> {
    let mut out = Aligned::zeroed(m * kp);
    for (dst, src) in out.as_mut_slice().chunks_mut(kp).zip(x.chunks(k.max(1))) {
        dst[..k].copy_from_slice(&src[..k]);
    }
    out
}

/// `v` rounded up to a multiple of `to`.
pub(crate) fn round_up(v: usize, to: usize) -> usize {
    v.div_ceil(to) * to
}
