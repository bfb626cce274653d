//! `genai-bridge route`: which backend and device would run a model folder, and every reason.

use crate::args::RouteArgs;
use crate::load::{backend_request, device_kind, settings_json};
use anyhow::Result;
use genai_runtime::{OpenOptions, Settings};
use serde_json::json;

pub fn run(args: &RouteArgs) -> Result<()> {
    let config = genai_runtime::load_config(&args.model_dir)?;
    let options = OpenOptions {
        backend: args.backend.map(backend_request),
        device: args.device.map(device_kind),
        ..OpenOptions::default()
    };
    let settings = Settings::from_env(&config, &options)?;
    let decision = genai_runtime::decide(&config, &settings, options.device)?;
    let fact = |f: &Option<Result<String, String>>| match f {
        Some(Ok(ok)) => json!({ "ok": true, "detail": ok }),
        Some(Err(why)) => json!({ "ok": false, "detail": why }),
        None => json!(null),
    };
    if args.json {
        let output = json!({
            "model_dir": args.model_dir.display().to_string(),
            "backend": decision.route.backend,
            "device": decision.route.device,
            "reasons": decision.route.reasons,
            "facts": {
                "lift": fact(&decision.facts.lift),
                "onnxruntime": fact(&decision.facts.ort),
                "native_cuda": fact(&decision.facts.native_cuda),
                "onnxruntime_cuda": fact(&decision.facts.ort_cuda),
                "configured_device": decision.facts.configured_device,
            },
            "plan": decision.plan.as_ref().map(|p| p.summary()),
            "settings": settings_json(&settings),
        });
        println!("{}", serde_json::to_string_pretty(&output)?);
        return Ok(());
    }
    println!(
        "{}: {:?} on {}",
        args.model_dir.display(),
        decision.route.backend,
        decision.route.device.name()
    );
    for reason in &decision.route.reasons {
        println!("  - {reason}");
    }
    let show = |name: &str, f: &Option<Result<String, String>>| match f {
        Some(Ok(ok)) => println!("  {name}: yes ({ok})"),
        Some(Err(why)) => println!("  {name}: no ({why})"),
        None => {}
    };
    println!("facts:");
    show("liftable", &decision.facts.lift);
    show("ONNX Runtime", &decision.facts.ort);
    show("native CUDA", &decision.facts.native_cuda);
    show("ONNX Runtime CUDA", &decision.facts.ort_cuda);
    println!("settings:");
    for (name, value) in settings.describe() {
        println!("  {name}: {value}");
    }
    Ok(())
}
