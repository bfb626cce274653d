//! Editing the decoder's execution providers after loading, as `OgaConfigClearProviders`,
//! `OgaConfigAppendProvider`, `OgaConfigSetProviderOption` and the device-filtering setters do.
//! Each edit changes the parsed file and validates the result again, so an edit can never leave
//! a config that the loader would have refused.

use crate::de::Int;
use crate::raw::{RawDeviceFiltering, RawProvider, RawProviders, normalize_provider_name};
use crate::{Config, Error};

/// One field of a provider's `device_filtering_options`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceFilter<'a> {
    /// `hardware_device_type`: "cpu", "gpu" or "npu".
    Type(&'a str),
    /// `hardware_device_id`.
    Id(u32),
    /// `hardware_vendor_id`.
    VendorId(u32),
}

/// Which field of `device_filtering_options` to clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceFilterField {
    Type,
    Id,
    VendorId,
}

impl Config {
    /// Removes every execution provider of the decoder (the model then runs on the CPU).
    pub fn clear_providers(&self) -> Result<Config, Error> {
        self.edit_providers(|providers| providers.0.clear())
    }

    /// Adds a provider by name (normalised the way the file's names are), keeping it where it
    /// already is when the list names it.
    pub fn append_provider(&self, name: &str) -> Result<Config, Error> {
        let name = checked_name(name)?;
        self.edit_providers(|providers| {
            provider_entry(providers, &name);
        })
    }

    /// Sets one option of a provider, adding the provider when the list does not name it.
    pub fn set_provider_option(&self, name: &str, key: &str, value: &str) -> Result<Config, Error> {
        let name = checked_name(name)?;
        self.edit_providers(|providers| {
            provider_entry(providers, &name)
                .options
                .set(key.to_string(), value.to_string());
        })
    }

    /// Sets one field of a provider's `device_filtering_options`.
    pub fn set_device_filter(&self, name: &str, filter: DeviceFilter<'_>) -> Result<Config, Error> {
        let name = checked_name(name)?;
        let id = |v: u32| {
            i32::try_from(v).map(Int).map_err(|_| {
                Error::invalid(
                    "provider_options.device_filtering_options",
                    format!("{v} does not fit an int32"),
                )
            })
        };
        let (ty, device_id, vendor) = match filter {
            DeviceFilter::Type(t) => (Some(t.to_string()), None, None),
            DeviceFilter::Id(v) => (None, Some(id(v)?), None),
            DeviceFilter::VendorId(v) => (None, None, Some(id(v)?)),
        };
        self.edit_providers(|providers| {
            let filtering = provider_entry(providers, &name)
                .device_filtering_options
                .get_or_insert_with(RawDeviceFiltering::default);
            if ty.is_some() {
                filtering.hardware_device_type = ty;
            }
            if device_id.is_some() {
                filtering.hardware_device_id = device_id;
            }
            if vendor.is_some() {
                filtering.hardware_vendor_id = vendor;
            }
        })
    }

    /// Clears one field of a provider's `device_filtering_options`; a provider the list does not
    /// name is left alone.
    pub fn clear_device_filter(
        &self,
        name: &str,
        field: DeviceFilterField,
    ) -> Result<Config, Error> {
        let name = checked_name(name)?;
        self.edit_providers(|providers| {
            let Some(provider) = providers.0.iter_mut().find(|p| p.name == name) else {
                return;
            };
            if let Some(filtering) = provider.device_filtering_options.as_mut() {
                match field {
                    DeviceFilterField::Type => filtering.hardware_device_type = None,
                    DeviceFilterField::Id => filtering.hardware_device_id = None,
                    DeviceFilterField::VendorId => filtering.hardware_vendor_id = None,
                }
            }
        })
    }

    fn edit_providers(&self, edit: impl FnOnce(&mut RawProviders)) -> Result<Config, Error> {
        let mut raw = self.raw.clone();
        let session = &mut raw
            .model
            .get_or_insert_with(Default::default)
            .decoder
            .get_or_insert_with(Default::default)
            .session_options
            .get_or_insert_with(Default::default);
        edit(
            session
                .provider_options
                .get_or_insert_with(Default::default),
        );
        Config::from_raw(raw, &self.model_dir)
    }
}

