//! Raw `session_options` and `provider_options`. Written by hand because the official parser
//! treats every key it does not name as an ONNX Runtime session config entry (a string), and
//! because provider options are an ordered list of `{"name": {"key": "value"}}` objects.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::de::{Int, Merge, StringMap, raw_struct};

/// `session_options` of any model section.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawSessionOptions {
    /// `log_id`
    pub log_id: Option<String>,
    /// `enable_profiling` (a file prefix)
    pub enable_profiling: Option<String>,
    /// `custom_ops_library` (a path)
    pub custom_ops_library: Option<String>,
    /// `intra_op_num_threads`
    pub intra_op_num_threads: Option<Int>,
    /// `inter_op_num_threads`
    pub inter_op_num_threads: Option<Int>,
    /// `log_severity_level`
    pub log_severity_level: Option<Int>,
    /// `log_verbosity_level`
    pub log_verbosity_level: Option<Int>,
    /// `enable_cpu_mem_arena`
    pub enable_cpu_mem_arena: Option<bool>,
    /// `enable_mem_pattern`
    pub enable_mem_pattern: Option<bool>,
    /// `graph_optimization_level`
    pub graph_optimization_level: Option<GraphOptimizationLevel>,
    /// `provider_options`, in file order, names normalized.
    pub provider_options: Option<RawProviders>,
    /// Every other key: session config entries (string values), in file order.
    pub config_entries: StringMap,
}

impl Merge for RawSessionOptions {
    fn merge(&mut self, other: Self) {
        let RawSessionOptions {
            log_id,
            enable_profiling,
            custom_ops_library,
            intra_op_num_threads,
            inter_op_num_threads,
            log_severity_level,
            log_verbosity_level,
            enable_cpu_mem_arena,
            enable_mem_pattern,
            graph_optimization_level,
            provider_options,
            config_entries,
        } = other;
        self.log_id.merge(log_id);
        self.enable_profiling.merge(enable_profiling);
        self.custom_ops_library.merge(custom_ops_library);
        self.intra_op_num_threads.merge(intra_op_num_threads);
        self.inter_op_num_threads.merge(inter_op_num_threads);
        self.log_severity_level.merge(log_severity_level);
        self.log_verbosity_level.merge(log_verbosity_level);
        self.enable_cpu_mem_arena.merge(enable_cpu_mem_arena);
        self.enable_mem_pattern.merge(enable_mem_pattern);
        self.graph_optimization_level
            .merge(graph_optimization_level);
        self.provider_options.merge(provider_options);
        self.config_entries.merge(config_entries);
    }
}

impl<'de> Deserialize<'de> for RawSessionOptions {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawSessionOptions;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a session_options object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut o = RawSessionOptions::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "log_id" => o.log_id = Some(map.next_value()?),
                        "enable_profiling" => o.enable_profiling = Some(map.next_value()?),
                        "custom_ops_library" => o.custom_ops_library = Some(map.next_value()?),
                        "intra_op_num_threads" => o.intra_op_num_threads = Some(map.next_value()?),
                        "inter_op_num_threads" => o.inter_op_num_threads = Some(map.next_value()?),
                        "log_severity_level" => o.log_severity_level = Some(map.next_value()?),
                        "log_verbosity_level" => o.log_verbosity_level = Some(map.next_value()?),
                        "enable_cpu_mem_arena" => o.enable_cpu_mem_arena = Some(map.next_value()?),
                        "enable_mem_pattern" => o.enable_mem_pattern = Some(map.next_value()?),
                        "graph_optimization_level" => {
                            o.graph_optimization_level = Some(map.next_value()?)
                        }
                        "provider_options" => o
                            .provider_options
                            .merge(Some(map.next_value::<RawProviders>()?)),
                        _ => {
                            let value: String = map.next_value()?;
                            o.config_entries.set(key, value);
                        }
                    }
                }
                Ok(o)
            }
        }
        deserializer.deserialize_map(V)
    }
}

