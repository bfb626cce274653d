//! `OgaConfig`: a model folder's genai_config.json, loaded and edited before a model is made
//! from it (providers, provider options, device filters, JSON overlays).

use crate::OgaResult;
use crate::ffi::{
    Error, Handle, Result, borrow, check_out, destroy, guard, into_handle, read_str, write_out,
};
use genai_config::{Config, DeviceFilter, DeviceFilterField};
use std::ffi::c_char;
use std::path::Path;
use std::sync::{Mutex, PoisonError};

/// A loaded configuration. Thread-safety: calls on one config are serialised by a lock.
pub struct OgaConfig {
    config: Mutex<Config>,
}

impl Handle for OgaConfig {
    const KIND: &'static str = "OgaConfig";
}

impl OgaConfig {
    /// The current configuration.
    pub fn snapshot(&self) -> Config {
        self.config
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn edit(&self, change: impl FnOnce(&Config) -> Result<Config>) -> Result<()> {
        let mut config = self.config.lock().unwrap_or_else(PoisonError::into_inner);
        *config = change(&config)?;
        Ok(())
    }
}

/// Loads `dir/genai_config.json` with the official checks and a clear error for a bad path.
pub fn load_config(dir: &str) -> Result<Config> {
    let path = Path::new(dir);
    if !path.is_dir() {
        return Err(Error::Invalid(format!(
            "model folder \"{dir}\" does not exist or is not a folder"
        )));
    }
    Ok(Config::load(path)?)
}

/// `OgaResult* OgaCreateConfig(const char* config_path, OgaConfig** out)`.
///
/// # Safety
/// `config_path` is a NUL-terminated string; `out` points to writable storage.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaCreateConfig(
    config_path: *const c_char,
    out: *mut *mut OgaConfig,
) -> *mut OgaResult {
    const F: &str = "OgaCreateConfig";
    guard(F, || {
        check_out(out, F, "out")?;
        // SAFETY: C contract.
        let dir = unsafe { read_str(config_path, F, "config_path") }?;
        let config = load_config(dir)?;
        let handle = into_handle(OgaConfig {
            config: Mutex::new(config),
        });
        // SAFETY: checked non-null above.
        unsafe { write_out(out, handle, F, "out") }
    })
}

/// `void OgaDestroyConfig(OgaConfig*)`.
///
/// # Safety
/// `config` is null or a live config no other thread is using.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaDestroyConfig(config: *mut OgaConfig) {
    // SAFETY: checked against the registry inside.
    unsafe { destroy(config) }
}

/// Runs one edit on a config handle.
///
/// # Safety
/// `config` is null or a live config.
unsafe fn edit(
    function: &'static str,
    config: *mut OgaConfig,
    change: impl FnOnce(&Config) -> Result<Config>,
) -> *mut OgaResult {
    guard(function, || {
        // SAFETY: checked against the registry.
        let config = unsafe { borrow(config, function, "config") }?;
        config.edit(change)
    })
}

/// `OgaResult* OgaConfigClearProviders(OgaConfig*)`.
///
/// # Safety
/// `config` is null or a live config.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigClearProviders(config: *mut OgaConfig) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        edit("OgaConfigClearProviders", config, |c| {
            Ok(c.clear_providers()?)
        })
    }
}

/// `OgaResult* OgaConfigAppendProvider(OgaConfig*, const char* provider)`.
///
/// # Safety
/// `config` is null or a live config; `provider` a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigAppendProvider(
    config: *mut OgaConfig,
    provider: *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaConfigAppendProvider";
    // SAFETY: forwarded contract.
    unsafe {
        edit(F, config, |c| {
            let provider = read_str(provider, F, "provider")?;
            Ok(c.append_provider(provider)?)
        })
    }
}

/// `OgaResult* OgaConfigSetProviderOption(OgaConfig*, const char* provider, const char* key,
/// const char* value)`.
///
/// # Safety
/// `config` is null or a live config; the strings are NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigSetProviderOption(
    config: *mut OgaConfig,
    provider: *const c_char,
    key: *const c_char,
    value: *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaConfigSetProviderOption";
    // SAFETY: forwarded contract.
    unsafe {
        edit(F, config, |c| {
            let provider = read_str(provider, F, "provider")?;
            let key = read_str(key, F, "key")?;
            let value = read_str(value, F, "value")?;
            Ok(c.set_provider_option(provider, key, value)?)
        })
    }
}

/// `OgaResult* OgaConfigOverlay(OgaConfig*, const char* json)`.
///
/// # Safety
/// `config` is null or a live config; `json` a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigOverlay(
    config: *mut OgaConfig,
    json: *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaConfigOverlay";
    // SAFETY: forwarded contract.
    unsafe {
        edit(F, config, |c| {
            let json = read_str(json, F, "json")?;
            Ok(c.with_overlay(json)?)
        })
    }
}

/// `OgaResult* OgaConfigSetDecoderProviderOptionsHardwareDeviceType(OgaConfig*, const char*
/// provider, const char* hardware_device_type)`.
///
/// # Safety
/// `config` is null or a live config; the strings are NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigSetDecoderProviderOptionsHardwareDeviceType(
    config: *mut OgaConfig,
    provider: *const c_char,
    hardware_device_type: *const c_char,
) -> *mut OgaResult {
    const F: &str = "OgaConfigSetDecoderProviderOptionsHardwareDeviceType";
    // SAFETY: forwarded contract.
    unsafe {
        edit(F, config, |c| {
            let provider = read_str(provider, F, "provider")?;
            let ty = read_str(hardware_device_type, F, "hardware_device_type")?;
            Ok(c.set_device_filter(provider, DeviceFilter::Type(ty))?)
        })
    }
}

