//! The shape of a linear call ([`LinearShape`]) and the block geometry the linear kernels share
//! with `kernels/prelude.cuh` (rows and warps a block, the warp target, the staging limit).

use crate::cuda::launch::{grid_dim, int};
use crate::error::Error;

/// Shape of a linear call: `m` rows of `k` inputs (rows `ldx` apart) to `n` outputs (rows of y
/// `ldy` apart).
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinearShape {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub ldx: usize,
    pub ldy: usize,
    /// -1: plain outputs; otherwise (gate, up) column pairs and the activation of the gate
    /// (0 SiLU, 1 GELU, 2 GELU tanh): `n / 2` outputs act(gate) * up.
    pub glu: i32,
}

impl LinearShape {
    /// The shape as kernel ints `(m, k, n, ldx, ldy, split)`, or an error when it is not a valid
    /// linear call.
    pub(crate) fn check(&self) -> Result<(i32, i32, i32, i32, i32, i32), Error> {
        if self.ldx < self.k || self.m == 0 || (self.glu >= 0 && !self.n.is_multiple_of(2)) {
            return Err(Error::Invalid {
                what: "linear shape",
                why: format!("{self:?}"),
            });
        }
        Ok((
            int("m", self.m)?,
            int("k", self.k)?,
            int("n", self.n)?,
            int("ldx", self.ldx)?,
            int("ldy", self.ldy)?,
            int("split", self.split())?,
        ))
    }

    /// Outputs a row of y gets: `n`, or `n / 2` with the GLU pairing.
    pub(crate) fn cols(&self) -> usize {
        if self.glu >= 0 { self.n / 2 } else { self.n }
    }

    /// Values of x the linear kernels read: `m` rows of `k`, `ldx` apart.
    pub(crate) fn x_extent(&self) -> usize {
        (self.m.max(1) - 1) * self.ldx + self.k
    }

    /// Values of y they write: `m` rows of [`LinearShape::cols`], `ldy` apart.
    pub(crate) fn y_extent(&self) -> usize {
        (self.m.max(1) - 1) * self.ldy + self.cols()
    }

    /// Warps per output column (in one block, summed in warp order): doubled while the launch
    /// has fewer than [`TARGET_WARPS`] warps and each warp keeps at least 256 values of a row
    /// (one 8-value unit per lane). Depends on (k, n) and the GLU pairing only.
    pub(super) fn split(&self) -> usize {
        // (gate, up) pairs must share a block: at least two columns per block.
        let most = if self.glu >= 0 { 4 } else { 8 };
        let mut split = 1;
        while split < most && self.n * split < TARGET_WARPS && self.k / (split * 2) >= 256 {
            split *= 2;
        }
        split
    }

    /// Rows of x one block computes (`GEMV_ROWS`, or 1 for the decode entries).
    pub(super) fn block_rows(&self) -> usize {
        if self.m == 1 { 1 } else { GEMV_ROWS }
    }

    /// Dynamic shared memory staging a block's rows of f32 activations (`stage_rows` in
    /// kernels/prelude.cuh) over `kp` columns, or 0 (the kernel then reads x from global
    /// memory, with the same results) when that exceeds [`STAGE_LIMIT`].
    pub(super) fn stage_f32(&self, kp: usize) -> u32 {
        stage_bytes(self.block_rows() * kp * 4)
    }

    pub(super) fn grid(&self) -> Result<(u32, u32, u32), Error> {
        Ok((
            grid_dim("gemv columns", self.n.div_ceil(GEMV_WARPS / self.split()))?,
            grid_dim("gemv rows", self.m.div_ceil(GEMV_ROWS))?,
            1,
        ))
    }
}

/// Bytes a weight value of a dense linear kernel `kind` (`gemv_f32`, `gemv_f16`, `gemv_bf16`)
/// takes.
pub(crate) fn weight_bytes(kind: &'static str) -> usize {
    if kind == "gemv_f32" { 4 } else { 2 }
}

/// Rows of x per block of the multi-row linear kernels (`GEMV_ROWS` in kernels/prelude.cuh).
pub(super) const GEMV_ROWS: usize = 4;
/// Warps per linear block (`GEMV_WARPS`).
pub(super) const GEMV_WARPS: usize = 8;
/// Warps per block of the one-row kernels (`DEC_WARPS` in kernels/prelude.cuh).
pub(super) const DEC_WARPS: usize = 4;
/// Adjacent columns one warp of those kernels computes (`DEC_COLS`).
pub(super) const DEC_COLS: usize = 2;
/// Warps a linear launch aims to have: about 23 per SM on an H200's 132 SMs, enough 16-byte
/// loads in flight to cover DRAM latency at full bandwidth.
pub(super) const TARGET_WARPS: usize = 3072;
/// Most dynamic shared memory a linear block stages activations in: under the 48 KiB a launch
/// gets without opting in, with room for the kernels' static reduction arrays.
pub(super) const STAGE_LIMIT: usize = 46 * 1024;

/// `bytes` of staged activations as a launch's dynamic shared memory, or 0 past [`STAGE_LIMIT`].
pub(super) fn stage_bytes(bytes: usize) -> u32 {
    if bytes <= STAGE_LIMIT {
        bytes as u32
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::LinearShape;

    fn split(n: usize, k: usize, glu: i32) -> usize {
        LinearShape::one_row(n, k, glu).split()
    }

    #[test]
    fn narrow_layers_split_their_rows_across_warps() {
        assert_eq!(split(1536, 8960, -1), 2); // Qwen2.5-1.5B down: 3072 warps
        assert_eq!(split(2048, 1536, -1), 2); // its qkv
        assert_eq!(split(896, 4864, -1), 4); // Qwen2.5-0.5B down
        assert_eq!(split(1152, 896, -1), 2); // at least 256 values per warp
        assert_eq!(split(17920, 1536, 0), 1); // wide enough already
        assert_eq!(split(64, 8960, -1), 8);
        assert_eq!(split(64, 8960, 0), 4); // GLU pairs must share a block
        assert_eq!(split(100, 100, -1), 1); // short rows
    }

    #[test]
    fn activations_are_staged_while_they_fit_the_default_shared_memory() {
        let s = |m, k| LinearShape {
            m,
            k,
            n: 64,
            ldx: k,
            ldy: 64,
            glu: -1,
        };
        assert_eq!(s(1, 8960).stage_f32(8960), 35_840);
        assert_eq!(s(1, 14336).stage_f32(14336), 0); // read from global memory instead
        assert_eq!(s(5, 1536).stage_f32(1536), 4 * 1536 * 4);
        assert_eq!(s(5, 4096).stage_f32(4096), 0);
        assert_eq!(s(1, 8960).stage_i8(32), 280 * 4 + 8960);
        assert_eq!(s(1, 100).stage_i8(16), 32 + 7 * 16); // 7 scales padded to 32 bytes
        assert!(super::super::int4::check_block(48).is_err());
    }

    #[test]
    fn the_rust_constants_match_the_kernel_prelude() {
        let prelude = crate::cuda::compile::PRELUDE;
        for (name, value) in [
            ("GEMV_ROWS", super::GEMV_ROWS),
            ("GEMV_WARPS", super::GEMV_WARPS),
            ("DEC_WARPS", super::DEC_WARPS),
            ("DEC_COLS", super::DEC_COLS),
        ] {
            let line = format!("#define {name} {value}\n");
            assert!(
                prelude.contains(&line),
                "{line:?} not in kernels/prelude.cuh"
            );
        }
    }
}
