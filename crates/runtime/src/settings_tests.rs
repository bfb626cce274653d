//! The settings parser on given environments: precedence, defaults, and one clear error per
//! malformed value.

use super::*;

fn fixture_dir(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../models/fixtures")
        .join(name)
}

fn config_with_budget(value: Option<&str>) -> Config {
    let mut config = Config::load(&fixture_dir("qwen2-fp32-cpu")).expect("fixture config");
    if let Some(v) = value {
        config.model.decoder.session_options.provider_options = vec![genai_config::Provider {
            name: "cuda".into(),
            options: vec![
                ("enable_cuda_graph".into(), "1".into()),
                (genai_config::VRAM_BUDGET_OPTION.into(), v.into()),
            ],
            device_filtering: None,
        }];
    }
    config
}

/// An environment holding exactly `pairs`.
fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        pairs
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.to_string())
    }
}

fn parse(
    pairs: &'static [(&'static str, &'static str)],
    config: &Config,
    options: &OpenOptions,
) -> Result<Settings, Error> {
    Settings::parse(&env(pairs), config, options)
}

/// The winning budget's text and source.
fn budget(settings: &Settings) -> Option<(&str, &'static str)> {
    settings
        .vram_budget
        .as_ref()
        .map(|b| (b.text.as_str(), b.source))
}

#[test]
fn the_caller_beats_the_environment_which_beats_the_config() {
    let config = config_with_budget(Some("8GB"));
    let caller = OpenOptions {
        vram_budget: Some("50%".into()),
        ..OpenOptions::default()
    };
    let s = parse(&[(VRAM_BUDGET_ENV, "4GB")], &config, &caller).expect("ok");
    assert_eq!(budget(&s), Some(("50%", "the caller")));
    let s = parse(
        &[(VRAM_BUDGET_ENV, "4GB")],
        &config,
        &OpenOptions::default(),
    )
    .expect("ok");
    assert_eq!(budget(&s), Some(("4GB", VRAM_BUDGET_ENV)));
    let s = parse(&[(VRAM_BUDGET_ENV, "  ")], &config, &OpenOptions::default()).expect("ok");
    assert_eq!(budget(&s), Some(("8GB", "genai_config.json")));
    let s = parse(&[], &config_with_budget(None), &OpenOptions::default()).expect("ok");
    assert_eq!(budget(&s), None);
}

#[test]
fn a_malformed_budget_is_an_error_naming_it() {
    let config = config_with_budget(Some("lots"));
    let caller = |text: &str| OpenOptions {
        vram_budget: Some(text.into()),
        ..OpenOptions::default()
    };
    let err = parse(&[], &config_with_budget(None), &caller("lots")).expect_err("not a budget");
    assert!(err.to_string().contains("\"lots\""), "{err}");
    let ok = parse(&[], &config_with_budget(None), &caller("25%")).expect("25% parses");
    assert!(matches!(
        ok.vram_budget,
        Some(BudgetSetting { budget: VramBudget::Percent(p), .. }) if p == 25.0
    ));
    // From the environment and from the config, the error names where the value was.
    let err = parse(
        &[(VRAM_BUDGET_ENV, "lots")],
        &config_with_budget(None),
        &caller(""),
    )
    .expect_err("not a budget");
    assert!(
        err.to_string()
            .starts_with("GENAI_BRIDGE_VRAM_BUDGET=\"lots\" is not a VRAM budget: "),
        "{err}"
    );
    let err = parse(&[], &config, &OpenOptions::default()).expect_err("not a budget");
    let text = err.to_string();
    assert!(
        text.contains("vram_budget") && text.contains("genai_config.json"),
        "{text}"
    );
    assert!(text.contains("=\"lots\" is not a VRAM budget"), "{text}");
}

#[test]
fn a_malformed_value_is_refused_even_where_a_higher_source_overrides_it() {
    let options = OpenOptions {
        backend: Some(BackendRequest::Ort),
        vram_budget: Some("2GB".into()),
        ..OpenOptions::default()
    };
    let config = config_with_budget(None);
    let err = parse(&[(BACKEND_ENV, "fast")], &config, &options).expect_err("malformed");
    assert!(
        err.to_string().starts_with("GENAI_BRIDGE_BACKEND=\"fast\""),
        "{err}"
    );
    let err = parse(&[(VRAM_BUDGET_ENV, "0%")], &config, &options).expect_err("malformed");
    assert!(
        err.to_string().contains("GENAI_BRIDGE_VRAM_BUDGET"),
        "{err}"
    );
}

