//! Gives the shared library the soname the official bindings link against
//! (`libonnxruntime-genai.so`), so a copy under that name is found and loaded as the original.

fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" || os.ends_with("bsd") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libonnxruntime-genai.so");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
