//! What every generation on one ONNX Runtime decoder shares.

use crate::device::Device;
use crate::io::IoSpec;
use ort::session::Session;
use std::sync::Mutex;

/// What generations share: the session (ONNX Runtime's `Run` needs exclusive access through
/// the `ort` API, so it sits behind a mutex) and the resolved inputs and outputs.
pub(crate) struct Shared {
    pub session: Mutex<Session>,
    pub io: IoSpec,
    pub device: Device,
    /// The `gpu_graph_id` every run must carry (`-1` while `enable_cuda_graph` is on).
    pub graph_id: Option<&'static str>,
}
