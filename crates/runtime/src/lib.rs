//! Opening a model folder for generation: gathers what the router needs (does the graph lift,
//! is ONNX Runtime there, which device does the config ask for), routes, builds the chosen
//! decoder and, on request, verifies the native decoder against ONNX Runtime before using it.
//! Shared by the CLI and the C ABI.

pub mod ort_search;
mod verify;

pub use genai_backend_native::paging::VramBudget;

use genai_backend_native::{CpuDecoder, CpuOptions};
use genai_backend_ort::{Device, OrtDecoder, OrtOptions, library};
use genai_config::Config;
use genai_engine::{
    BackendKind, BackendRequest, Decoder, DeviceKind, NoRoute, Route, RouteFacts, route,
};
use genai_frontend::{DecoderPlan, Weight, WeightDType};
use genai_onnx::{DataType, OnnxModel};
use genai_parity::Precision;
use genai_tokenizer::{SpecialTokens, Tokenizer};

/// What the caller asks for.
#[derive(Debug, Clone)]
pub struct OpenOptions {
    pub backend: BackendRequest,
    pub device: Option<DeviceKind>,
    pub threads: Option<usize>,
    /// Run a short teacher-forced parity check of the native decoder against ONNX Runtime and
    /// fall back to ONNX Runtime when it is out of tolerance.
    pub verify: bool,
    /// `BYTES|PERCENT`: the device memory the native CUDA decoder may use, streaming the
    /// weights that do not fit. Overrides `GENAI_BRIDGE_VRAM_BUDGET` and the config's `cuda`
    /// provider option `vram_budget`.
    pub vram_budget: Option<String>,
    /// Positions of KV cache a VRAM budget plans room for (default: the config's max_length).
    pub planned_length: Option<usize>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            backend: BackendRequest::Auto,
            device: None,
            threads: None,
            verify: false,
            vram_budget: None,
            planned_length: None,
        }
    }
}

/// Environment variable: the VRAM budget when neither the caller nor the config gives one.
pub const VRAM_BUDGET_ENV: &str = "GENAI_BRIDGE_VRAM_BUDGET";

/// The VRAM budget in effect and where it came from: the caller's, else the environment's,
/// else the config's `cuda` provider option.
pub fn vram_budget(
    config: &Config,
    options: &OpenOptions,
) -> Result<Option<(VramBudget, String)>, Error> {
    let env = std::env::var(VRAM_BUDGET_ENV).ok();
    match pick_budget(options.vram_budget.as_deref(), env.as_deref(), config) {
        Some((text, source)) => {
            let budget = VramBudget::parse(text)?;
            Ok(Some((budget, format!("{text} from {source}"))))
        }
        None => Ok(None),
    }
}

/// The budget text that wins, with its source (empty values do not count).
fn pick_budget<'a>(
    caller: Option<&'a str>,
    env: Option<&'a str>,
    config: &'a Config,
) -> Option<(&'a str, &'static str)> {
    let given = |v: Option<&'a str>| v.filter(|v| !v.trim().is_empty());
    let from_config = config
        .model
        .decoder
        .session_options
        .provider_options
        .iter()
        .filter(|p| p.name == "cuda")
        .flat_map(|p| p.options.iter())
        .find(|(key, _)| key == genai_config::VRAM_BUDGET_OPTION)
        .map(|(_, value)| value.as_str());
    given(caller)
        .map(|v| (v, "the caller"))
        .or_else(|| given(env).map(|v| (v, VRAM_BUDGET_ENV)))
        .or_else(|| given(from_config).map(|v| (v, "genai_config.json")))
}

