//! Kernel sources (`kernels/*.cu`, embedded) and their run-time compilation with NVRTC to a
//! cubin for the device's architecture, cached on disk under a key of source hash, target
//! architecture, options and NVRTC version. Compilation happens when a decoder loads, never
//! inside a decode step.

use crate::error::Error;
use crate::settings::{CudaTuning, NvrtcDefine};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys};
use sha2::{Digest, Sha256};
use std::ffi::{CStr, CString};
use std::path::PathBuf;

/// One kernel family: a file of `kernels/` and the `extern "C"` symbols it defines.
#[derive(Debug, Clone, Copy)]
pub struct Source {
    /// File stem in `kernels/`.
    pub family: &'static str,
    pub code: &'static str,
    pub symbols: &'static [&'static str],
}

/// The family whose file stem in `kernels/` is `name`.
pub fn family(name: &str) -> Option<&'static Source> {
    SOURCES.iter().find(|s| s.family == name)
}

/// Helpers prepended to every family.
pub const PRELUDE: &str = include_str!("../../../../kernels/prelude.cuh");

/// Every kernel family.
pub const SOURCES: &[Source] = &[
    Source {
        family: "embedding",
        code: include_str!("../../../../kernels/embedding.cu"),
        symbols: &["embedding_f32"],
    },
    Source {
        family: "norm",
        code: include_str!("../../../../kernels/norm.cu"),
        symbols: &["skip_norm_f32", "skip_norm_half_f32"],
    },
    Source {
        family: "rotary",
        code: include_str!("../../../../kernels/rotary.cu"),
        symbols: &["rotary_append_f32"],
    },
    Source {
        family: "attention",
        code: include_str!("../../../../kernels/attention.cu"),
        symbols: &[
            "attention_f32",
            "attention_tiled_f32",
            "attention_merge_f32",
        ],
    },
    Source {
        family: "attention_mma",
        code: include_str!("../../../../kernels/attention_mma.cu"),
        symbols: &[
            "attention_mma_f16_64",
            "attention_mma_f16_128",
            "attention_mma_f16_256",
            "attention_mma_bf16_64",
            "attention_mma_bf16_128",
            "attention_mma_bf16_256",
        ],
    },
    Source {
        family: "decode_attention",
        code: include_str!("../../../../kernels/decode_attention.cu"),
        symbols: &[
            "attention_decode_f32",
            "attention_decode_kv_f16",
            "attention_decode_kv_bf16",
        ],
    },
    Source {
        family: "activation",
        code: include_str!("../../../../kernels/activation.cu"),
        symbols: &["gated_f32", "activate_f32"],
    },
    Source {
        family: "gemv",
        code: include_str!("../../../../kernels/gemv.cu"),
        symbols: &[
            "gemv_f32",
            "gemv_f16",
            "gemv_bf16",
            "gemv_decode_f32",
            "gemv_decode_f16",
            "gemv_decode_bf16",
            "gemv_decode_pipe_f32",
            "gemv_decode_pipe_f16",
            "gemv_decode_pipe_bf16",
        ],
    },
    Source {
        family: "gemv_shared",
        code: include_str!("../../../../kernels/gemv_shared.cu"),
        symbols: &[
            "gemv_decode_shared_f32",
            "gemv_decode_shared_f16",
            "gemv_decode_shared_bf16",
        ],
    },
    Source {
        family: "int4",
        code: include_str!("../../../../kernels/int4.cu"),
        symbols: &["gemv_int4_f32", "quantize_blocks_f32", "gemv_int4_i8"],
    },
    Source {
        family: "int4_decode",
        code: include_str!("../../../../kernels/int4_decode.cu"),
        symbols: &["gemv_decode_int4_f32", "gemv_decode_int4_i8"],
    },
    Source {
        family: "int4_mma",
        code: include_str!("../../../../kernels/int4_mma.cu"),
        symbols: &[
            "gemv_decode_int4_mma",
            "gemv_decode_int4_mma_s16",
            "gemv_decode_int4_mma_wide",
            "gemv_decode_int4_mma_s16_wide",
        ],
    },
    Source {
        family: "blas",
        code: include_str!("../../../../kernels/blas.cu"),
        symbols: &[
            "cast_rows_f16",
            "cast_rows_bf16",
            "gemm_epilogue_f32",
            "dequant_int4_f32",
            "dequant_int4_f16",
            "dequant_int4_bf16",
        ],
    },
    Source {
        family: "int4_skinny",
        code: include_str!("../../../../kernels/int4_skinny.cu"),
        symbols: &[
            "gemm_int4_skinny_f16",
            "gemm_int4_skinny_bf16",
            "gemm_int4_skinny2_f16",
            "gemm_int4_skinny2_bf16",
            "skinny_sum_f32",
        ],
    },
    Source {
        family: "sampling",
        code: include_str!("../../../../kernels/sampling.cu"),
        symbols: &[
            "argmax_partial_f32",
            "argmax_final_f32",
            "logits_process_f32",
            "sample_f32",
        ],
    },
];

