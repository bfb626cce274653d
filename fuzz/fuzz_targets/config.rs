//! Fuzz target `config`: arbitrary bytes as genai_config.json (parsed and validated by
//! `Config::from_json`), then a second slice as an overlay (`Config::with_overlay`). Neither may
//! panic; every bad input must come back as `genai_config::Error`.

#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The config and the overlay are separated by the first NUL byte (JSON text has none).
    let (config, overlay) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], Some(&data[at + 1..])),
        None => (data, None),
    };
    let config = String::from_utf8_lossy(config);
    let _ = genai_config::parse(&config);
    let Ok(parsed) = genai_config::Config::from_json(&config, Path::new("model-dir")) else {
        return;
    };
    let _ = parsed.decoder_path();
    let _ = parsed.tokenizer_dir();
    if let Some(overlay) = overlay {
        let overlay = String::from_utf8_lossy(overlay);
        if let Ok(merged) = parsed.with_overlay(&overlay) {
            // An overlay of the empty object changes nothing and must apply again.
            let _ = merged.with_overlay("{}");
        }
    }
});
