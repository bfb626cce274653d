//! The element type of a dense weight or a prompt GEMM ([`GemmType`]) and the 16-bit copies
//! of activations that a producer kernel writes for the GEMM after it ([`HalfCopy`]): shared by
//! the kernels that write them (norms, the prompt attention's merge), the GEMMs that read them
//! (`blas.rs`) and the weights that choose them.

use crate::cuda::memory::DevPtr;
use crate::error::Error;

/// A dense weight's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GemmType {
    F32,
    F16,
    Bf16,
}

impl GemmType {
    /// The type of a dense layer's GEMV kernel (`Form::Dense`).
    pub fn of(kernel: &str) -> Option<GemmType> {
        match kernel {
            "gemv_f32" => Some(GemmType::F32),
            "gemv_f16" => Some(GemmType::F16),
            "gemv_bf16" => Some(GemmType::Bf16),
            _ => None,
        }
    }

    /// The type a MatMulNBits layer dequantises to for a prompt GEMM: its scales' type (what
    /// the ONNX Runtime CUDA EP computes in).
    pub fn of_scales(dtype: genai_frontend::WeightDType) -> GemmType {
        match dtype {
            genai_frontend::WeightDType::F32 => GemmType::F32,
            genai_frontend::WeightDType::F16 => GemmType::F16,
            genai_frontend::WeightDType::BF16 => GemmType::Bf16,
        }
    }

    /// Bytes of one value.
    pub fn size(self) -> usize {
        match self {
            GemmType::F32 => 4,
            GemmType::F16 | GemmType::Bf16 => 2,
        }
    }

    /// The kernel rounding x to this type (none: f32 x is read as it is).
    pub(crate) fn cast_kernel(self) -> Option<&'static str> {
        match self {
            GemmType::F32 => None,
            GemmType::F16 => Some("cast_rows_f16"),
            GemmType::Bf16 => Some("cast_rows_bf16"),
        }
    }
}

/// Values also held rounded to a 16-bit GEMM type, rows of the consumer's k values apart,
/// written by the kernel that produced them (a norm, the prompt attention's merge, a GEMM
/// epilogue): a prompt GEMM of type `ty` reads them instead of casting x itself. They live in
/// the cast scratch, so they hold until the next producer or cast writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HalfCopy {
    pub ptr: DevPtr,
    pub ty: GemmType,
    /// Values the allocation at `ptr` holds.
    pub len: usize,
}

impl HalfCopy {
    /// The kernels' arguments for an optional copy: its address and 1 for bf16, 0 for f16;
    /// (0, 0) for none.
    pub fn args(copy: Option<HalfCopy>) -> (DevPtr, i32) {
        copy.map_or((0, 0), |h| (h.ptr, i32::from(h.ty == GemmType::Bf16)))
    }

    /// Fails with [`Error::BadExtent`] when `copy` holds fewer than `needed` values (none
    /// passes).
    pub fn need_opt(
        copy: Option<HalfCopy>,
        kernel: &'static str,
        needed: usize,
    ) -> Result<(), Error> {
        match copy {
            Some(h) if h.len < needed => Err(Error::BadExtent {
                kernel,
                arg: "half",
                needed,
                given: h.len,
            }),
            _ => Ok(()),
        }
    }
}

/// The 16-bit type a value's half copy should have, given the GEMM type each of its consumers
/// would run (`None`: that consumer reads f32 x, or runs no GEMM): the one 16-bit type among
/// them, or none when no consumer casts or two would cast to different types (each then casts
/// for itself).
pub(crate) fn common_half(
    consumers: impl IntoIterator<Item = Option<GemmType>>,
) -> Option<GemmType> {
    let mut found = None;
    for ty in consumers.into_iter().flatten() {
        if ty == GemmType::F32 {
            continue;
        }
        match found {
            None => found = Some(ty),
            Some(t) if t != ty => return None,
            Some(_) => {}
        }
    }
    found
}

/// The half copies around one linear (`HalfCopy`): x's, written by the kernel before it
/// (`x`), and where its GEMM epilogue should write y's for the GEMM after it (`y`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Halves {
    pub x: Option<HalfCopy>,
    pub y: Option<HalfCopy>,
}
