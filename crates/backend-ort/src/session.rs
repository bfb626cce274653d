//! Loading a model folder's decoder into an ONNX Runtime session with the execution provider the
//! config or the user asks for.

use crate::Error;
use crate::cuda_graph;
use crate::device::Device;
use crate::io::IoSpec;
use crate::library;
use crate::shared::Shared;
use crate::state::OrtState;
use genai_config::{Config, Provider};
use genai_engine::{BackendInfo, DecodeBackend, Decoder, StartOptions};
use ort::ep::{self, ArbitrarilyConfigurableExecutionProvider, ExecutionProvider};
use ort::session::Session;
use ort::session::builder::GraphOptimizationLevel;
use std::sync::{Arc, Mutex};

/// What the caller chooses beyond the config.
#[derive(Debug, Clone, Default)]
pub struct OrtOptions {
    /// Overrides the config's providers: `Some(Cpu)` clears them, `Some(Cuda)` asks for CUDA.
    pub device: Option<Device>,
    /// Intra-op threads; the config's `intra_op_num_threads` when `None`.
    pub threads: Option<usize>,
}

/// A decoder session shared by every generation on this model.
pub struct OrtDecoder {
    pub(crate) inner: Arc<Shared>,
    info: BackendInfo,
}

impl OrtDecoder {
    /// Creates the session for `config`'s decoder in the process's ONNX Runtime: the library
    /// [`library::ensure_loaded`] loaded, else (none loaded yet) the first found in the fixed
    /// places of the search order. A caller that honours `ORT_DYLIB_PATH`/`ORT_LIB_PATH`, as
    /// genai-runtime does, loads the library with them before.
    pub fn load(config: &Config, options: &OrtOptions) -> Result<Self, Error> {
        let loaded = library::ensure_loaded(&library::LibrarySearch::default())?;
        let decoder = &config.model.decoder;
        let mut reasons = vec![format!("ONNX Runtime from {}", loaded.path.display())];
        let providers = chosen_providers(&decoder.session_options.provider_options, options.device);
        let device = if providers.iter().any(|p| p.name == "cuda") {
            Device::Cuda
        } else {
            Device::Cpu
        };
        for p in &decoder.session_options.provider_options {
            if !providers.iter().any(|q| q.name == p.name) {
                reasons.push(format!(
                    "provider {:?} from genai_config.json not used (device {} requested)",
                    p.name,
                    device.name()
                ));
            }
        }

        let context = "creating the session";
        let mut builder =
            Session::builder(&loaded.environment).map_err(|e| Error::ort(context, e))?;
        builder = builder
            .with_optimization_level(GraphOptimizationLevel::All)
            .map_err(|e| Error::ort(context, e))?;
        let threads = options.threads.or(decoder
            .session_options
            .intra_op_num_threads
            .and_then(|t| usize::try_from(t).ok())
            .filter(|&t| t > 0));
        if let Some(threads) = threads {
            builder = builder
                .with_intra_threads(threads)
                .map_err(|e| Error::ort(context, e))?;
            reasons.push(format!("{threads} intra-op threads"));
        }
        if let Some(threads) = decoder
            .session_options
            .inter_op_num_threads
            .and_then(|t| usize::try_from(t).ok())
            .filter(|&t| t > 0)
        {
            builder = builder
                .with_inter_threads(threads)
                .map_err(|e| Error::ort(context, e))?;
        }
        for (key, value) in &decoder.session_options.config_entries {
            builder = builder
                .with_config_entry(key, value)
                .map_err(|e| Error::ort(format!("session option {key}"), e))?;
        }
        for provider in &providers {
            builder = register_provider(builder, provider)?;
            reasons.push(format!("{} execution provider", provider.name));
        }
        let path = config.decoder_path();
        let session = builder
            .commit_from_file(&path)
            .map_err(|e| Error::ort(format!("loading {}", path.display()), e))?;
        let io = IoSpec::resolve(&session, config)?;
        let graph_id = cuda_graph::uncaptured_graph_id(device, &providers);
        if graph_id.is_some() {
            reasons.push("enable_cuda_graph: every run uncaptured (gpu_graph_id = -1)".into());
        }
        let info = BackendInfo {
            backend: "ort".into(),
            device: device.name().into(),
            reasons,
        };
        Ok(OrtDecoder {
            inner: Arc::new(Shared {
                session: Mutex::new(session),
                io,
                device,
                graph_id,
            }),
            info,
        })
    }
}

impl OrtDecoder {
    /// Puts a routing reason first in the backend's description.
    pub fn add_reason(&mut self, reason: impl Into<String>) {
        self.info.reasons.insert(0, reason.into());
    }
}

/// The providers to register: the config's list, overridden by an explicit device.
fn chosen_providers(configured: &[Provider], device: Option<Device>) -> Vec<Provider> {
    match device {
        None => configured.to_vec(),
        Some(Device::Cpu) => Vec::new(),
        Some(Device::Cuda) => match configured.iter().find(|p| p.name == "cuda") {
            Some(p) => vec![p.clone()],
            None => vec![Provider {
                name: "cuda".into(),
                options: Vec::new(),
                device_filtering: None,
            }],
        },
    }
}

fn register_provider(
    builder: ort::session::builder::SessionBuilder,
    provider: &Provider,
) -> Result<ort::session::builder::SessionBuilder, Error> {
    let fail = |message: String| Error::Provider {
        provider: provider.name.clone(),
        message,
    };
    match provider.name.as_str() {
        "cuda" => {
            let mut cuda = ep::CUDA::default();
            if !ep::CUDA::is_available().unwrap_or(false) {
                return Err(fail(
                    "this ONNX Runtime library has no CUDA execution provider; use the GPU build \
                     (onnxruntime-gpu 1.31.1 with CUDA 13 and cuDNN 9) or --device cpu"
                        .into(),
                ));
            }
            // genai-bridge's own options are not the execution provider's.
            let options = provider
                .options
                .iter()
                .filter(|(key, _)| key != genai_config::VRAM_BUDGET_OPTION);
            for (key, value) in options {
                cuda = cuda.with_arbitrary_config(key, value);
            }
            builder
                .with_execution_providers([cuda.build().error_on_failure()])
                .map_err(|e| fail(format!("registration failed: {e}")))
        }
        "cpu" => Ok(builder),
        other => Err(fail(format!(
            "{other:?} is not supported by genai-bridge's ONNX Runtime backend (cpu and cuda are)"
        ))),
    }
}

impl Decoder for OrtDecoder {
    fn start(&self, options: &StartOptions) -> genai_engine::Result<Box<dyn DecodeBackend>> {
        Ok(Box::new(OrtState::new(Arc::clone(&self.inner), options)?))
    }

    fn info(&self) -> &BackendInfo {
        &self.info
    }

    fn vocab_size(&self) -> usize {
        self.inner.io.vocab_size
    }
}
