//! Build script: compiles the hand-written ONNX schema subset into Rust types
//! with protox (pure-Rust parser, no `protoc`) and prost-build.

use std::error::Error;

fn main() -> Result<(), Box<dyn Error>> {
    let proto = "proto/onnx_subset.proto";
    println!("cargo:rerun-if-changed={proto}");
    println!("cargo:rerun-if-changed=build.rs");
    let fds = protox::compile([proto], ["proto"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
