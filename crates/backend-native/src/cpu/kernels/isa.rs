//! Which SIMD instruction set the kernels use: detected once at run time, capped process-wide by
//! the CPU decoder's typed setting (`CpuTuning::isa_cap`, set at each load), overridable for
//! tests.
//!
//! Every kernel has a portable path and x86-64 paths; all paths of one kernel perform the same
//! IEEE operations in the same order, so they give bitwise identical results (the tests check it).
//! Portable element-wise kernels are compiled several times through [`dispatch`], once per
//! instruction set, and auto-vectorised; the linear layers use hand-written intrinsics.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// An instruction-set level, from the portable baseline up. Each level implies the ones below.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Isa {
    /// Portable Rust (auto-vectorised for the compile target only).
    Scalar,
    /// x86-64 AVX2 + FMA + F16C.
    Avx2,
    /// x86-64 AVX-512 F/BW/VL (plus AVX2, FMA, F16C).
    Avx512,
    /// AVX-512 with VNNI (`vpdpbusd`).
    Avx512Vnni,
}

/// The process-wide cap on the level (`Isa as u8`; the highest: no cap).
static CAP: AtomicU8 = AtomicU8::new(Isa::Avx512Vnni as u8);

impl Isa {
    /// All levels, lowest first.
    pub const ALL: [Isa; 4] = [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Avx512Vnni];

    /// Whether this CPU can run kernels of this level.
    pub fn is_supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            let avx2 = || {
                is_x86_feature_detected!("avx2")
                    && is_x86_feature_detected!("fma")
                    && is_x86_feature_detected!("f16c")
            };
            let avx512 = || {
                avx2()
                    && is_x86_feature_detected!("avx512f")
                    && is_x86_feature_detected!("avx512bw")
                    && is_x86_feature_detected!("avx512vl")
            };
            match self {
                Isa::Scalar => true,
                Isa::Avx2 => avx2(),
                Isa::Avx512 => avx512(),
                Isa::Avx512Vnni => avx512() && is_x86_feature_detected!("avx512vnni"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            self == Isa::Scalar
        }
    }

    /// The levels this CPU supports, lowest first.
    pub fn available() -> Vec<Isa> {
        Isa::ALL.into_iter().filter(|i| i.is_supported()).collect()
    }

    /// The level the kernels use: the best supported one, at most the cap ([`Isa::set_cap`]).
    pub fn best() -> Isa {
        static DETECTED: OnceLock<Isa> = OnceLock::new();
        let detected =
            *DETECTED.get_or_init(|| Isa::available().into_iter().max().unwrap_or(Isa::Scalar));
        let cap = Isa::ALL
            .into_iter()
            .find(|&i| i as u8 == CAP.load(Ordering::Relaxed))
            .unwrap_or(Isa::Avx512Vnni);
        // The supported levels are a prefix of `ALL` (each implies the ones below).
        detected.min(cap)
    }

    /// Caps [`Isa::best`] for the whole process (`None`: no cap): the CPU decoder sets it from
    /// `CpuTuning::isa_cap` at each load, so the last load's cap holds for every decoder. Every
    /// level gives the same bits; a cap only moves time.
    pub fn set_cap(cap: Option<Isa>) {
        CAP.store(cap.unwrap_or(Isa::Avx512Vnni) as u8, Ordering::Relaxed);
    }

    /// The level's short name, as `GENAI_BRIDGE_CPU_ISA` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Avx512Vnni => "avx512vnni",
        }
    }

    /// Parses a name as [`Isa::name`] writes it.
    pub fn from_name(name: &str) -> Option<Isa> {
        Isa::ALL
            .into_iter()
            .find(|i| i.name().eq_ignore_ascii_case(name))
    }
}

/// A kernel body that [`dispatch`] compiles once per instruction set. `run` must be
/// `#[inline(always)]` so that it is compiled inside each target-feature wrapper.
pub(crate) trait Body {
    type Out;
    fn run(self) -> Self::Out;
}

/// `isa` if this CPU supports it, else the portable level (so a wrong level is slow, never UB).
pub(crate) fn checked(isa: Isa) -> Isa {
    if isa.is_supported() { isa } else { Isa::Scalar }
}

/// Runs `body` compiled for `isa` (the portable build when `isa` is not supported).
pub(crate) fn dispatch<B: Body>(isa: Isa, body: B) -> B::Out {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
        fn v512<B: Body>(body: B) -> B::Out {
            body.run()
        }
        #[target_feature(enable = "avx2,fma,f16c")]
        fn v256<B: Body>(body: B) -> B::Out {
            body.run()
        }
        match checked(isa) {
            // SAFETY: `checked` returned this level only after `is_supported` detected the
            // AVX-512 F/BW/VL, AVX2, FMA and F16C features at run time.
            Isa::Avx512 | Isa::Avx512Vnni => return unsafe { v512(body) },
            // SAFETY: as above, AVX2, FMA and F16C were detected at run time.
            Isa::Avx2 => return unsafe { v256(body) },
            Isa::Scalar => {}
        }
    }
    let _ = isa;
    body.run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_best_is_supported() {
        for isa in Isa::ALL {
            assert_eq!(Isa::from_name(isa.name()), Some(isa));
        }
        assert!(Isa::best().is_supported());
        assert_eq!(Isa::available()[0], Isa::Scalar);
    }
}
