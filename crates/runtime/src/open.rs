//! Building the decoder the route picked, with the fallbacks to ONNX Runtime: a native decoder
//! that cannot load under auto routing, and one that `verify` finds out of tolerance.

use crate::cuda::open_native_cuda;
use crate::decide::{Decision, decide};
use crate::verify::{self, Outcome};
use crate::{Error, OpenOptions, Settings};
use genai_backend_native::{CpuDecoder, CpuOptions};
use genai_backend_ort::library::{self, LibrarySearch};
use genai_backend_ort::{Device, OrtDecoder, OrtOptions};
use genai_config::Config;
use genai_engine::{BackendKind, BackendRequest, Decoder, DeviceKind, Route, RouteFacts};
use genai_frontend::DecoderPlan;
use genai_onnx::DataType;

/// An opened decoder and how it was chosen.
pub(crate) struct Opened {
    pub decoder: Box<dyn Decoder>,
    pub route: Route,
    pub plan: Option<DecoderPlan>,
    /// The element type the graph declares for its logits output; `None` when the graph does
    /// not declare it as a tensor.
    pub logits_type: Option<DataType>,
}

/// ONNX Runtime's options for a device.
pub(crate) fn ort_options(device: DeviceKind, threads: Option<usize>) -> OrtOptions {
    OrtOptions {
        device: Some(match device {
            DeviceKind::Cpu => Device::Cpu,
            DeviceKind::Cuda => Device::Cuda,
        }),
        threads,
    }
}

/// Opens ONNX Runtime on `device`.
pub(crate) fn open_ort(
    config: &Config,
    device: DeviceKind,
    threads: Option<usize>,
    search: &LibrarySearch,
) -> Result<Box<dyn Decoder>, Error> {
    library::ensure_loaded(search)?;
    Ok(Box::new(OrtDecoder::load(
        config,
        &ort_options(device, threads),
    )?))
}

/// Routes and builds the decoder (`options.threads` already resolved).
pub(crate) fn open(
    config: &Config,
    options: &OpenOptions,
    settings: &Settings,
) -> Result<Opened, Error> {
    let Decision {
        mut route,
        facts,
        plan,
        model,
    } = decide(config, settings, options.device)?;
    let logits_type = model.output_type(&config.model.decoder.outputs.logits);
    let native_cuda = route.backend == BackendKind::Native && route.device == DeviceKind::Cuda;
    if let Some(budget) = &settings.vram_budget {
        let source = format!("{} from {}", budget.text, budget.source);
        route.reasons.push(if native_cuda {
            format!("VRAM budget {source}")
        } else {
            format!("VRAM budget {source} ignored: it applies to the native CUDA decoder")
        });
    }
    let opened = |decoder, route, plan: Option<DecoderPlan>| Opened {
        decoder,
        route,
        plan,
        logits_type,
    };
    let Some(lifted) = plan
        .as_ref()
        .filter(|_| route.backend == BackendKind::Native)
    else {
        let decoder = open_ort(config, route.device, options.threads, &settings.ort_search)?;
        return Ok(opened(decoder, route, plan));
    };
    let native = if route.device == DeviceKind::Cuda {
        let planned_length = options.planned_length.unwrap_or(config.search.max_length);
        let budget = settings.vram_budget.as_ref().map(|b| b.budget);
        let tuning = &settings.native.cuda;
        let cuda = open_native_cuda(&model, lifted, budget, planned_length, tuning)?;
        // What the decoder says about itself (kernels, weights, residency) joins the route.
        route.reasons.extend(cuda.info().reasons.iter().cloned());
        cuda
    } else {
        let cpu_options = CpuOptions {
            threads: options.threads,
            tuning: settings.native.cpu.clone(),
        };
        match CpuDecoder::load(&model, lifted, &cpu_options) {
            Ok(native) => Box::new(native),
            // Under auto routing a native decoder that cannot load (e.g. its prepared weights
            // would not fit in memory) hands over to ONNX Runtime, which maps the weights
            // instead of converting them.
            Err(e) if settings.backend == BackendRequest::Auto && ort_ok(&facts) => {
                route.reasons.push(format!(
                    "the native decoder could not load ({e}): running on ONNX Runtime"
                ));
                route.backend = BackendKind::Ort;
                let decoder =
                    open_ort(config, route.device, options.threads, &settings.ort_search)?;
                return Ok(opened(decoder, route, plan));
            }
            Err(e) => return Err(e.into()),
        }
    };
    if !options.verify {
        return Ok(opened(native, route, plan));
    }
    // The reference runs ONNX Runtime on the CPU: the oracle for CUDA too.
    let reference = ort_options(DeviceKind::Cpu, options.threads);
    match verify::against_ort(config, native.as_ref(), lifted, &facts, &reference) {
        Outcome::Passed(note) | Outcome::Skipped(note) => {
            route.reasons.push(note);
            Ok(opened(native, route, plan))
        }
        Outcome::Failed(note, cpu_reference) => {
            route.reasons.push(note);
            route.backend = BackendKind::Ort;
            // On CUDA, ONNX Runtime's CUDA provider when it has one; else the CPU reference.
            let decoder = match route.device {
                DeviceKind::Cuda if ort_cuda_ok(&facts) => open_ort(
                    config,
                    DeviceKind::Cuda,
                    options.threads,
                    &settings.ort_search,
                )?,
                _ => {
                    route.device = DeviceKind::Cpu;
                    cpu_reference
                }
            };
            Ok(opened(decoder, route, plan))
        }
    }
}

/// Whether the probe found a usable ONNX Runtime.
fn ort_ok(facts: &RouteFacts) -> bool {
    matches!(facts.ort, Some(Ok(_)))
}

/// Whether the loaded ONNX Runtime has the CUDA execution provider.
fn ort_cuda_ok(facts: &RouteFacts) -> bool {
    matches!(facts.ort_cuda, Some(Ok(_)))
}
