//! Shared helpers for the lifting tests: locating fixtures, loading a model folder, the graph-only
//! builder variants (weights zero-filled on the fly), and hand-broken copies of a fixture.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use genai_config::Config;
use genai_frontend::{DecoderPlan, Unsupported, lift};
use genai_onnx::OnnxModel;
use genai_onnx::proto::attribute_proto::AttributeType;
use genai_onnx::proto::{AttributeProto, ModelProto, NodeProto};
use prost::Message;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

fn manifest() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn must_exist(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.is_dir(),
        "{what} missing: {} (run from the workspace checkout with its models/ and ../shared)",
        path.display()
    );
    path
}

/// `models/fixtures/NAME` (committed builder fixtures with weights).
pub fn fixture(name: &str) -> PathBuf {
    must_exist(
        manifest().join("../../models/fixtures").join(name),
        "fixture",
    )
}

/// The official runtime's own tiny gpt2 model.
pub fn conformance_gpt2() -> PathBuf {
    must_exist(
        manifest().join("../../../shared/conformance/tiny-random-gpt2-fp32"),
        "conformance model",
    )
}

/// Every fixture folder under `models/fixtures`.
pub fn all_fixtures() -> Vec<String> {
    let dir = manifest().join("../../models/fixtures");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixtures folder {}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("genai_config.json").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Loads a model folder and lifts it.
pub fn lift_dir(
    dir: &Path,
) -> Result<Result<DecoderPlan, Unsupported>, Box<dyn std::error::Error>> {
    let config = Config::load(dir)?;
    let model = OnnxModel::load(&config.decoder_path())?;
    Ok(lift(&model, &config))
}

/// Lifts a folder that must lift.
pub fn plan(dir: &Path) -> Result<DecoderPlan, Box<dyn std::error::Error>> {
    match lift_dir(dir)? {
        Ok(plan) => Ok(plan),
        Err(e) => Err(format!("{} did not lift: {e}", dir.display()).into()),
    }
}

/// Lifts a folder that must not lift.
pub fn unsupported(dir: &Path) -> Result<Unsupported, Box<dyn std::error::Error>> {
    match lift_dir(dir)? {
        Ok(_) => Err(format!("{} lifted, but should not have", dir.display()).into()),
        Err(e) => Ok(e),
    }
}

/// Writes `model` as `file` into a fresh temp dir with `config` (genai_config.json text). Its
/// external data files are copied from `data_from` when there, else zero-filled, long enough for
/// every initializer that points into them (the lifter reads shapes, never weight values).
fn write_model(
    model: &ModelProto,
    file: &str,
    config: &str,
    data_from: Option<&Path>,
) -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let mut sizes: HashMap<String, u64> = HashMap::new();
    for t in model.graph.iter().flat_map(|g| &g.initializer) {
        let get = |k: &str| {
            t.external_data
                .iter()
                .find(|e| e.key == k)
                .map(|e| e.value.clone())
        };
        if let Some(location) = get("location") {
            let offset: u64 = get("offset").map_or(Ok(0), |v| v.parse())?;
            let length: u64 = get("length").map_or(Ok(0), |v| v.parse())?;
            let end = sizes.entry(location).or_default();
            *end = (*end).max(offset + length);
        }
    }
    for (location, size) in sizes {
        match data_from.map(|d| d.join(&location)).filter(|p| p.is_file()) {
            Some(src) => {
                std::fs::copy(src, dir.path().join(&location))?;
            }
            None => std::fs::File::create(dir.path().join(&location))?.set_len(size)?,
        }
    }
    std::fs::write(dir.path().join(file), model.encode_to_vec())?;
    std::fs::write(dir.path().join("genai_config.json"), config)?;
    Ok(dir)
}

/// A graph-only builder variant from `tests/fixtures/NAME`, with zero weights.
pub fn variant(name: &str) -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    variant_with(name, |_| {})
}

