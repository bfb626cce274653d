//! The CUDA execution provider's `enable_cuda_graph` option, which this backend never lets
//! capture: with the option on, every run carries the run option `gpu_graph_id` = `-1` (neither
//! capture nor replay), because the EP would otherwise capture a run whose host-fed inputs live
//! at addresses that change from run to run, and replay stale data.

use crate::Error;
use crate::device::Device;
use genai_config::Provider;
use ort::session::RunOptions;

/// The CUDA provider option that turns capture on.
const ENABLE_OPTION: &str = "enable_cuda_graph";
/// The run option naming the graph a run captures or replays; `-1` means neither.
const GRAPH_ID_OPTION: &str = "gpu_graph_id";
/// `gpu_graph_id` for runs that must not be captured or replayed.
const NO_GRAPH: &str = "-1";

/// Whether the providers registered for the session ask the CUDA EP to capture graphs.
fn requested(providers: &[Provider]) -> bool {
    providers
        .iter()
        .filter(|p| p.name == "cuda")
        .filter_map(|p| p.option(ENABLE_OPTION))
        .any(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true"))
}

/// The `gpu_graph_id` every run of a session on `device` with `providers` must carry: `-1`
/// when the CUDA EP was registered with `enable_cuda_graph` on, none otherwise.
pub(crate) fn uncaptured_graph_id(device: Device, providers: &[Provider]) -> Option<&'static str> {
    (device == Device::Cuda && requested(providers)).then_some(NO_GRAPH)
}

/// Run options carrying `gpu_graph_id` = `id`.
pub(crate) fn run_options(id: &str) -> Result<RunOptions, Error> {
    let mut options = RunOptions::new().map_err(|e| Error::ort("run options", e))?;
    options
        .set(GRAPH_ID_OPTION, id)
        .map_err(|e| Error::ort(format!("run option {GRAPH_ID_OPTION}={id}"), e))?;
    Ok(options)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider(name: &str, options: &[(&str, &str)]) -> Provider {
        Provider {
            name: name.into(),
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            device_filtering: None,
        }
    }

    #[test]
    fn requested_reads_the_cuda_option() {
        let graph = |name: &str, value: &str| [provider(name, &[("enable_cuda_graph", value)])];
        assert!(requested(&graph("cuda", "1")));
        assert!(requested(&graph("cuda", "True")));
        assert!(!requested(&graph("cuda", "0")));
        assert!(!requested(&[provider("cuda", &[])]));
        assert!(!requested(&graph("DML", "1")));
    }

    #[test]
    fn enable_cuda_graph_makes_every_run_uncaptured() {
        let on = [provider("cuda", &[("enable_cuda_graph", "1")])];
        let off = [provider("cuda", &[("enable_cuda_graph", "0")])];
        // Every run then carries gpu_graph_id = -1, so the EP never captures on its own.
        assert_eq!(uncaptured_graph_id(Device::Cuda, &on), Some("-1"));
        assert_eq!(uncaptured_graph_id(Device::Cuda, &off), None);
        assert_eq!(uncaptured_graph_id(Device::Cuda, &[]), None);
        // A session on the CPU registers no CUDA EP: no run option.
        assert_eq!(uncaptured_graph_id(Device::Cpu, &on), None);
    }
}
