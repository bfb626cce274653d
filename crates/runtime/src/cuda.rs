//! The native CUDA decoder as the router sees it: whether it can run a plan here, and building
//! it; without the `cuda` feature, the reason it is absent.

use crate::Error;
use genai_backend_native::CudaTuning;
use genai_backend_native::paging::VramBudget;
use genai_engine::Decoder;
use genai_frontend::DecoderPlan;
use genai_onnx::OnnxModel;

/// Whether the native CUDA decoder can run this plan here, or why not.
#[cfg(feature = "cuda")]
pub(crate) fn native_cuda_fact(plan: Option<&DecoderPlan>) -> Result<String, String> {
    let device = genai_backend_native::cuda::probe()?;
    if let Some(plan) = plan {
        genai_backend_native::cuda::check_plan(plan)
            .map_err(|why| format!("the native CUDA kernels cannot run this plan: {why}"))?;
    }
    Ok(device)
}

/// Whether the native CUDA decoder can run this plan here, or why not.
#[cfg(not(feature = "cuda"))]
pub(crate) fn native_cuda_fact(_plan: Option<&DecoderPlan>) -> Result<String, String> {
    Err("the native CUDA backend is not compiled into this build".into())
}

/// The native CUDA decoder for the plan, within the VRAM budget when one is given.
#[cfg(feature = "cuda")]
pub(crate) fn open_native_cuda(
    model: &OnnxModel,
    plan: &DecoderPlan,
    budget: Option<VramBudget>,
    planned_length: usize,
    tuning: &CudaTuning,
) -> Result<Box<dyn Decoder>, Error> {
    let options = genai_backend_native::CudaOptions {
        vram_budget: budget,
        planned_length: Some(planned_length),
        tuning: tuning.clone(),
        ..genai_backend_native::CudaOptions::default()
    };
    Ok(Box::new(genai_backend_native::CudaDecoder::load(
        model, plan, &options,
    )?))
}

/// The native CUDA decoder for the plan (not compiled in: the router never picks it).
#[cfg(not(feature = "cuda"))]
pub(crate) fn open_native_cuda(
    _model: &OnnxModel,
    _plan: &DecoderPlan,
    _budget: Option<VramBudget>,
    _planned_length: usize,
    _tuning: &CudaTuning,
) -> Result<Box<dyn Decoder>, Error> {
    Err(Error::Native(genai_backend_native::Error::Invalid {
        what: "device",
        why: "the native CUDA backend is not compiled into this build".into(),
    }))
}
