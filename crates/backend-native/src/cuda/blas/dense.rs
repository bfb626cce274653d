//! Dense prompt linear layers through cuBLAS ([`Ops::dense`] picks the GEMM or the GEMV
//! kernel): x cast to the weight's 16-bit type unless a half copy holds it, the GEMM, and the
//! GEMV kernels' epilogue (`gemm_epilogue_f32`) where the layer has one.

use super::handle::{Blas, ColMajor, MIN_ROWS};
use crate::cuda::kernels::{DenseLinear, GemmType, HalfCopy, Halves, LinearShape, Ops};
use crate::cuda::launch::{cfg, int, launch};
use crate::cuda::memory::DevPtr;
use crate::cuda::span::{DevSpan, need_opt};
use crate::error::Error;

/// Blocks of an elementwise kernel over `total` values (256 threads a block, the kernels
/// stride past 4,096 blocks).
pub(crate) fn elementwise_blocks(total: usize) -> u32 {
    total.div_ceil(256).clamp(1, 4096) as u32
}

/// The handle a linear of `m` rows runs its GEMM on, if it does: the pass has one (`blas`),
/// `MIN_ROWS` rows or more, and for a layer dequantised first (`dequant`), a dequantisation
/// scratch.
pub(crate) fn gemm_blas(blas: Option<&Blas>, m: usize, dequant: bool) -> Option<&Blas> {
    blas.filter(|b| m >= MIN_ROWS && (!dequant || b.dequant.len > 0))
}

/// Where a producer of `m` rows of `k` values may also write them rounded to `ty` for the GEMMs
/// after it (the cast scratch of the pass's handle `blas`, where it holds them); none for f32,
/// no type or no GEMM.
pub(crate) fn half_copy(
    blas: Option<&Blas>,
    m: usize,
    k: usize,
    ty: Option<GemmType>,
) -> Option<HalfCopy> {
    let ty = ty.filter(|t| *t != GemmType::F32)?;
    let blas = gemm_blas(blas, m, false)?;
    (m * k <= blas.cast.len).then_some(HalfCopy {
        ptr: blas.cast.ptr,
        ty,
        len: blas.cast.len,
    })
}

/// x, the bias and y of a GEMM linear (`LinearShape`'s extents).
#[derive(Debug, Clone, Copy)]
pub(crate) struct GemmIo<'a> {
    pub x: DevSpan<'a, f32>,
    pub bias: Option<DevSpan<'a, f32>>,
    pub y: DevSpan<'a, f32>,
}

/// One GEMM epilogue (`gemm_epilogue_f32`): y (rows `ldy` apart) from the sums `[m, n]`, the
/// bias `[n]`, rounding to `act` or the GLU pairing `glu`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Epilogue<'a> {
    pub sums: DevSpan<'a, f32>,
    pub bias: Option<DevSpan<'a, f32>>,
    pub y: DevSpan<'a, f32>,
    pub ldy: usize,
    pub m: usize,
    pub n: usize,
    pub act: i32,
    pub glu: i32,
}