/// NVRTC options besides the architecture.
const OPTIONS: &[&str] = &["--std=c++17", "-lineinfo"];

/// Why NVRTC cannot be used here, if it cannot.
pub fn nvrtc_available() -> Result<(), String> {
    // SAFETY: only tries to dlopen the library names cudarc would use; nothing is called.
    if unsafe { nvrtc_sys::is_culib_present() } {
        Ok(())
    } else {
        Err("the NVRTC library (libnvrtc.so.13) was not found on the library path".into())
    }
}

/// The NVRTC version, e.g. (13, 0).
pub fn nvrtc_version() -> Result<(i32, i32), String> {
    nvrtc_available()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: the library is present (checked above) and both pointers are valid for writes.
    let status = unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
    status
        .result()
        .map_err(|e| format!("nvrtcVersion: {e:?}"))?;
    Ok((major, minor))
}

/// The family's full source as NVRTC sees it.
pub fn full_source(source: &Source) -> String {
    format!(
        "{PRELUDE}\n#line 1 \"{}.cu\"\n{}",
        source.family, source.code
    )
}

/// What a load compiles with besides the sources: the tuning's NVRTC definitions (they enter
/// the cache key like every option) and where the cubins are cached (none: every load
/// compiles).
#[derive(Debug, Clone, Default)]
pub struct Build {
    pub defines: Vec<NvrtcDefine>,
    pub cache: Option<PathBuf>,
}

impl Build {
    /// The build `tuning` asks for.
    pub fn of(tuning: &CudaTuning) -> Build {
        Build {
            defines: tuning.nvrtc_defines.clone(),
            cache: tuning.kernel_cache.clone(),
        }
    }
}

fn options(arch: &str, defines: &[NvrtcDefine]) -> Vec<String> {
    let mut all = vec![format!("--gpu-architecture={arch}")];
    all.extend(OPTIONS.iter().map(|s| s.to_string()));
    all.extend(defines.iter().map(NvrtcDefine::option));
    all
}

