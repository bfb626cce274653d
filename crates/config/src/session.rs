//! Validated ONNX Runtime session options: the named settings, the generic session config
//! entries and the ordered execution provider list.

use crate::Error;
use crate::check::relative_path;
use crate::raw::{GraphOptimizationLevel, RawDeviceFiltering, RawSessionOptions};

/// `session_options` of the decoder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionOptions {
    /// Execution providers in priority order (`provider_options`). Empty means CPU.
    pub provider_options: Vec<Provider>,
    /// `intra_op_num_threads` (0 lets ONNX Runtime choose).
    pub intra_op_num_threads: Option<i32>,
    /// `inter_op_num_threads`
    pub inter_op_num_threads: Option<i32>,
    /// `enable_cpu_mem_arena`
    pub enable_cpu_mem_arena: Option<bool>,
    /// `enable_mem_pattern`
    pub enable_mem_pattern: Option<bool>,
    /// `log_id`
    pub log_id: Option<String>,
    /// `log_severity_level` (0 verbose .. 4 fatal)
    pub log_severity_level: Option<i32>,
    /// `log_verbosity_level`
    pub log_verbosity_level: Option<i32>,
    /// `enable_profiling`: the profile file prefix.
    pub enable_profiling: Option<String>,
    /// `custom_ops_library`: a path relative to the model folder.
    pub custom_ops_library: Option<String>,
    /// `graph_optimization_level`
    pub graph_optimization_level: Option<GraphOptimizationLevel>,
    /// Every other key, passed to ONNX Runtime as a session config entry
    /// (e.g. `session.use_device_allocator_for_initializers`), in file order.
    pub config_entries: Vec<(String, String)>,
}

/// One execution provider and its options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provider {
    /// Canonical name: `cuda`, `CPU`, `DML`, `QNN`, `WebGPU`, `OpenVINO`, ... or as written.
    pub name: String,
    /// Options in file order.
    pub options: Vec<(String, String)>,
    /// `device_filtering_options`
    pub device_filtering: Option<DeviceFiltering>,
}

impl Provider {
    /// The value of option `key`, if set.
    pub fn option(&self, key: &str) -> Option<&str> {
        self.options
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// `device_filtering_options` of a provider.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceFiltering {
    /// `hardware_device_type`
    pub hardware_device_type: Option<HardwareDeviceType>,
    /// `hardware_device_id`
    pub hardware_device_id: Option<u32>,
    /// `hardware_vendor_id`
    pub hardware_vendor_id: Option<u32>,
}

/// `hardware_device_type` values (any case in the file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HardwareDeviceType {
    /// `cpu`
    Cpu,
    /// `gpu`
    Gpu,
    /// `npu`
    Npu,
}

impl SessionOptions {
    /// Validates `raw`, found at JSON path `path`.
    pub(crate) fn from_raw(raw: &RawSessionOptions, path: &str) -> Result<Self, Error> {
        for (key, value) in [
            ("intra_op_num_threads", raw.intra_op_num_threads),
            ("inter_op_num_threads", raw.inter_op_num_threads),
        ] {
            if let Some(v) = value
                && v.0 < 0
            {
                return Err(Error::invalid(
                    format!("{path}.{key}"),
                    format!(
                        "must not be negative (it is {}); use 0 for the default",
                        v.0
                    ),
                ));
            }
        }
        if let Some(v) = raw.log_severity_level
            && !(0..=4).contains(&v.0)
        {
            return Err(Error::invalid(
                format!("{path}.log_severity_level"),
                format!("must be 0 (verbose) to 4 (fatal), not {}", v.0),
            ));
        }
        if let Some(lib) = &raw.custom_ops_library {
            relative_path(lib, &format!("{path}.custom_ops_library"))?;
        }
        let mut providers = Vec::new();
        for p in raw.provider_options.iter().flat_map(|list| list.0.iter()) {
            let ppath = format!("{path}.provider_options.{}", p.name);
            let device_filtering = match &p.device_filtering_options {
                Some(d) => Some(device_filtering(
                    d,
                    &format!("{ppath}.device_filtering_options"),
                )?),
                None => None,
            };
            providers.push(Provider {
                name: p.name.clone(),
                options: p.options.0.clone(),
                device_filtering,
            });
        }
        Ok(SessionOptions {
            provider_options: providers,
            intra_op_num_threads: raw.intra_op_num_threads.map(|v| v.0),
            inter_op_num_threads: raw.inter_op_num_threads.map(|v| v.0),
            enable_cpu_mem_arena: raw.enable_cpu_mem_arena,
            enable_mem_pattern: raw.enable_mem_pattern,
            log_id: raw.log_id.clone(),
            log_severity_level: raw.log_severity_level.map(|v| v.0),
            log_verbosity_level: raw.log_verbosity_level.map(|v| v.0),
            enable_profiling: raw.enable_profiling.clone(),
            custom_ops_library: raw.custom_ops_library.clone(),
            graph_optimization_level: raw.graph_optimization_level,
            config_entries: raw.config_entries.0.clone(),
        })
    }

