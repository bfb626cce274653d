//! The native decoders' tuning read from this process's environment, once, where the runtime
//! opens them: the one place below the CLI and the C ABI that reads their `GENAI_BRIDGE_*`
//! variables (the library crates take the typed values; `tests/no_env_reads.rs` checks it).

use genai_backend_native::NativeTuning;

/// The native decoders' tuning from the environment: every variable of
/// `genai_backend_native::settings::VARIABLES` (and `XDG_CACHE_HOME` / `HOME` for the kernel
/// cache's default folder). A malformed value is an error naming the variable and what it
/// accepts; a value that is not Unicode is passed on as it reads, so it is refused the same way.
pub fn native_tuning() -> Result<NativeTuning, genai_backend_native::Error> {
    NativeTuning::from_lookup(&|name| {
        std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
    })
}
