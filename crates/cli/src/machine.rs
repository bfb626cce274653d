//! Facts recorded with every benchmark: the commit, the machine, the model's precision, and the
//! process's peak resident memory.

use genai_config::Config;

/// The commit this binary was built from (recorded by build.rs), "unknown" outside git.
pub fn commit() -> String {
    env!("GENAI_BRIDGE_COMMIT").to_string()
}

/// CPU model and core count (and OS), e.g. "Intel Xeon … ×2 cores, linux".
pub fn description() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = cpu_model().unwrap_or_else(|| std::env::consts::ARCH.to_string());
    format!("{cpu}, {cores} cores, {}", std::env::consts::OS)
}

#[cfg(target_os = "linux")]
fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
}

#[cfg(not(target_os = "linux"))]
fn cpu_model() -> Option<String> {
    None
}

/// Peak resident set size of this process in MB, where the OS reports it.
#[cfg(target_os = "linux")]
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

#[cfg(not(target_os = "linux"))]
pub fn peak_rss_mb() -> Option<f64> {
    None
}

/// The weights' precision as the builder names it: int4 when MatMulNBits is used, else the
/// decoder's KV/logits float type as configured by the folder name conventions of the builder.
pub fn precision(config: &Config) -> String {
    match genai_onnx::OnnxModel::load(&config.decoder_path()) {
        Ok(model) => {
            let report = model.report();
            if report
                .op_histogram
                .iter()
                .any(|op| op.op_type == "MatMulNBits")
            {
                return "int4".into();
            }
            let largest = report.weights.iter().max_by_key(|w| w.bytes);
            match largest.map(|w| w.dtype.as_str()) {
                Some("float16") => "fp16".into(),
                Some("bfloat16") => "bf16".into(),
                Some("float") => "fp32".into(),
                Some(other) => other.to_string(),
                None => "unknown".into(),
            }
        }
        Err(_) => "unknown".into(),
    }
}