/// `OgaResult* OgaConfigSetDecoderProviderOptionsHardwareDeviceId(OgaConfig*, const char*
/// provider, uint32_t hardware_device_id)`.
///
/// # Safety
/// `config` is null or a live config; `provider` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigSetDecoderProviderOptionsHardwareDeviceId(
    config: *mut OgaConfig,
    provider: *const c_char,
    hardware_device_id: u32,
) -> *mut OgaResult {
    const F: &str = "OgaConfigSetDecoderProviderOptionsHardwareDeviceId";
    // SAFETY: forwarded contract.
    unsafe {
        edit(F, config, |c| {
            let provider = read_str(provider, F, "provider")?;
            Ok(c.set_device_filter(provider, DeviceFilter::Id(hardware_device_id))?)
        })
    }
}

/// `OgaResult* OgaConfigSetDecoderProviderOptionsHardwareVendorId(OgaConfig*, const char*
/// provider, uint32_t hardware_vendor_id)`.
///
/// # Safety
/// `config` is null or a live config; `provider` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigSetDecoderProviderOptionsHardwareVendorId(
    config: *mut OgaConfig,
    provider: *const c_char,
    hardware_vendor_id: u32,
) -> *mut OgaResult {
    const F: &str = "OgaConfigSetDecoderProviderOptionsHardwareVendorId";
    // SAFETY: forwarded contract.
    unsafe {
        edit(F, config, |c| {
            let provider = read_str(provider, F, "provider")?;
            Ok(c.set_device_filter(provider, DeviceFilter::VendorId(hardware_vendor_id))?)
        })
    }
}

/// Clears one device-filter field.
///
/// # Safety
/// `config` is null or a live config; `provider` is NUL-terminated.
unsafe fn clear_filter(
    function: &'static str,
    config: *mut OgaConfig,
    provider: *const c_char,
    field: DeviceFilterField,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        edit(function, config, |c| {
            let provider = read_str(provider, function, "provider")?;
            Ok(c.clear_device_filter(provider, field)?)
        })
    }
}

/// `OgaResult* OgaConfigClearDecoderProviderOptionsHardwareDeviceType(OgaConfig*, const char*)`.
///
/// # Safety
/// `config` is null or a live config; `provider` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigClearDecoderProviderOptionsHardwareDeviceType(
    config: *mut OgaConfig,
    provider: *const c_char,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        clear_filter(
            "OgaConfigClearDecoderProviderOptionsHardwareDeviceType",
            config,
            provider,
            DeviceFilterField::Type,
        )
    }
}

/// `OgaResult* OgaConfigClearDecoderProviderOptionsHardwareDeviceId(OgaConfig*, const char*)`.
///
/// # Safety
/// `config` is null or a live config; `provider` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigClearDecoderProviderOptionsHardwareDeviceId(
    config: *mut OgaConfig,
    provider: *const c_char,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        clear_filter(
            "OgaConfigClearDecoderProviderOptionsHardwareDeviceId",
            config,
            provider,
            DeviceFilterField::Id,
        )
    }
}

/// `OgaResult* OgaConfigClearDecoderProviderOptionsHardwareVendorId(OgaConfig*, const char*)`.
///
/// # Safety
/// `config` is null or a live config; `provider` is NUL-terminated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn OgaConfigClearDecoderProviderOptionsHardwareVendorId(
    config: *mut OgaConfig,
    provider: *const c_char,
) -> *mut OgaResult {
    // SAFETY: forwarded contract.
    unsafe {
        clear_filter(
            "OgaConfigClearDecoderProviderOptionsHardwareVendorId",
            config,
            provider,
            DeviceFilterField::VendorId,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn the_vram_budget_reaches_the_runtime_through_a_provider_option() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../models/fixtures/qwen2-fp32-cpu"
        );
        let c = |s: &str| CString::new(s).expect("no NUL");
        let (path, cuda) = (c(dir), c("cuda"));
        let (key, value) = (c(genai_config::VRAM_BUDGET_OPTION), c("40%"));
        let mut config: *mut OgaConfig = std::ptr::null_mut();
        // SAFETY: valid strings and out-pointer; every result is checked null (success) and
        // the config is destroyed once.
        unsafe {
            assert!(OgaCreateConfig(path.as_ptr(), &mut config).is_null());
            assert!(OgaConfigAppendProvider(config, cuda.as_ptr()).is_null());
            assert!(
                OgaConfigSetProviderOption(config, cuda.as_ptr(), key.as_ptr(), value.as_ptr())
                    .is_null()
            );
            let snapshot = (*config).snapshot();
            let options = genai_runtime::OpenOptions::default();
            // An empty environment: a developer's GENAI_BRIDGE_VRAM_BUDGET cannot win here.
            let settings =
                genai_runtime::Settings::parse(&|_| None, &snapshot, &options).expect("parses");
            let budget = settings.vram_budget.expect("a budget");
            assert_eq!(budget.budget, genai_runtime::VramBudget::Percent(40.0));
            assert!(
                budget.source.contains("genai_config.json"),
                "{}",
                budget.source
            );
            OgaDestroyConfig(config);
        }
    }
}