impl Ops<'_> {
    /// A dense linear layer: through cuBLAS for `MIN_ROWS` rows or more when the pass has a
    /// handle (`blas`), else the GEMV kernel `kernel`. Returns y's half copy if the GEMM wrote it.
    pub fn dense(
        &self,
        blas: Option<&Blas>,
        kernel: &'static str,
        d: &DenseLinear<'_>,
        s: LinearShape,
        act: i32,
        halves: Halves,
    ) -> Result<Option<HalfCopy>, Error> {
        match (gemm_blas(blas, s.m, false), GemmType::of(kernel)) {
            (Some(blas), Some(ty)) => self.gemm(blas, ty, d, s, act, halves),
            _ => self.gemv(kernel, d, s, act).map(|()| None),
        }
    }

    /// y = x W (+ bias) through cuBLAS, with the GEMV kernels' epilogue (`LinearShape::glu`).
    pub fn gemm(
        &self,
        blas: &Blas,
        ty: GemmType,
        d: &DenseLinear<'_>,
        s: LinearShape,
        act: i32,
        halves: Halves,
    ) -> Result<Option<HalfCopy>, Error> {
        // The GEMM reads the weight the GEMV kernel would over `s` (`gemm_with` checks the
        // rest).
        let w = d.w.need("cublasGemmEx", "w", s.n * s.k * ty.size())?;
        let io = GemmIo {
            x: d.x,
            bias: d.bias,
            y: d.y,
        };
        self.gemm_with(blas, ty, io, s, act, halves, |b, ldb, c, ldc| {
            blas.gemm(ty, ColMajor::of(s.m, s.k, s.n, ldb, ldc)?, (w, b, c))
        })
    }

    /// The frame of a GEMM linear: checks (`io` against `s`'s extents), x cast to `ty` when it is 16 bits (unless
    /// `halves.x` holds it so), the sums written by `sums(b, ldb, c, ldc)` (B = x as the GEMM
    /// reads it, C = y or the scratch), then the epilogue where the layer has one, which also
    /// writes `halves.y`. Returns y's half copy if it was written.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn gemm_with(
        &self,
        blas: &Blas,
        ty: GemmType,
        io: GemmIo<'_>,
        s: LinearShape,
        act: i32,
        halves: Halves,
        sums: impl FnOnce(DevPtr, usize, DevPtr, usize) -> Result<(), Error>,
    ) -> Result<Option<HalfCopy>, Error> {
        let LinearShape {
            m,
            k,
            n,
            ldx,
            ldy,
            glu,
        } = s;
        let cols = if glu >= 0 { n / 2 } else { n };
        let bad = |why: String| Error::Invalid {
            what: "GEMM linear",
            why,
        };
        if ldx < k || ldy < cols || (glu >= 0 && !n.is_multiple_of(2)) {
            return Err(bad(format!("{s:?}")));
        }
        if blas.stream.cu_stream() != self.stream.cu_stream() {
            return Err(bad("the cuBLAS handle issues on another stream".into()));
        }
        const WHAT: &str = "GEMM linear";
        let x = io.x.need(WHAT, "x", s.x_extent())?;
        let bias = need_opt(io.bias, WHAT, "bias", n)?;
        let y = io.y.need(WHAT, "y", s.y_extent())?;
        let (b, ldb) = match (ty.cast_kernel(), halves.x) {
            (None, _) => (x, ldx),
            (Some(_), Some(h)) if h.ty == ty => {
                if m * k > h.len {
                    return Err(bad(format!("{m} × {k} values exceed x's half copy")));
                }
                (h.ptr, k)
            }
            (Some(name), _) => {
                if m * k > blas.cast.len {
                    return Err(bad(format!("{m} × {k} values exceed the cast scratch")));
                }
                let (mi, ki, ldxi) = (int("m", m)?, int("k", k)?, int("ldx", ldx)?);
                let f = self.k.get(name)?;
                let c = cfg((elementwise_blocks(m * k), 1, 1), 256, 0);
                let out = blas.cast.ptr;
                launch!(self, f, c, &x, &ldxi, &out, &mi, &ki)?;
                (out, k)
            }
        };
        let epilogue = bias != 0 || act != 0 || glu >= 0;
        let (c, ldc) = if epilogue {
            if m * n > blas.out.len {
                return Err(bad(format!("{m} × {n} sums exceed the GEMM scratch")));
            }
            (blas.out.ptr, n)
        } else {
            (y, ldy)
        };
        sums(b, ldb, c, ldc)?;
        if !epilogue {
            return Ok(None);
        }
        let half = halves.y.filter(|h| m * cols <= h.len);
        let e = Epilogue {
            sums: blas.out.span(),
            bias: io.bias,
            y: io.y,
            ldy,
            m,
            n,
            act,
            glu,
        };
        self.gemm_epilogue(&e, half)?;
        Ok(half)
    }

    /// y (rows `ldy` apart) from GEMM sums `[m, n]`: `glu < 0`, `[m, n]` as `linear_store`
    /// (bias, rounding to the `act` precision); `glu >= 0`, `[m, n / 2]` act(gate) * up over
    /// the (gate, up) column pairs. With `half`, y is also written there rounded to its type
    /// (rows of y's values apart).
    pub fn gemm_epilogue(&self, e: &Epilogue<'_>, half: Option<HalfCopy>) -> Result<(), Error> {
        const K: &str = "gemm_epilogue_f32";
        let Epilogue {
            ldy,
            m,
            n,
            act,
            glu,
            ..
        } = *e;
        let cols = if glu >= 0 { n / 2 } else { n };
        if ldy < cols || (glu >= 0 && !n.is_multiple_of(2)) {
            return Err(Error::Invalid {
                what: "GEMM epilogue",
                why: format!("m {m}, n {n}, ldy {ldy}, glu {glu}"),
            });
        }
        // The kernel walks the m x cols outputs: sums [m, n], y rows ldy apart.
        let y_end = if m == 0 { 0 } else { (m - 1) * ldy + cols };
        let sums = e.sums.need(K, "sums", m * n)?;
        let bias = need_opt(e.bias, K, "bias", n)?;
        let y = e.y.need(K, "y", y_end)?;
        HalfCopy::need_opt(half, K, m * cols)?;
        let (mi, ni, ldyi) = (int("m", m)?, int("n", n)?, int("ldy", ldy)?);
        let f = self.k.get(K)?;
        let c = cfg((elementwise_blocks(m * cols), 1, 1), 256, 0);
        let (half, half_bf) = HalfCopy::args(half);
        launch!(
            self, f, c, &sums, &bias, &y, &ldyi, &mi, &ni, &act, &glu, &half, &half_bf
        )
    }
}