    /// The first provider, which ONNX Runtime GenAI uses to place the model; `None` means CPU.
    pub fn primary_provider(&self) -> Option<&Provider> {
        self.provider_options.first()
    }
}

fn device_filtering(raw: &RawDeviceFiltering, path: &str) -> Result<DeviceFiltering, Error> {
    let hardware_device_type = match raw.hardware_device_type.as_deref() {
        None => None,
        Some(t) => Some(match t.to_ascii_lowercase().as_str() {
            "cpu" => HardwareDeviceType::Cpu,
            "gpu" => HardwareDeviceType::Gpu,
            "npu" => HardwareDeviceType::Npu,
            _ => {
                return Err(Error::invalid(
                    format!("{path}.hardware_device_type"),
                    format!("\"{t}\" is not one of \"cpu\", \"gpu\", \"npu\""),
                ));
            }
        }),
    };
    let id = |v: Option<crate::de::Int>, key: &str| -> Result<Option<u32>, Error> {
        v.map(|v| {
            u32::try_from(v.0).map_err(|_| {
                Error::invalid(
                    format!("{path}.{key}"),
                    format!("must not be negative ({})", v.0),
                )
            })
        })
        .transpose()
    };
    Ok(DeviceFiltering {
        hardware_device_type,
        hardware_device_id: id(raw.hardware_device_id, "hardware_device_id")?,
        hardware_vendor_id: id(raw.hardware_vendor_id, "hardware_vendor_id")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<SessionOptions, Error> {
        let raw: RawSessionOptions = serde_json::from_str(json).unwrap();
        SessionOptions::from_raw(&raw, "model.decoder.session_options")
    }

    #[test]
    fn builder_shape() {
        let s = parse(r#"{"log_id": "onnxruntime-genai", "provider_options": []}"#).unwrap();
        assert_eq!(s.log_id.as_deref(), Some("onnxruntime-genai"));
        assert!(s.provider_options.is_empty());
        assert!(s.primary_provider().is_none());
    }

    #[test]
    fn providers_and_filtering() {
        let s = parse(
            r#"{"provider_options": [{"cuda": {"enable_cuda_graph": "1",
                 "device_filtering_options": {"hardware_device_type": "GPU", "hardware_vendor_id": 4318}}}]}"#,
        )
        .unwrap();
        let p = s.primary_provider().unwrap();
        assert_eq!(p.name, "cuda");
        assert_eq!(p.option("enable_cuda_graph"), Some("1"));
        let d = p.device_filtering.as_ref().unwrap();
        assert_eq!(d.hardware_device_type, Some(HardwareDeviceType::Gpu));
        assert_eq!(d.hardware_vendor_id, Some(4318));
    }

    #[test]
    fn bad_values_name_their_path() {
        let e = parse(r#"{"intra_op_num_threads": -2}"#).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "model.decoder.session_options.intra_op_num_threads: must not be negative"
            ),
            "{e}"
        );
        let e = parse(r#"{"custom_ops_library": "../lib.so"}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("model.decoder.session_options.custom_ops_library:")
        );
        let e = parse(r#"{"provider_options": [{"cuda": {"device_filtering_options": {"hardware_device_type": "tpu"}}}]}"#)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "model.decoder.session_options.provider_options.cuda.device_filtering_options.hardware_device_type: \"tpu\" is not one of \"cpu\", \"gpu\", \"npu\""
        );
    }
}