/// A variant whose graph `edit` has changed.
pub fn variant_with(
    name: &str,
    edit: impl FnOnce(&mut ModelProto),
) -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    let src = must_exist(manifest().join("tests/fixtures").join(name), "variant");
    let mut model = ModelProto::decode(std::fs::read(src.join("model.onnx"))?.as_slice())?;
    edit(&mut model);
    let config = std::fs::read_to_string(src.join("genai_config.json"))?;
    write_model(&model, "model.onnx", &config, None)
}

/// A copy of the model folder `dir` whose graph `edit` and config text `edit_config` have
/// changed, beside a copy of its external data.
pub fn broken_dir(
    dir: &Path,
    edit: impl FnOnce(&mut ModelProto),
    edit_config: impl FnOnce(String) -> String,
) -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    let config = Config::load(dir)?;
    let file = config.model.decoder.filename.clone();
    let mut model = ModelProto::decode(std::fs::read(config.decoder_path())?.as_slice())?;
    edit(&mut model);
    let text = edit_config(std::fs::read_to_string(dir.join("genai_config.json"))?);
    write_model(&model, &file, &text, Some(dir))
}

/// A copy of fixture `name` whose graph `edit` has changed.
pub fn broken(
    name: &str,
    edit: impl FnOnce(&mut ModelProto),
) -> Result<tempfile::TempDir, Box<dyn std::error::Error>> {
    broken_dir(&fixture(name), edit, |c| c)
}

/// The graph's nodes, for editing.
pub fn nodes(model: &mut ModelProto) -> &mut Vec<NodeProto> {
    &mut model.graph.as_mut().expect("fixture has a graph").node
}

/// The first node of `op_type`.
pub fn first_op<'a>(model: &'a mut ModelProto, op_type: &str) -> &'a mut NodeProto {
    nodes(model)
        .iter_mut()
        .find(|n| n.op_type == op_type)
        .unwrap_or_else(|| panic!("no {op_type} node"))
}

/// The node named `name` (tests locate what they break by name; the lifter never does).
pub fn named<'a>(model: &'a mut ModelProto, name: &str) -> &'a mut NodeProto {
    nodes(model)
        .iter_mut()
        .find(|n| n.name == name)
        .unwrap_or_else(|| panic!("no node named {name}"))
}

/// A node of `op_type` in the default domain.
pub fn node(name: &str, op_type: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        name: name.to_string(),
        op_type: op_type.to_string(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// Adds a graph output named `name` (no type information).
pub fn add_output(model: &mut ModelProto, name: &str) {
    let graph = model.graph.as_mut().expect("fixture has a graph");
    graph.output.push(genai_onnx::proto::ValueInfoProto {
        name: name.to_string(),
        ..Default::default()
    });
}

/// Asserts `e` names `node` (of `op_type`) and its reason contains `reason`.
#[track_caller]
pub fn assert_unsupported(e: &Unsupported, node: &str, op_type: &str, reason: &str) {
    assert_eq!(e.node, node, "wrong node in: {e}");
    assert_eq!(e.op_type, op_type, "wrong op in: {e}");
    assert!(
        e.reason.contains(reason),
        "reason {:?} lacks {reason:?}",
        e.reason
    );
}

/// Sets (or adds) integer attribute `name` of node `node`.
pub fn int_attr(model: &mut ModelProto, node: &str, name: &str, value: i64) {
    let n = named(model, node);
    match n.attribute.iter_mut().find(|a| a.name == name) {
        Some(a) => a.i = value,
        None => n.attribute.push(AttributeProto {
            name: name.to_string(),
            r#type: AttributeType::Int as i32,
            i: value,
            ..Default::default()
        }),
    }
}

/// Sets float attribute `name` of node `node`.
pub fn float_attr(model: &mut ModelProto, node: &str, name: &str, value: f32) {
    let n = named(model, node);
    let a = n
        .attribute
        .iter_mut()
        .find(|a| a.name == name)
        .expect("attribute");
    a.f = value;
}

/// Changes an initializer's dims (keep the element count: the data stays the same).
pub fn initializer_dims(model: &mut ModelProto, name: &str, dims: &[i64]) {
    let graph = model.graph.as_mut().expect("graph");
    let t = graph
        .initializer
        .iter_mut()
        .find(|t| t.name == name)
        .expect("initializer");
    t.dims = dims.to_vec();
}
