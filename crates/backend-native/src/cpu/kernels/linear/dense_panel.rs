//! The dense weights' panel shape ([`PANEL`] columns, [`PCHUNK`] floats a chunk), the prefill
//! GEMM's [`Strip`], and the [`Kernels`] trait every instruction set's kernels implement: what
//! the drivers in `dense.rs` and the x86 kernels in `dense_x86.rs` both use.

use crate::cpu::kernels::math::LANES;

/// Output columns per panel.
pub(crate) const PANEL: usize = 4;
/// Floats in one chunk of a panel: [`PANEL`] columns of 16 values.
pub(crate) const PCHUNK: usize = PANEL * LANES;

/// One strip of the prefill GEMM: `rows` rows of `x` times `C` (4 or 8) weight columns over
/// one k block of `chunks` 16-value chunks. The kernels walk it in tiles of up to
/// [`Kernels::ROWS`] rows, carrying the 16 lane sums of each output in `acc` between k blocks;
/// on the last k block they write `out[r][col..col + C] = sum (+ bias[..C])`.
pub(crate) struct Strip<'a, 'o> {
    /// Row 0 at the block's first value; row `r` starts `r * x_stride` later.
    pub x: &'a [f32],
    pub x_stride: usize,
    pub rows: usize,
    /// The strip's first panel at the block's first chunk; the next panel is `w_stride` later.
    pub w: &'a [f32],
    pub w_stride: usize,
    pub chunks: usize,
    /// `[rows][C][16]` lane sums: read unless `first`, written unless `last` (may be empty
    /// when both are set).
    pub acc: &'a mut [f32],
    pub first: bool,
    pub last: bool,
    /// The strip's output rows, written from column `col` when `last`.
    pub out: &'a mut [&'o mut [f32]],
    pub col: usize,
    /// `C` biases (from the strip's first column) or none.
    pub bias: Option<&'a [f32]>,
    /// The weights the next strip reads (one range per panel, either may be empty),
    /// prefetched into L2 a part per tile.
    pub next: [&'a [f32]; 2],
}

impl Strip<'_, '_> {
    /// Checks the slices cover what an `R x C` tile reads and writes (the kernels rely on it).
    pub(crate) fn check<const C: usize>(&self) {
        assert!(C == PANEL || C == 2 * PANEL);
        if self.rows == 0 {
            return;
        }
        assert!(self.x.len() >= (self.rows - 1) * self.x_stride + self.chunks * LANES);
        assert!(self.w.len() >= (C / PANEL - 1) * self.w_stride + self.chunks * PCHUNK);
        assert!((self.first && self.last) || self.acc.len() >= self.rows * C * LANES);
        if self.last {
            assert!(self.out.len() >= self.rows);
            assert!(
                self.out[..self.rows]
                    .iter()
                    .all(|o| o.len() >= self.col + C)
            );
            assert!(self.bias.is_none_or(|b| b.len() >= C));
        }
    }

    /// The lane sums of tile row `r`, output column `c`.
    pub(crate) fn acc_at<const C: usize>(r: usize, c: usize) -> usize {
        (r * C + c) * LANES
    }
}

/// The per-instruction-set kernels the drivers call; all give the same bits.
pub(crate) trait Kernels: Sync {
    /// Decode: for each `s`, the 4 outputs of the panel at `w[starts[s]..]` (`PANEL * kp`
    /// floats), `x` `kp` long. The `S` panels are read side by side, as `S` memory streams.
    fn gemv<const S: usize>(
        &self,
        x: &[f32],
        w: &[f32],
        kp: usize,
        starts: [usize; S],
    ) -> [[f32; PANEL]; S];

    /// Prefill: one strip (see [`Strip`]).
    fn strip<const C: usize>(&self, s: Strip<'_, '_>);

    /// Tile rows of the prefill kernels.
    const ROWS: usize;
}