/// Everything that can stop a model from opening.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Onnx {
        path: String,
        source: genai_onnx::Error,
    },
    #[error(transparent)]
    NoRoute(#[from] NoRoute),
    #[error(transparent)]
    Ort(#[from] genai_backend_ort::Error),
    /// Not a `source`: the message already carries it, and error chains would print it twice.
    #[error("native decoder: {0}")]
    Native(genai_backend_native::Error),
}

impl From<genai_backend_native::Error> for Error {
    fn from(e: genai_backend_native::Error) -> Self {
        Error::Native(e)
    }
}

/// The routing decision with what it was based on.
pub struct Decision {
    pub route: Route,
    pub facts: RouteFacts,
    pub plan: Option<DecoderPlan>,
    pub model: OnnxModel,
}

/// An opened decoder and how it was chosen.
pub struct Opened {
    pub decoder: Box<dyn Decoder>,
    pub route: Route,
    pub plan: Option<DecoderPlan>,
    /// The element type the graph declares for its logits output (what ONNX Runtime GenAI
    /// hands out as the model's `logits`), whichever backend runs it; `None` when the graph
    /// does not declare it as a tensor.
    pub logits_type: Option<DataType>,
}

/// The weights' precision as the plan stores them: int4 when any linear is 4-bit (a builder
/// model may keep its lm_head, or other nodes, out of the quantization), else the lm_head's
/// element type.
pub fn precision_of(plan: &DecoderPlan) -> Precision {
    let any_int4 = plan
        .linears()
        .iter()
        .any(|linear| matches!(linear.weight, Weight::Int4(_)));
    match &plan.lm_head.weight {
        Weight::Dense { tensor, .. } if !any_int4 => match tensor.dtype {
            WeightDType::F32 => Precision::Fp32,
            WeightDType::F16 => Precision::Fp16,
            WeightDType::BF16 => Precision::Bf16,
        },
        _ => Precision::Int4,
    }
}

/// The device genai_config.json's provider list asks for.
fn configured_device(config: &Config) -> Option<DeviceKind> {
    let providers = &config.model.decoder.session_options.provider_options;
    providers
        .iter()
        .any(|p| p.name == "cuda")
        .then_some(DeviceKind::Cuda)
}

/// Whether the native CUDA decoder can run this plan here, or why not.
#[cfg(feature = "cuda")]
fn native_cuda_fact(plan: Option<&DecoderPlan>) -> Result<String, String> {
    let device = genai_backend_native::cuda::probe()?;
    if let Some(plan) = plan {
        genai_backend_native::cuda::check_plan(plan)
            .map_err(|why| format!("the native CUDA kernels cannot run this plan: {why}"))?;
    }
    Ok(device)
}

/// Whether the native CUDA decoder can run this plan here, or why not.
#[cfg(not(feature = "cuda"))]
fn native_cuda_fact(_plan: Option<&DecoderPlan>) -> Result<String, String> {
    Err("the native CUDA backend is not compiled into this build".into())
}

/// The native CUDA decoder for the plan, within the VRAM budget when one is given.
#[cfg(feature = "cuda")]
fn open_native_cuda(
    model: &OnnxModel,
    plan: &DecoderPlan,
    budget: Option<VramBudget>,
    planned_length: usize,
) -> Result<Box<dyn Decoder>, Error> {
    let options = genai_backend_native::CudaOptions {
        vram_budget: budget,
        planned_length: Some(planned_length),
        ..genai_backend_native::CudaOptions::default()
    };
    Ok(Box::new(genai_backend_native::CudaDecoder::load(
        model, plan, &options,
    )?))
}

/// The native CUDA decoder for the plan (not compiled in: the router never picks it).
#[cfg(not(feature = "cuda"))]
fn open_native_cuda(
    _model: &OnnxModel,
    _plan: &DecoderPlan,
    _budget: Option<VramBudget>,
    _planned_length: usize,
) -> Result<Box<dyn Decoder>, Error> {
    Err(Error::Native(genai_backend_native::Error::Invalid {
        what: "device",
        why: "the native CUDA backend is not compiled into this build".into(),
    }))
}

/// Lifts the graph, probes ONNX Runtime and routes.
pub fn decide(config: &Config, options: &OpenOptions) -> Result<Decision, Error> {
    let path = config.decoder_path();
    let model = OnnxModel::load(&path).map_err(|source| Error::Onnx {
        path: path.display().to_string(),
        source,
    })?;
    let lifted = genai_frontend::lift(&model, config);
    let lift = match &lifted {
        Ok(plan) => Ok(format!(
            "the graph lifts to a {}-layer decoder plan",
            plan.layers.len()
        )),
        Err(why) => Err(format!("the graph does not lift: {why}")),
    };
    let search = ort_search::library_search();
    let ort = match library::ensure_loaded(&search) {
        Ok(loaded) => Ok(loaded.path.display().to_string()),
        Err(e) => Err(e.to_string()),
    };
    let facts = RouteFacts {
        lift: Some(lift),
        ort: Some(ort),
        native_cuda: Some(native_cuda_fact(lifted.as_ref().ok())),
        ort_cuda: Some(
            library::cuda_available(&search)
                .map(|()| "ONNX Runtime has the CUDA execution provider".into()),
        ),
        configured_device: configured_device(config),
    };
    let route = route(options.backend, options.device, &facts)?;
    Ok(Decision {
        route,
        facts,
        plan: lifted.ok(),
        model,
    })
}

/// Routes and builds the decoder.
pub fn open(config: &Config, options: &OpenOptions) -> Result<Opened, Error> {
    let Decision {
        mut route,
        facts,
        plan,
        model,
    } = decide(config, options)?;
    let logits_type = model.output_type(&config.model.decoder.outputs.logits);
    let ort_options = OrtOptions {
        device: Some(match route.device {
            DeviceKind::Cpu => Device::Cpu,
            DeviceKind::Cuda => Device::Cuda,
        }),
        threads: options.threads,
    };
    let budget = vram_budget(config, options)?;
    let native_cuda = route.backend == BackendKind::Native && route.device == DeviceKind::Cuda;
    if let Some((_, source)) = &budget {
        route.reasons.push(if native_cuda {
            format!("VRAM budget {source}")
        } else {
            format!("VRAM budget {source} ignored: it applies to the native CUDA decoder")
        });
    }
    let decoder: Box<dyn Decoder> = match (route.backend, &plan) {
        (BackendKind::Native, Some(plan)) if route.device == DeviceKind::Cuda => {
            let planned_length = options.planned_length.unwrap_or(config.search.max_length);
            let cuda = open_native_cuda(&model, plan, budget.map(|b| b.0), planned_length)?;
            // What the decoder says about itself (kernels, weights, residency) joins the route.
            route.reasons.extend(cuda.info().reasons.iter().cloned());
            if options.verify {
                // The reference runs ONNX Runtime on the CPU: the oracle for CUDA too.
                let reference = OrtOptions {
                    device: Some(Device::Cpu),
                    threads: options.threads,
                };
                match verify::against_ort(config, cuda.as_ref(), plan, &facts, &reference) {
                    verify::Outcome::Passed(note) | verify::Outcome::Skipped(note) => {
                        route.reasons.push(note)
                    }
                    verify::Outcome::Failed(note, cpu_reference) => {
                        route.reasons.push(note);
                        route.backend = BackendKind::Ort;
                        let decoder: Box<dyn Decoder> = if matches!(facts.ort_cuda, Some(Ok(_))) {
                            Box::new(OrtDecoder::load(config, &ort_options)?)
                        } else {
                            route.device = DeviceKind::Cpu;
                            cpu_reference
                        };
                        return Ok(Opened {
                            decoder,
                            route,
                            plan: Some(plan.clone()),
                            logits_type,
                        });
                    }
                }
            }
            cuda
        }
        (BackendKind::Native, Some(plan)) => {
            let loaded = CpuDecoder::load(
                &model,
                plan,
                &CpuOptions {
                    threads: options.threads,
                },
            );
            let native = match loaded {
                Ok(native) => native,
                // Under auto routing a native decoder that cannot load (e.g. its prepared
                // weights would not fit in memory) hands over to ONNX Runtime, which maps the
                // weights instead of converting them.
                Err(e) if options.backend == BackendRequest::Auto && facts_ort_ok(&facts) => {
                    route.reasons.push(format!(
                        "the native decoder could not load ({e}): running on ONNX Runtime"
                    ));
                    route.backend = BackendKind::Ort;
                    return Ok(Opened {
                        decoder: Box::new(OrtDecoder::load(config, &ort_options)?),
                        route,
                        plan: Some(plan.clone()),
                        logits_type,
                    });
                }
                Err(e) => return Err(e.into()),
            };
            if options.verify {
                match verify::against_ort(config, &native, plan, &facts, &ort_options) {
                    verify::Outcome::Passed(note) => route.reasons.push(note),
                    verify::Outcome::Skipped(note) => route.reasons.push(note),
                    verify::Outcome::Failed(note, ort) => {
                        route.reasons.push(note);
                        route.backend = BackendKind::Ort;
                        return Ok(Opened {
                            decoder: ort,
                            route,
                            plan: Some(plan.clone()),
                            logits_type,
                        });
                    }
                }
            }
            Box::new(native)
        }
        _ => Box::new(OrtDecoder::load(config, &ort_options)?),
    };
    Ok(Opened {
        decoder,
        route,
        plan,
        logits_type,
    })
}

/// The model's tokenizer: the files in `model.tokenizer_dir` (else the model folder), with the
/// special token ids genai_config.json gives.
pub fn load_tokenizer(config: &Config) -> Result<Tokenizer, genai_tokenizer::Error> {
    let model = &config.model;
    let special = SpecialTokens {
        bos: model.bos_token_id,
        eos: model.eos_token_ids.clone(),
        pad: model.pad_token_id,
    };
    Tokenizer::from_dir(&config.tokenizer_dir(), special)
}

/// Whether the probe found a usable ONNX Runtime.
fn facts_ort_ok(facts: &RouteFacts) -> bool {
    matches!(facts.ort, Some(Ok(_)))
}

/// Opens ONNX Runtime on `device` for what the routed decoder cannot do (the C ABI uses it for
/// batches a native backend cannot run).
pub fn open_ort(
    config: &Config,
    device: DeviceKind,
    threads: Option<usize>,
) -> Result<Box<dyn Decoder>, Error> {
    let options = OrtOptions {
        device: Some(match device {
            DeviceKind::Cpu => Device::Cpu,
            DeviceKind::Cuda => Device::Cuda,
        }),
        threads,
    };
    library::ensure_loaded(&ort_search::library_search())?;
    Ok(Box::new(OrtDecoder::load(config, &options)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture_dir(name: &str) -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../models/fixtures")
            .join(name)
    }

    fn config_with_budget(value: Option<&str>) -> Config {
        let mut config = Config::load(&fixture_dir("qwen2-fp32-cpu")).expect("fixture config");
        if let Some(v) = value {
            config.model.decoder.session_options.provider_options = vec![genai_config::Provider {
                name: "cuda".into(),
                options: vec![
                    ("enable_cuda_graph".into(), "1".into()),
                    (genai_config::VRAM_BUDGET_OPTION.into(), v.into()),
                ],
                device_filtering: None,
            }];
        }
        config
    }

    #[test]
    fn the_caller_beats_the_environment_which_beats_the_config() {
        let config = config_with_budget(Some("8GB"));
        assert_eq!(
            pick_budget(Some("50%"), Some("4GB"), &config),
            Some(("50%", "the caller"))
        );
        assert_eq!(
            pick_budget(None, Some("4GB"), &config),
            Some(("4GB", VRAM_BUDGET_ENV))
        );
        assert_eq!(
            pick_budget(None, Some("  "), &config),
            Some(("8GB", "genai_config.json"))
        );
        assert_eq!(pick_budget(None, None, &config_with_budget(None)), None);
    }

    #[test]
    fn a_malformed_budget_is_an_error_naming_it() {
        let config = config_with_budget(Some("lots"));
        let options = OpenOptions::default();
        // The environment may hold a budget on a developer's machine: give the caller's value.
        let err = vram_budget(
            &config,
            &OpenOptions {
                vram_budget: Some("lots".into()),
                ..options
            },
        )
        .expect_err("lots is not a budget");
        assert!(err.to_string().contains("\"lots\""), "{err}");
        let ok = vram_budget(
            &config,
            &OpenOptions {
                vram_budget: Some("25%".into()),
                ..OpenOptions::default()
            },
        )
        .expect("25% parses");
        assert!(matches!(
            ok,
            Some((VramBudget::Percent(p), _)) if p == 25.0
        ));
    }

    fn fixture(name: &str) -> (Config, OnnxModel) {
        let config = Config::load(&fixture_dir(name)).expect("fixture config");
        let model = OnnxModel::load(&config.decoder_path()).expect("fixture graph");
        (config, model)
    }

    #[test]
    fn a_plan_with_any_four_bit_linear_is_int4_whatever_its_lm_head() {
        let (config, model) = fixture("qwen2-int4-cpu");
        let mut plan = genai_frontend::lift(&model, &config).expect("int4 fixture lifts");
        assert_eq!(precision_of(&plan), Precision::Int4);
        let (config, model) = fixture("qwen2-fp32-cpu");
        let dense = genai_frontend::lift(&model, &config).expect("fp32 fixture lifts");
        assert_eq!(precision_of(&dense), Precision::Fp32);
        // The builder can keep the lm_head out of the quantization: the layers stay 4-bit.
        plan.lm_head = dense.lm_head.clone();
        assert!(matches!(plan.lm_head.weight, Weight::Dense { .. }));
        assert_eq!(precision_of(&plan), Precision::Int4);
    }

    #[test]
    fn the_logits_type_is_the_one_the_graph_declares() {
        for (name, want) in [
            ("qwen2-fp32-cpu", DataType::Float),
            ("qwen2-int4-cpu", DataType::Float),
            ("llama-fp16-cuda", DataType::Float16),
            // The builder's bf16 models declare float32 logits: the weights' precision does
            // not say it.
            ("llama-bf16-cuda", DataType::Float),
        ] {
            let (config, model) = fixture(name);
            let logits = &config.model.decoder.outputs.logits;
            assert_eq!(model.output_type(logits), Some(want), "{name}");
        }
        let (_, model) = fixture("qwen2-fp32-cpu");
        assert_eq!(model.output_type("no_such_output"), None);
        // A graph input is not an output.
        assert_eq!(model.output_type("input_ids"), None);
    }
}
