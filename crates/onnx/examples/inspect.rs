//! Prints the report of an ONNX model (and, with `--weights`, every
//! initializer): `cargo run -p genai-onnx --example inspect -- MODEL.onnx`.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<_> = std::env::args_os().skip(1).collect();
    let Some(path) = args.iter().find(|a| *a != "--weights").map(PathBuf::from) else {
        return Err("usage: inspect [--weights] MODEL.onnx".into());
    };
    let model = genai_onnx::OnnxModel::load(&path)?;
    println!("{}", model.report());
    if args.iter().any(|a| a == "--weights") {
        for t in model.initializers() {
            let place = match t.external() {
                Some(e) => format!("{} @ {}", e.location.display(), e.offset),
                None => "inline".to_string(),
            };
            println!(
                "{}  {}  {:?}  {} bytes  {place}",
                t.name,
                t.dtype,
                t.dims,
                t.byte_len()?
            );
        }
    }
    Ok(())
}