/// `graph_optimization_level`: one of the four ONNX Runtime level names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphOptimizationLevel {
    /// `ORT_DISABLE_ALL`
    DisableAll,
    /// `ORT_ENABLE_BASIC`
    EnableBasic,
    /// `ORT_ENABLE_EXTENDED`
    EnableExtended,
    /// `ORT_ENABLE_ALL`
    EnableAll,
}

impl GraphOptimizationLevel {
    /// The name used in the file.
    pub fn as_str(self) -> &'static str {
        match self {
            GraphOptimizationLevel::DisableAll => "ORT_DISABLE_ALL",
            GraphOptimizationLevel::EnableBasic => "ORT_ENABLE_BASIC",
            GraphOptimizationLevel::EnableExtended => "ORT_ENABLE_EXTENDED",
            GraphOptimizationLevel::EnableAll => "ORT_ENABLE_ALL",
        }
    }
}

impl Merge for GraphOptimizationLevel {
    fn merge(&mut self, other: Self) {
        *self = other;
    }
}

impl<'de> Deserialize<'de> for GraphOptimizationLevel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        const NAMES: &[&str] = &[
            "ORT_DISABLE_ALL",
            "ORT_ENABLE_BASIC",
            "ORT_ENABLE_EXTENDED",
            "ORT_ENABLE_ALL",
        ];
        let name = String::deserialize(deserializer)?;
        match name.as_str() {
            "ORT_DISABLE_ALL" => Ok(GraphOptimizationLevel::DisableAll),
            "ORT_ENABLE_BASIC" => Ok(GraphOptimizationLevel::EnableBasic),
            "ORT_ENABLE_EXTENDED" => Ok(GraphOptimizationLevel::EnableExtended),
            "ORT_ENABLE_ALL" => Ok(GraphOptimizationLevel::EnableAll),
            _ => Err(de::Error::unknown_variant(&name, NAMES)),
        }
    }
}

/// Maps the spellings the official runtime accepts (any case, short or full ORT names such as
/// `CUDAExecutionProvider`) to its canonical names; unknown names are returned unchanged.
pub fn normalize_provider_name(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let short = match lower.strip_suffix("executionprovider") {
        Some(s) if !s.is_empty() => s,
        _ => lower.as_str(),
    };
    let canonical = match short {
        "cpu" => "CPU",
        "cuda" => "cuda",
        "qnn" => "QNN",
        "webgpu" => "WebGPU",
        "dml" => "DML",
        "openvino" => "OpenVINO",
        "vitisai" => "VitisAI",
        "ryzenai" => "RyzenAI",
        "nvtensorrtrtx" => "NvTensorRtRtx",
        "amdgpu" => "AMDGPU",
        _ => return name.to_string(),
    };
    canonical.to_string()
}

/// One execution provider entry of `provider_options`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawProvider {
    /// Canonical provider name (see [`normalize_provider_name`]).
    pub name: String,
    /// Provider options in file order.
    pub options: StringMap,
    /// `device_filtering_options`
    pub device_filtering_options: Option<RawDeviceFiltering>,
}

impl Merge for RawProvider {
    fn merge(&mut self, other: Self) {
        self.options.merge(other.options);
        self.device_filtering_options
            .merge(other.device_filtering_options);
    }
}

raw_struct! {
    /// `provider_options[i].<provider>.device_filtering_options`
    pub struct RawDeviceFiltering {
        hardware_device_type: String,
        hardware_device_id: Int,
        hardware_vendor_id: Int,
    }
}

/// The whole `provider_options` array. A provider named twice is merged into its first entry,
/// as the official parser does; merging two lists works the same way.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawProviders(pub Vec<RawProvider>);

impl RawProviders {
    fn add(&mut self, provider: RawProvider) {
        match self.0.iter_mut().find(|p| p.name == provider.name) {
            Some(existing) => existing.merge(provider),
            None => self.0.push(provider),
        }
    }
}