/// Compiles one family to a cubin for `arch` (e.g. `sm_90`) with the preprocessor definitions
/// `defines`, with no cache.
pub fn compile(source: &Source, arch: &str, defines: &[NvrtcDefine]) -> Result<Vec<u8>, Error> {
    let fail = |message: String, log: String| Error::Nvrtc {
        family: source.family,
        arch: arch.to_string(),
        message,
        log,
    };
    nvrtc_available().map_err(|m| fail(m, String::new()))?;
    let code = CString::new(full_source(source))
        .map_err(|_| fail("the source contains a NUL byte".into(), String::new()))?;
    let name = CString::new(format!("{}.cu", source.family))
        .map_err(|_| fail("bad family name".into(), String::new()))?;
    let program = nvrtc::create_program(&code, Some(&name))
        .map_err(|e| fail(format!("nvrtcCreateProgram: {e:?}"), String::new()))?;
    let program = Program(program);
    let opts = options(arch, defines);
    // SAFETY: `program` is a live program handle owned by `Program`; the options are valid
    // NUL-free strings (cudarc turns them into C strings for the call).
    let compiled = unsafe { nvrtc::compile_program(program.0, &opts) };
    let log = program.log();
    if let Err(e) = compiled {
        return Err(fail(format!("nvrtcCompileProgram: {e:?}"), log));
    }
    let mut size = 0usize;
    // SAFETY: the program compiled; `size` is valid for writes.
    let status = unsafe { nvrtc_sys::nvrtcGetCUBINSize(program.0, &mut size) };
    status
        .result()
        .map_err(|e| fail(format!("nvrtcGetCUBINSize: {e:?}"), log.clone()))?;
    let mut cubin = vec![0u8; size];
    // SAFETY: `cubin` has exactly the `size` bytes NVRTC reported for this program's cubin.
    let status = unsafe { nvrtc_sys::nvrtcGetCUBIN(program.0, cubin.as_mut_ptr().cast()) };
    status
        .result()
        .map_err(|e| fail(format!("nvrtcGetCUBIN: {e:?}"), log))?;
    Ok(cubin)
}

/// An NVRTC program, destroyed on drop.
struct Program(nvrtc_sys::nvrtcProgram);

impl Program {
    fn log(&self) -> String {
        // SAFETY: `self.0` is a live program handle.
        match unsafe { nvrtc::get_program_log(self.0) } {
            Ok(raw) if !raw.is_empty() => {
                // SAFETY: NVRTC's log is NUL-terminated and `raw` holds all of it.
                unsafe { CStr::from_ptr(raw.as_ptr()) }
                    .to_string_lossy()
                    .into_owned()
            }
            _ => String::new(),
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the handle is live and destroyed exactly once, here.
        let _ = unsafe { nvrtc::destroy_program(self.0) };
    }
}

/// The cache key of a family for `arch` compiled with `defines`.
pub fn cache_key(
    source: &Source,
    arch: &str,
    nvrtc: (i32, i32),
    defines: &[NvrtcDefine],
) -> String {
    let mut hash = Sha256::new();
    hash.update(full_source(source).as_bytes());
    for option in options(arch, defines) {
        hash.update(b"\0");
        hash.update(option.as_bytes());
    }
    hash.update(format!("\0nvrtc {}.{}", nvrtc.0, nvrtc.1).as_bytes());
    let digest = hash.finalize();
    let hex: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
    format!("{}-{arch}-{hex}.cubin", source.family)
}

/// How a family's cubin was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Cache,
    Compiled,
}

/// The family's cubin for `arch` under `build`: from its disk cache, else compiled and stored
/// there (a cache that cannot be written only costs the next load a compile; no cache: always
/// compiled).
pub fn cubin(source: &Source, arch: &str, build: &Build) -> Result<(Vec<u8>, Origin), Error> {
    let version = nvrtc_version().map_err(|message| Error::Nvrtc {
        family: source.family,
        arch: arch.to_string(),
        message,
        log: String::new(),
    })?;
    let key = cache_key(source, arch, version, &build.defines);
    let path = build.cache.as_ref().map(|d| d.join(&key));
    if let Some(bytes) = path.as_ref().and_then(|p| std::fs::read(p).ok())
        && !bytes.is_empty()
    {
        return Ok((bytes, Origin::Cache));
    }
    let bytes = compile(source, arch, &build.defines)?;
    store(source, arch, &bytes, build);
    Ok((bytes, Origin::Compiled))
}