#[test]
fn the_backend_is_the_callers_else_the_environments_else_auto() {
    let config = config_with_budget(None);
    let none = OpenOptions::default();
    let backend = |pairs, options: &OpenOptions| parse(pairs, &config, options).map(|s| s.backend);
    assert_eq!(backend(&[], &none).ok(), Some(BackendRequest::Auto));
    assert_eq!(
        backend(&[(BACKEND_ENV, "")], &none).ok(),
        Some(BackendRequest::Auto)
    );
    assert_eq!(
        backend(&[(BACKEND_ENV, "auto")], &none).ok(),
        Some(BackendRequest::Auto)
    );
    assert_eq!(
        backend(&[(BACKEND_ENV, "ort")], &none).ok(),
        Some(BackendRequest::Ort)
    );
    assert_eq!(
        backend(&[(BACKEND_ENV, "native")], &none).ok(),
        Some(BackendRequest::Native)
    );
    let native = OpenOptions {
        backend: Some(BackendRequest::Native),
        ..OpenOptions::default()
    };
    assert_eq!(
        backend(&[(BACKEND_ENV, "ort")], &native).ok(),
        Some(BackendRequest::Native)
    );
    let err = backend(&[(BACKEND_ENV, "x")], &none).expect_err("x is no backend");
    assert_eq!(
        err.to_string(),
        "GENAI_BRIDGE_BACKEND=\"x\" is not one of auto, ort, native"
    );
}

#[test]
fn the_log_is_on_for_1_off_when_unset_or_0_and_anything_else_is_an_error() {
    let log = |pairs| Settings::log_enabled(&env(pairs));
    assert!(!log(&[]).expect("unset"));
    assert!(!log(&[(LOG_ENV, "0")]).expect("0"));
    assert!(log(&[(LOG_ENV, "1")]).expect("1"));
    let err = log(&[(LOG_ENV, "yes")]).expect_err("yes is not 0 or 1");
    assert_eq!(
        err.to_string(),
        "GENAI_BRIDGE_LOG=\"yes\" is not one of 0, 1"
    );
    let config = config_with_budget(None);
    let err = parse(&[(LOG_ENV, "on")], &config, &OpenOptions::default()).expect_err("on");
    assert!(
        err.to_string().starts_with("GENAI_BRIDGE_LOG=\"on\""),
        "{err}"
    );
}

#[test]
fn every_setting_is_described_defaults_included() {
    let config = config_with_budget(None);
    let defaults = parse(&[], &config, &OpenOptions::default()).expect("defaults");
    let described = defaults.describe();
    assert_eq!(
        described[..3],
        [
            ("backend", "auto".to_string()),
            ("vram_budget", "none".to_string()),
            ("log", "0".to_string()),
        ]
    );
    // Then every native tuning variable, under its own name, with its default.
    let variables = genai_backend_native::settings::VARIABLES;
    let native: Vec<&str> = described[3..3 + variables.len()]
        .iter()
        .map(|(name, _)| *name)
        .collect();
    assert_eq!(native, variables);
    assert!(described.contains(&("GENAI_BRIDGE_CUDA_GRAPH", "1".to_string())));
    let set = parse(
        &[
            (BACKEND_ENV, "ort"),
            (VRAM_BUDGET_ENV, "50%"),
            (LOG_ENV, "1"),
            ("GENAI_BRIDGE_CUDA_GRAPH", "0"),
        ],
        &config,
        &OpenOptions::default(),
    )
    .expect("set");
    let described = set.describe();
    assert!(described.contains(&("GENAI_BRIDGE_CUDA_GRAPH", "0".to_string())));
    assert_eq!(
        described[..3],
        [
            ("backend", "ort".to_string()),
            (
                "vram_budget",
                "50% from GENAI_BRIDGE_VRAM_BUDGET".to_string()
            ),
            ("log", "1".to_string()),
        ]
    );
}

#[test]
fn a_malformed_native_setting_is_one_error_naming_the_variable() {
    let config = config_with_budget(None);
    let err = parse(
        &[("GENAI_BRIDGE_CUDA_GRAPH", "maybe")],
        &config,
        &OpenOptions::default(),
    )
    .expect_err("maybe is not 0 or 1");
    let text = err.to_string();
    assert!(
        text.starts_with("GENAI_BRIDGE_CUDA_GRAPH=\"maybe\" is not accepted: expected "),
        "{text}"
    );
}

#[test]
fn the_onnx_runtime_search_reads_both_variables_and_empty_is_unset() {
    let config = config_with_budget(None);
    let options = OpenOptions::default();
    let both = parse(
        &[(DYLIB_PATH_ENV, "a/libonnxruntime.so"), (LIB_PATH_ENV, "b")],
        &config,
        &options,
    )
    .expect("paths");
    assert_eq!(
        both.ort_search.dylib_path,
        Some(std::path::PathBuf::from("a/libonnxruntime.so"))
    );
    assert_eq!(
        both.ort_search.lib_path,
        Some(std::path::PathBuf::from("b"))
    );
    let described = both.describe();
    assert!(described.contains(&(DYLIB_PATH_ENV, "a/libonnxruntime.so".to_string())));
    let empty = parse(&[(DYLIB_PATH_ENV, "")], &config, &options).expect("empty");
    assert_eq!(empty.ort_search.dylib_path, None);
    assert!(
        empty
            .describe()
            .contains(&(DYLIB_PATH_ENV, "none".to_string()))
    );
}
