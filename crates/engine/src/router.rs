//! The router: given what the user asked for and what this machine and model allow, pick the
//! backend and device, and say why. Pure logic, so every rule is tested without a model.

use serde::Serialize;

/// Which decoder the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendRequest {
    /// The native decoder when it can run the model, ONNX Runtime otherwise.
    Auto,
    Ort,
    Native,
}

/// A device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceKind {
    Cpu,
    Cuda,
}

impl DeviceKind {
    /// "cpu" or "cuda".
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Cpu => "cpu",
            DeviceKind::Cuda => "cuda",
        }
    }
}

/// A chosen backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Ort,
    Native,
}

/// What the router knows about this model and machine.
#[derive(Debug, Clone, Default)]
pub struct RouteFacts {
    /// `Ok` when the front end lifted the graph; otherwise the node and reason it could not.
    pub lift: Option<Result<String, String>>,
    /// `Ok(path)` when an ONNX Runtime library loaded; otherwise why not.
    pub ort: Option<Result<String, String>>,
    /// `Ok` when the native CUDA backend is compiled in and found a device; otherwise why not.
    pub native_cuda: Option<Result<String, String>>,
    /// `Ok` when the loaded ONNX Runtime has the CUDA execution provider; otherwise why not.
    pub ort_cuda: Option<Result<String, String>>,
    /// The device genai_config.json's provider_options ask for.
    pub configured_device: Option<DeviceKind>,
}

/// The decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    pub backend: BackendKind,
    pub device: DeviceKind,
    pub reasons: Vec<String>,
}

/// Why no backend can run the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no backend can run this model: {}", reasons.join("; "))]
pub struct NoRoute {
    pub reasons: Vec<String>,
}

fn explain(fact: &Option<Result<String, String>>, what: &str) -> Result<String, String> {
    fact.clone()
        .unwrap_or_else(|| Err(format!("{what} was not checked")))
}

