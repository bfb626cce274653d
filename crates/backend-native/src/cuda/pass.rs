//! One forward pass's launch context ([`Pass`]): the kernels bound to the stream ([`Ops`]) with
//! what the layers above the kernels add to a pass, the pager of streamed weights and the
//! cuBLAS handle of prompt GEMMs. The weights and the generation's state launch through it.

use crate::cuda::blas::{self, Blas};
use crate::cuda::kernels::{GemmType, HalfCopy, Ops};
use crate::cuda::pager::PagerPass;
use crate::error::Error;

/// The kernels of a pass, with the pager of the pass when weights are streamed and the cuBLAS
/// handle when prompts' dense layers run as GEMMs (`blas.rs`). Derefs to its [`Ops`].
pub(crate) struct Pass<'a> {
    pub ops: Ops<'a>,
    pub pager: Option<&'a PagerPass<'a>>,
    pub blas: Option<&'a Blas>,
}

impl<'a> std::ops::Deref for Pass<'a> {
    type Target = Ops<'a>;

    fn deref(&self) -> &Ops<'a> {
        &self.ops
    }
}

impl Pass<'_> {
    fn pager(&self, j: usize) -> Result<&PagerPass<'_>, Error> {
        self.pager.ok_or(Error::Invalid {
            what: "pager",
            why: format!("streamed weight {j} used in a pass without the pager"),
        })
    }

    /// Before the kernels that read streamed weight `j`: wait for its copy.
    pub fn acquire(&self, j: usize) -> Result<(), Error> {
        self.pager(j)?.acquire(j)
    }

    /// After the kernels that read streamed weight `j`: release its slot.
    pub fn release(&self, j: usize) -> Result<(), Error> {
        self.pager(j)?.release(j)
    }

    /// The handle a linear of `m` rows runs its GEMM on in this pass, if it does
    /// ([`blas::gemm_blas`]).
    pub fn gemm_blas(&self, m: usize, dequant: bool) -> Option<&Blas> {
        blas::gemm_blas(self.blas, m, dequant)
    }

    /// Where a producer of `m` rows of `k` values may also write them rounded to `ty` for the
    /// GEMMs after it in this pass ([`blas::half_copy`]).
    pub fn half_copy(&self, m: usize, k: usize, ty: Option<GemmType>) -> Option<HalfCopy> {
        blas::half_copy(self.blas, m, k, ty)
    }
}
