//! What the GPU tests share: the fixture folders and a fixture lifted to its plan.
#![allow(dead_code)]

use genai_config::Config;
use genai_frontend::DecoderPlan;
use genai_onnx::OnnxModel;
use std::path::{Path, PathBuf};

/// Every fixture folder (`GENAI_FIXTURES`, else `models/fixtures`), sorted.
pub fn fixtures() -> Vec<PathBuf> {
    let root = std::env::var_os("GENAI_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models/fixtures"));
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("genai_config.json").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// A fixture's folder name, for messages.
pub fn name(dir: &Path) -> String {
    dir.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// A fixture's config, model and plan.
pub struct Loaded {
    pub config: Config,
    pub model: OnnxModel,
    pub plan: DecoderPlan,
}

pub fn load(dir: &Path) -> Loaded {
    let config = Config::load(dir).expect("config");
    let model = OnnxModel::load(&config.decoder_path()).expect("model");
    let plan = genai_frontend::lift(&model, &config).expect("the fixture lifts");
    Loaded {
        config,
        model,
        plan,
    }
}

/// The native decoders' tuning from this test process's environment (tests may read it; the
/// library never does): the switches the GPU scripts run the tests under, and the kernel cache.
pub fn tuning() -> genai_backend_native::NativeTuning {
    genai_backend_native::NativeTuning::from_lookup(&|name| std::env::var(name).ok())
        .unwrap_or_else(|e| panic!("the tuning variables: {e}"))
}

/// CUDA options under [`tuning`].
#[cfg(feature = "cuda")]
pub fn cuda_options() -> genai_backend_native::CudaOptions {
    genai_backend_native::CudaOptions {
        tuning: tuning().cuda,
        ..Default::default()
    }
}

/// [`cuda_options`] with `change` made to its tuning.
#[cfg(feature = "cuda")]
pub fn cuda_with(
    change: impl FnOnce(&mut genai_backend_native::CudaTuning),
) -> genai_backend_native::CudaOptions {
    let mut options = cuda_options();
    change(&mut options.tuning);
    options
}