fn checked_name(name: &str) -> Result<String, Error> {
    if name.trim().is_empty() {
        return Err(Error::invalid(
            "provider_options",
            "a provider name must not be empty",
        ));
    }
    Ok(normalize_provider_name(name))
}

fn provider_entry<'p>(providers: &'p mut RawProviders, name: &str) -> &'p mut RawProvider {
    let index = match providers.0.iter().position(|p| p.name == name) {
        Some(index) => index,
        None => {
            providers.0.push(RawProvider {
                name: name.to_string(),
                ..RawProvider::default()
            });
            providers.0.len() - 1
        }
    };
    &mut providers.0[index]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const BASE: &str = r#"{"model": {"type": "llama", "vocab_size": 10, "context_length": 16,
        "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0,
        "decoder": {"filename": "m.onnx", "head_size": 4, "hidden_size": 8, "num_attention_heads": 2,
            "num_hidden_layers": 1, "num_key_value_heads": 2,
            "session_options": {"provider_options": [{"cuda": {"enable_cuda_graph": "0"}}]}}}}"#;

    fn base() -> Config {
        Config::from_json(BASE, Path::new(".")).expect("base config parses")
    }

    fn providers(config: &Config) -> Vec<(String, Vec<(String, String)>)> {
        config
            .model
            .decoder
            .session_options
            .provider_options
            .iter()
            .map(|p| (p.name.clone(), p.options.clone()))
            .collect()
    }

    #[test]
    fn clear_then_append_keeps_order_and_normalises_names() {
        let config = base().clear_providers().unwrap();
        assert!(providers(&config).is_empty());
        let config = config.append_provider("CUDAExecutionProvider").unwrap();
        let config = config.append_provider("cuda").unwrap();
        let config = config.append_provider("dml").unwrap();
        let names: Vec<String> = providers(&config).into_iter().map(|p| p.0).collect();
        assert_eq!(names, ["cuda", "DML"]);
    }

    #[test]
    fn set_option_replaces_in_place_or_adds_the_provider() {
        let config = base()
            .set_provider_option("cuda", "enable_cuda_graph", "1")
            .unwrap()
            .set_provider_option("cuda", "device_id", "0")
            .unwrap()
            .set_provider_option("qnn", "backend_path", "x")
            .unwrap();
        let got = providers(&config);
        assert_eq!(got[0].0, "cuda");
        assert_eq!(
            got[0].1,
            [
                ("enable_cuda_graph".to_string(), "1".to_string()),
                ("device_id".to_string(), "0".to_string())
            ]
        );
        assert_eq!(got[1].0, "QNN");
    }

    #[test]
    fn device_filters_set_and_clear_and_are_validated() {
        let config = base()
            .set_device_filter("cuda", DeviceFilter::Type("gpu"))
            .unwrap()
            .set_device_filter("cuda", DeviceFilter::Id(3))
            .unwrap();
        let filtering = config.model.decoder.session_options.provider_options[0]
            .device_filtering
            .clone()
            .expect("filtering set");
        assert_eq!(filtering.hardware_device_id, Some(3));
        let cleared = config
            .clear_device_filter("cuda", DeviceFilterField::Id)
            .unwrap();
        let filtering = cleared.model.decoder.session_options.provider_options[0]
            .device_filtering
            .clone()
            .expect("filtering kept");
        assert_eq!(filtering.hardware_device_id, None);
        let err = base()
            .set_device_filter("cuda", DeviceFilter::Type("tpu"))
            .unwrap_err();
        assert!(err.to_string().contains("hardware_device_type"), "{err}");
        assert!(base().append_provider(" ").is_err());
        assert!(
            base()
                .set_device_filter("cuda", DeviceFilter::VendorId(u32::MAX))
                .is_err()
        );
    }
}