impl Merge for RawProviders {
    fn merge(&mut self, other: Self) {
        for p in other.0 {
            self.add(p);
        }
    }
}

/// The body of one provider: string options plus an optional `device_filtering_options` object.
struct ProviderBody {
    options: StringMap,
    device_filtering_options: Option<RawDeviceFiltering>,
}

impl<'de> Deserialize<'de> for ProviderBody {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ProviderBody;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object of provider options")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ProviderBody, A::Error> {
                let mut body = ProviderBody {
                    options: StringMap::default(),
                    device_filtering_options: None,
                };
                while let Some(key) = map.next_key::<String>()? {
                    if key == "device_filtering_options" {
                        body.device_filtering_options.merge(Some(map.next_value()?));
                    } else {
                        let value: String = map.next_value()?;
                        body.options.set(key, value);
                    }
                }
                Ok(body)
            }
        }
        deserializer.deserialize_map(V)
    }
}

impl<'de> Deserialize<'de> for RawProviders {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawProviders;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"an array like [{"cuda": {"option": "value"}}]"#)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawProviders, A::Error> {
                let mut out = RawProviders::default();
                while let Some(group) = seq.next_element::<crate::de::NamedList<ProviderBody>>()? {
                    for (name, body) in group.0 {
                        out.add(RawProvider {
                            name: normalize_provider_name(&name),
                            options: body.options,
                            device_filtering_options: body.device_filtering_options,
                        });
                    }
                }
                Ok(out)
            }
        }
        deserializer.deserialize_seq(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_become_config_entries_in_order() {
        let o: RawSessionOptions = serde_json::from_str(
            r#"{"session.use_device_allocator_for_initializers": "0", "log_id": "x",
                "ep.context_enable": "1", "provider_options": []}"#,
        )
        .unwrap();
        assert_eq!(o.log_id.as_deref(), Some("x"));
        assert_eq!(
            o.config_entries.0,
            vec![
                (
                    "session.use_device_allocator_for_initializers".into(),
                    "0".into()
                ),
                ("ep.context_enable".into(), "1".into())
            ]
        );
        assert_eq!(o.provider_options, Some(RawProviders(vec![])));
    }

    #[test]
    fn config_entry_values_must_be_strings() {
        let err = serde_json::from_str::<RawSessionOptions>(r#"{"foo.bar": 1}"#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("invalid type: integer `1`, expected a string"),
            "{err}"
        );
    }

    #[test]
    fn providers_keep_order_and_merge_repeats() {
        let p: RawProviders = serde_json::from_str(
            r#"[{"CUDAExecutionProvider": {"enable_cuda_graph": "1", "device_id": "0"}},
                {"webgpu": {}, "cuda": {"enable_cuda_graph": "0"}}]"#,
        )
        .unwrap();
        assert_eq!(p.0.len(), 2);
        assert_eq!(p.0[0].name, "cuda");
        assert_eq!(
            p.0[0].options.0,
            vec![
                ("enable_cuda_graph".into(), "0".into()),
                ("device_id".into(), "0".into())
            ]
        );
        assert_eq!(p.0[1].name, "WebGPU");
    }

    #[test]
    fn graph_level_names_are_checked() {
        let err = serde_json::from_str::<RawSessionOptions>(
            r#"{"graph_optimization_level": "ORT_ENABLE_MOST"}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("unknown variant `ORT_ENABLE_MOST`"), "{err}");
    }

    #[test]
    fn provider_names_normalize() {
        assert_eq!(normalize_provider_name("QNN"), "QNN");
        assert_eq!(normalize_provider_name("qnn"), "QNN");
        assert_eq!(normalize_provider_name("DmlExecutionProvider"), "DML");
        assert_eq!(normalize_provider_name("MyEP"), "MyEP");
    }
}
