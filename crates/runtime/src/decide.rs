//! Routing: gathers what the router needs (does the graph lift, is ONNX Runtime there, can the
//! native CUDA decoder run, which device does the config ask for) and asks it.

use crate::cuda::native_cuda_fact;
use crate::{Error, Settings, load_graph};
use genai_backend_ort::library;
use genai_config::Config;
use genai_engine::{DeviceKind, Route, RouteFacts, route};
use genai_frontend::DecoderPlan;
use genai_onnx::OnnxModel;

/// The routing decision with what it was based on.
pub struct Decision {
    pub route: Route,
    pub facts: RouteFacts,
    pub plan: Option<DecoderPlan>,
    pub model: OnnxModel,
}

/// The device genai_config.json's provider list asks for.
fn configured_device(config: &Config) -> Option<DeviceKind> {
    let providers = &config.model.decoder.session_options.provider_options;
    providers
        .iter()
        .any(|p| p.name == "cuda")
        .then_some(DeviceKind::Cuda)
}

/// Lifts the graph, probes ONNX Runtime and the native CUDA decoder, and routes the backend
/// the settings ask for onto `device` (else the configured one).
pub fn decide(
    config: &Config,
    settings: &Settings,
    device: Option<DeviceKind>,
) -> Result<Decision, Error> {
    let model = load_graph(config)?;
    let lifted = genai_frontend::lift(&model, config);
    let lift = match &lifted {
        Ok(plan) => Ok(format!(
            "the graph lifts to a {}-layer decoder plan",
            plan.layers.len()
        )),
        Err(why) => Err(format!("the graph does not lift: {why}")),
    };
    let ort = match library::ensure_loaded(&settings.ort_search) {
        Ok(loaded) => Ok(loaded.path.display().to_string()),
        Err(e) => Err(e.to_string()),
    };
    let facts = RouteFacts {
        lift: Some(lift),
        ort: Some(ort),
        native_cuda: Some(native_cuda_fact(lifted.as_ref().ok())),
        ort_cuda: Some(
            library::cuda_available(&settings.ort_search)
                .map(|()| "ONNX Runtime has the CUDA execution provider".into()),
        ),
        configured_device: configured_device(config),
    };
    let route = route(settings.backend, device, &facts)?;
    Ok(Decision {
        route,
        facts,
        plan: lifted.ok(),
        model,
    })
}