/// Picks the backend and device.
pub fn route(
    backend: BackendRequest,
    device: Option<DeviceKind>,
    facts: &RouteFacts,
) -> Result<Route, NoRoute> {
    let mut reasons = Vec::new();
    let device = match (device, facts.configured_device) {
        (Some(d), _) => {
            reasons.push(format!("device {} requested", d.name()));
            d
        }
        (None, Some(DeviceKind::Cuda))
            if !matches!(facts.native_cuda, Some(Ok(_)))
                && !matches!(facts.ort_cuda, Some(Ok(_))) =>
        {
            reasons.push(
                "genai_config.json asks for cuda, but neither the native CUDA backend nor ONNX \
                 Runtime's CUDA execution provider is available here: running on cpu"
                    .into(),
            );
            DeviceKind::Cpu
        }
        (None, Some(d)) => {
            reasons.push(format!(
                "device {} from genai_config.json provider_options",
                d.name()
            ));
            d
        }
        (None, None) => DeviceKind::Cpu,
    };
    let lift = explain(&facts.lift, "lifting");
    let ort = explain(&facts.ort, "ONNX Runtime");
    let native_device = match device {
        DeviceKind::Cpu => Ok("native CPU backend".to_string()),
        DeviceKind::Cuda => explain(&facts.native_cuda, "native CUDA"),
    };
    let native = lift
        .clone()
        .and_then(|plan| native_device.clone().map(|d| format!("{d}: {plan}")));
    match backend {
        BackendRequest::Native => match native {
            Ok(why) => {
                reasons.push(format!("native requested; {why}"));
                Ok(Route {
                    backend: BackendKind::Native,
                    device,
                    reasons,
                })
            }
            Err(why) => {
                reasons.push(format!("native requested but unavailable: {why}"));
                Err(NoRoute { reasons })
            }
        },
        BackendRequest::Ort => match ort {
            Ok(path) => {
                reasons.push(format!("ort requested; ONNX Runtime from {path}"));
                Ok(Route {
                    backend: BackendKind::Ort,
                    device,
                    reasons,
                })
            }
            Err(why) => {
                reasons.push(format!("ort requested but unavailable: {why}"));
                Err(NoRoute { reasons })
            }
        },
        BackendRequest::Auto => match (native, ort) {
            (Ok(why), _) => {
                reasons.push(format!(
                    "auto: the native decoder can run this model ({why})"
                ));
                Ok(Route {
                    backend: BackendKind::Native,
                    device,
                    reasons,
                })
            }
            (Err(native_why), Ok(path)) => {
                reasons.push(format!("auto: native decoder not used: {native_why}"));
                reasons.push(format!("auto: ONNX Runtime from {path}"));
                Ok(Route {
                    backend: BackendKind::Ort,
                    device,
                    reasons,
                })
            }
            (Err(native_why), Err(ort_why)) => {
                reasons.push(format!("native decoder unavailable: {native_why}"));
                reasons.push(format!("ONNX Runtime unavailable: {ort_why}"));
                Err(NoRoute { reasons })
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(lift: Result<&str, &str>, ort: Result<&str, &str>) -> RouteFacts {
        let own = |r: Result<&str, &str>| Some(r.map(String::from).map_err(String::from));
        RouteFacts {
            lift: own(lift),
            ort: own(ort),
            native_cuda: own(Err("not compiled in")),
            ort_cuda: own(Ok("CUDA EP")),
            configured_device: None,
        }
    }

    #[test]
    fn auto_prefers_native_when_the_plan_lifts() {
        let route = route(
            BackendRequest::Auto,
            None,
            &facts(Ok("llama plan"), Ok("/lib/ort.so")),
        )
        .unwrap();
        assert_eq!(
            (route.backend, route.device),
            (BackendKind::Native, DeviceKind::Cpu)
        );
        assert!(
            route.reasons.iter().any(|r| r.contains("llama plan")),
            "{:?}",
            route.reasons
        );
    }

    #[test]
    fn auto_falls_back_to_ort_with_the_lifting_reason() {
        let route = route(
            BackendRequest::Auto,
            None,
            &facts(Err("node X: softcap"), Ok("/lib/ort.so")),
        )
        .unwrap();
        assert_eq!(route.backend, BackendKind::Ort);
        assert!(
            route.reasons.iter().any(|r| r.contains("node X: softcap")),
            "{:?}",
            route.reasons
        );
    }

    #[test]
    fn auto_without_ort_uses_native_and_without_both_explains_everything() {
        let route = route(
            BackendRequest::Auto,
            None,
            &facts(Ok("plan"), Err("no library")),
        )
        .unwrap();
        assert_eq!(route.backend, BackendKind::Native);
        let err = super::route(
            BackendRequest::Auto,
            None,
            &facts(Err("node Y"), Err("no library")),
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("node Y") && text.contains("no library"),
            "{text}"
        );
    }

    #[test]
    fn explicit_requests_fail_loudly() {
        let err = route(
            BackendRequest::Native,
            None,
            &facts(Err("node Z: unknown op"), Ok("ort")),
        )
        .unwrap_err();
        assert!(err.to_string().contains("node Z"));
        let err = route(
            BackendRequest::Ort,
            None,
            &facts(Ok("plan"), Err("missing")),
        )
        .unwrap_err();
        assert!(err.to_string().contains("missing"));
    }

    #[test]
    fn cuda_uses_the_configured_or_requested_device() {
        let mut f = facts(Ok("plan"), Ok("ort"));
        f.configured_device = Some(DeviceKind::Cuda);
        let r = route(BackendRequest::Auto, None, &f).unwrap();
        assert_eq!(
            (r.backend, r.device),
            (BackendKind::Ort, DeviceKind::Cuda),
            "native CUDA is not compiled in"
        );
        let r = route(BackendRequest::Auto, Some(DeviceKind::Cpu), &f).unwrap();
        assert_eq!(
            (r.backend, r.device),
            (BackendKind::Native, DeviceKind::Cpu)
        );
        f.native_cuda = Some(Ok("H200".into()));
        let r = route(BackendRequest::Auto, None, &f).unwrap();
        assert_eq!(
            (r.backend, r.device),
            (BackendKind::Native, DeviceKind::Cuda)
        );
    }

    #[test]
    fn a_configured_cuda_device_falls_back_to_cpu_when_no_cuda_exists() {
        let mut f = facts(Ok("plan"), Ok("ort"));
        f.configured_device = Some(DeviceKind::Cuda);
        f.ort_cuda = Some(Err("CPU-only build".into()));
        let r = route(BackendRequest::Auto, None, &f).unwrap();
        assert_eq!(
            (r.backend, r.device),
            (BackendKind::Native, DeviceKind::Cpu)
        );
        assert!(r.reasons[0].contains("asks for cuda"), "{:?}", r.reasons);
        // An explicit request is honoured (and fails later with the provider's own message).
        let r = route(BackendRequest::Ort, Some(DeviceKind::Cuda), &f).unwrap();
        assert_eq!(r.device, DeviceKind::Cuda);
    }
}