/// Writes a family's cubin to `build`'s cache, if any (write then rename, so readers never see
/// a partial file); a cache that cannot be written only costs the next load a compile.
pub fn store(source: &Source, arch: &str, bytes: &[u8], build: &Build) {
    let Some(dir) = &build.cache else { return };
    let Ok(version) = nvrtc_version() else { return };
    let path = dir.join(cache_key(source, arch, version, &build.defines));
    if std::fs::create_dir_all(dir).is_ok() {
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        if std::fs::write(&tmp, bytes).is_ok() && std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_symbol_is_defined_in_its_family() {
        for source in SOURCES {
            for symbol in source.symbols {
                let decl = format!(" {symbol}(");
                assert!(
                    source.code.contains(&decl),
                    "{symbol} not in {}.cu",
                    source.family
                );
            }
        }
    }

    #[test]
    fn definitions_become_options_and_enter_the_key() {
        let define = |name: &str, value: &str| NvrtcDefine {
            name: name.into(),
            value: value.into(),
        };
        let opts = options("sm_90", &[define("W_EVICT", "0"), define("X_1", "2")]);
        assert!(opts.ends_with(&["-DW_EVICT=0".to_string(), "-DX_1=2".to_string()]));
        let s = &SOURCES[0];
        let plain = cache_key(s, "sm_90", (13, 0), &[]);
        assert_ne!(
            plain,
            cache_key(s, "sm_90", (13, 0), &[define("W_EVICT", "0")])
        );
    }

    #[test]
    fn the_key_depends_on_arch_and_version() {
        let s = &SOURCES[0];
        let key = |arch, version| cache_key(s, arch, version, &[]);
        let a = key("sm_90", (13, 0));
        assert_ne!(a, key("sm_80", (13, 0)));
        assert_ne!(a, key("sm_90", (13, 1)));
        assert_eq!(a, key("sm_90", (13, 0)));
    }

    /// The text between the `{` that opens the body of the function named `name` and its
    /// matching `}`.
    fn body<'a>(code: &'a str, name: &str) -> Option<&'a str> {
        let at = code.find(&format!(" {name}("))?;
        let open = at + code[at..].find('{')?;
        let mut depth = 0;
        for (i, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(&code[open + 1..open + i]);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// Whether `code` calls pdl_enter or pdl_wait itself or through the `*_body` / `*_walk`
    /// functions of `family` it calls (`depth` levels down).
    fn waits(family: &str, code: &str, depth: usize) -> bool {
        if code.contains("pdl_enter();") || code.contains("pdl_wait();") {
            return true;
        }
        depth > 0
            && code
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .filter(|w| w.ends_with("_body") || w.ends_with("_walk"))
                .any(|callee| body(family, callee).is_some_and(|b| waits(family, b, depth - 1)))
    }

    /// Kernels are launched as programmatic dependent launches on sm_90: each must wait for the
    /// kernel before it (pdl_enter or pdl_wait, itself or in the `*_body` / `*_walk` it calls)
    /// or it could read activations that are not written yet.
    #[test]
    fn every_kernel_waits_for_the_kernel_before_it() {
        for source in SOURCES {
            for symbol in source.symbols {
                let own = body(source.code, symbol).unwrap_or_else(|| panic!("{symbol}: no body"));
                assert!(
                    waits(source.code, own, 3),
                    "{symbol} ({}.cu) never calls pdl_enter/pdl_wait",
                    source.family
                );
            }
        }
    }

    #[test]
    fn the_body_finder_fails_on_a_kernel_without_the_wait() {
        let code = "extern \"C\" __global__ void k(int* x) { if (x) { x[0] = 1; } }";
        let b = body(code, "k").expect("body");
        assert!(b.contains("x[0] = 1;") && !b.contains("pdl_wait"));
        assert!(!waits(code, b, 3));
    }

    #[test]
    fn a_wait_two_calls_down_counts_and_a_missing_one_does_not() {
        let code = "void w_walk(int a) { pdl_wait(); } void k_body(int a) { w_walk(a); } \
                    void k(int a) { k_body(a); } void n_body(int a) { a++; } \
                    void n(int a) { n_body(a); }";
        let k = body(code, "k").expect("k");
        assert!(waits(code, k, 3));
        assert!(!waits(code, k, 1));
        let n = body(code, "n").expect("n");
        assert!(!waits(code, n, 3));
    }
}
