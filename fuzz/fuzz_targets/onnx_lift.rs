//! Fuzz target `onnx_lift`: ONNX model decoding with external-data resolution, then the front
//! end's lifting, on hostile models. Two modes, chosen by the first byte:
//!
//! - raw (even): the bytes are written as `model.onnx` in a temporary folder (with a second
//!   slice as `model.onnx.data`, or a fixture's real data file), loaded with
//!   `OnnxModel::load` and lifted against that fixture's config;
//! - structured (odd): a real fixture graph is decoded and mutated (wrong shapes, dtypes,
//!   attributes, dangling inputs, cycles, huge declared dims, bad external-data entries), then
//!   written, loaded and lifted the same way.
//!
//! Nothing may panic, hang or allocate without bound: each failure must be an `Error` of
//! `genai-onnx` or an `Unsupported` of `genai-frontend`.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use arbitrary::{Arbitrary, Unstructured};
use genai_config::Config;
use genai_onnx::OnnxModel;
use genai_onnx::proto::tensor_shape_proto::{Dimension, dimension};
use genai_onnx::proto::type_proto;
use genai_onnx::proto::{
    AttributeProto, ModelProto, NodeProto, StringStringEntryProto, TensorProto, ValueInfoProto,
};
use libfuzzer_sys::fuzz_target;
use prost::Message;
use tempfile::TempDir;

/// Fixtures covering the lifted families and weight formats (fp32, fp16, bf16, int4).
const FIXTURES: &[&str] = &[
    "qwen2-fp32-cpu",
    "llama-fp32-cpu",
    "phi3-fp32-cpu",
    "qwen3-fp32-cpu",
    "qwen2-int4-cpu",
    "llama-fp16-cuda",
    "llama-bf16-cuda",
];

struct Fixture {
    config: Config,
    model: ModelProto,
    /// A private folder holding a copy of the fixture's external data file.
    dir: TempDir,
}

struct State {
    fixtures: Vec<Fixture>,
    /// A folder for raw inputs that bring their own external data.
    own_data: TempDir,
}

static STATE: LazyLock<State> = LazyLock::new(|| {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/fixtures");
    let fixtures = FIXTURES
        .iter()
        .map(|name| {
            let src = root.join(name);
            let config = Config::load(&src).expect("fixture config loads");
            let bytes = std::fs::read(src.join("model.onnx")).expect("fixture model reads");
            let model = ModelProto::decode(bytes.as_slice()).expect("fixture model decodes");
            let dir = tempfile::tempdir().expect("temp dir");
            std::fs::copy(
                src.join("model.onnx.data"),
                dir.path().join("model.onnx.data"),
            )
            .expect("fixture data copies");
            Fixture { config, model, dir }
        })
        .collect();
    State {
        fixtures,
        own_data: tempfile::tempdir().expect("temp dir"),
    }
});

/// Writes `model.onnx`, loads it and lifts it; errors are the expected outcome.
fn load_and_lift(dir: &Path, model: &[u8], config: &Config) {
    let path = dir.join("model.onnx");
    std::fs::write(&path, model).expect("temp model writes");
    let Ok(onnx) = OnnxModel::load(&path) else {
        return;
    };
    let _ = onnx.report();
    for t in onnx.initializers() {
        let _ = (t.num_elements(), t.byte_len());
        if t.byte_len().is_ok_and(|n| n <= 1 << 16) {
            let _ = (t.to_f32_vec(), t.to_i64_vec(), t.bytes());
        }
    }
    let _ = genai_frontend::lift(&onnx, config);
}

fn raw(state: &State, selector: u8, rest: &[u8]) {
    // Next 4 bytes: the model's length; what follows it is the external data file (if any).
    let (len, body) = match rest.split_first_chunk::<4>() {
        Some((len, body)) => (u32::from_le_bytes(*len) as usize, body),
        None => (rest.len(), rest),
    };
    let (model, data) = body.split_at(len.min(body.len()));
    let fixture = &state.fixtures[usize::from(selector >> 1) % state.fixtures.len()];
    if data.is_empty() {
        load_and_lift(fixture.dir.path(), model, &fixture.config);
    } else {
        let dir = state.own_data.path();
        std::fs::write(dir.join("model.onnx.data"), data).expect("temp data writes");
        load_and_lift(dir, model, &fixture.config);
    }
}

/// Numbers that break size arithmetic and range checks.
fn interesting_i64(u: &mut Unstructured<'_>) -> arbitrary::Result<i64> {
    const VALUES: &[i64] = &[
        0,
        1,
        -1,
        2,
        3,
        4,
        7,
        8,
        16,
        32,
        64,
        128,
        -2,
        i32::MAX as i64,
        1 << 31,
        1 << 32,
        1 << 40,
        1 << 62,
        i64::MAX,
        i64::MIN,
    ];
    if u.ratio(1, 4)? {
        i64::arbitrary(u)
    } else {
        Ok(*u.choose(VALUES)?)
    }
}

fn mutate_dims(u: &mut Unstructured<'_>, dims: &mut Vec<i64>) -> arbitrary::Result<()> {
    match u.int_in_range(0..=3)? {
        0 if !dims.is_empty() => {
            let i = u.choose_index(dims.len())?;
            dims[i] = interesting_i64(u)?;
        }
        1 => dims.push(interesting_i64(u)?),
        2 => {
            dims.pop();
        }
        _ => {
            if !dims.is_empty() {
                let i = u.choose_index(dims.len())?;
                dims.swap(0, i);
            }
        }
    }
    Ok(())
}

fn pick<'a, T>(
    u: &mut Unstructured<'_>,
    items: &'a mut [T],
) -> arbitrary::Result<Option<&'a mut T>> {
    if items.is_empty() {
        return Ok(None);
    }
    let i = u.choose_index(items.len())?;
    Ok(Some(&mut items[i]))
}

/// Names of attributes the front end reads.
const ATTRS: &[&str] = &[
    "axis",
    "epsilon",
    "num_heads",
    "kv_num_heads",
    "K",
    "N",
    "bits",
    "block_size",
    "accuracy_level",
    "interleaved",
    "scale",
    "softcap",
    "do_rotary",
    "rotary_embedding_dim",
    "local_window_size",
    "transA",
    "transB",
    "alpha",
    "beta",
    "to",
    "perm",
    "keepdims",
    "axes",
    "stash_type",
    "unidirectional",
    "is_packed_batching",
];

/// Operators of the decoders the front end knows, and a few it does not.
const OPS: &[&str] = &[
    "MatMul",
    "MatMulNBits",
    "Add",
    "Mul",
    "Gather",
    "GroupQueryAttention",
    "SimplifiedLayerNormalization",
    "SkipSimplifiedLayerNormalization",
    "LayerNormalization",
    "SkipLayerNormalization",
    "RotaryEmbedding",
    "Sigmoid",
    "Cast",
    "Reshape",
    "Transpose",
    "ReduceSum",
    "Sub",
    "Shape",
    "Identity",
    "Softmax",
    "Attention",
    "MultiHeadAttention",
    "",
];

fn mutate_attribute(u: &mut Unstructured<'_>, a: &mut AttributeProto) -> arbitrary::Result<()> {
    match u.int_in_range(0..=7)? {
        0 => a.i = interesting_i64(u)?,
        1 => a.f = f32::arbitrary(u)?,
        2 => mutate_dims(u, &mut a.ints)?,
        3 => a.r#type = u.int_in_range(-1..=15)?,
        4 => a.name = u.choose(ATTRS)?.to_string(),
        5 => a.floats.push(f32::arbitrary(u)?),
        6 => a.s = Vec::<u8>::arbitrary(u)?,
        _ => {
            a.t = Some(TensorProto {
                dims: vec![interesting_i64(u)?],
                data_type: u.int_in_range(0..=26)?,
                raw_data: Vec::<u8>::arbitrary(u)?,
                ..Default::default()
            })
        }
    }
    Ok(())
}

fn mutate_value_info(u: &mut Unstructured<'_>, v: &mut ValueInfoProto) -> arbitrary::Result<()> {
    let ty = v.r#type.get_or_insert_with(Default::default);
    let Some(type_proto::Value::TensorType(tensor)) = &mut ty.value else {
        ty.value = Some(type_proto::Value::TensorType(type_proto::Tensor {
            elem_type: u.int_in_range(0..=26)?,
            shape: None,
        }));
        return Ok(());
    };
    if u.ratio(1, 4)? {
        tensor.elem_type = u.int_in_range(-1..=30)?;
        return Ok(());
    }
    let shape = tensor.shape.get_or_insert_with(Default::default);
    let dim = match u.int_in_range(0..=2)? {
        0 => Some(dimension::Value::DimValue(interesting_i64(u)?)),
        1 => Some(dimension::Value::DimParam(String::arbitrary(u)?)),
        _ => None,
    };
    if shape.dim.is_empty() || u.ratio(1, 4)? {
        shape.dim.push(Dimension {
            value: dim,
            denotation: String::new(),
        });
    } else {
        let i = u.choose_index(shape.dim.len())?;
        shape.dim[i].value = dim;
    }
    Ok(())
}

/// One structural change to the model.
fn mutate(u: &mut Unstructured<'_>, m: &mut ModelProto) -> arbitrary::Result<()> {
    let Some(g) = m.graph.as_mut() else {
        return Ok(());
    };
    let outputs: Vec<String> = g.node.iter().flat_map(|n| n.output.clone()).collect();
    match u.int_in_range(0..=19)? {
        // Initializers: shape, dtype, external-data entries, inline data, removal.
        0 => {
            if let Some(t) = pick(u, &mut g.initializer)? {
                mutate_dims(u, &mut t.dims)?;
            }
        }
        1 => {
            if let Some(t) = pick(u, &mut g.initializer)? {
                t.data_type = u.int_in_range(-1..=30)?;
            }
        }
        2 => {
            if let Some(t) = pick(u, &mut g.initializer)? {
                let key = *u.choose(&["location", "offset", "length", "checksum"])?;
                let value = match u.int_in_range(0..=4)? {
                    0 => interesting_i64(u)?.to_string(),
                    1 => interesting_i64(u)?.unsigned_abs().to_string(),
                    2 => u
                        .choose(&[
                            "model.onnx",
                            "../model.onnx.data",
                            "/dev/zero",
                            "",
                            ".",
                            "x/y",
                        ])?
                        .to_string(),
                    _ => String::arbitrary(u)?,
                };
                match t.external_data.iter_mut().find(|e| e.key == key) {
                    Some(e) if u.ratio(3, 4)? => e.value = value,
                    _ => t.external_data.push(StringStringEntryProto {
                        key: key.to_string(),
                        value,
                    }),
                }
            }
        }
        3 => {
            if let Some(t) = pick(u, &mut g.initializer)? {
                t.data_location = 0;
                t.external_data.clear();
                match u.int_in_range(0..=3)? {
                    0 => t.raw_data = Vec::<u8>::arbitrary(u)?,
                    1 => t.float_data = Vec::<f32>::arbitrary(u)?,
                    2 => t.int32_data = Vec::<i32>::arbitrary(u)?,
                    _ => t.int64_data = Vec::<i64>::arbitrary(u)?,
                }
            }
        }
        4 => {
            if !g.initializer.is_empty() {
                let i = u.choose_index(g.initializer.len())?;
                g.initializer.remove(i);
            }
        }
        // Nodes: dangling inputs, cycles, duplicated outputs, op types, domains.
        5 => {
            if let Some(n) = pick(u, &mut g.node)?
                && !n.input.is_empty()
            {
                let i = u.choose_index(n.input.len())?;
                n.input[i] = format!("dangling_{}", u8::arbitrary(u)?);
            }
        }
        6 => {
            // A cycle: an input of node i becomes the output of node j >= i.
            if !g.node.is_empty() && !outputs.is_empty() {
                let i = u.choose_index(g.node.len())?;
                let out = u.choose(&outputs)?.clone();
                let n = &mut g.node[i];
                if n.input.is_empty() {
                    n.input.push(out);
                } else {
                    let k = u.choose_index(n.input.len())?;
                    n.input[k] = out;
                }
            }
        }
        7 => {
            if let Some(n) = pick(u, &mut g.node)?
                && !n.output.is_empty()
                && !outputs.is_empty()
            {
                let k = u.choose_index(n.output.len())?;
                n.output[k] = u.choose(&outputs)?.clone();
            }
        }
        8 => {
            if let Some(n) = pick(u, &mut g.node)? {
                n.op_type = u.choose(OPS)?.to_string();
            }
        }
        9 => {
            if let Some(n) = pick(u, &mut g.node)? {
                n.domain = u
                    .choose(&["", "com.microsoft", "ai.onnx", "x"])?
                    .to_string();
            }
        }
        10 => {
            if !g.node.is_empty() {
                let i = u.choose_index(g.node.len())?;
                g.node.remove(i);
            }
        }
        11 => {
            if !g.node.is_empty() {
                let i = u.choose_index(g.node.len())?;
                let copy: NodeProto = g.node[i].clone();
                g.node.push(copy);
            }
        }
        12 => {
            if let Some(n) = pick(u, &mut g.node)? {
                match u.int_in_range(0..=2)? {
                    0 => n.input.push(String::new()),
                    1 => {
                        n.input.pop();
                    }
                    _ => {
                        n.output.pop();
                    }
                }
            }
        }
        // Attributes: values, types, names, removal, additions.
        13 => {
            if let Some(n) = pick(u, &mut g.node)?
                && let Some(a) = pick(u, &mut n.attribute)?
            {
                mutate_attribute(u, a)?;
            }
        }
        14 => {
            if let Some(n) = pick(u, &mut g.node)? {
                if !n.attribute.is_empty() && u.ratio(1, 2)? {
                    let i = u.choose_index(n.attribute.len())?;
                    n.attribute.remove(i);
                } else {
                    let mut a = AttributeProto {
                        name: u.choose(ATTRS)?.to_string(),
                        r#type: u.int_in_range(1..=8)?,
                        ..Default::default()
                    };
                    mutate_attribute(u, &mut a)?;
                    n.attribute.push(a);
                }
            }
        }
        // Graph inputs, outputs and value infos: declared shapes and types.
        15 => {
            if let Some(v) = pick(u, &mut g.input)? {
                mutate_value_info(u, v)?;
            }
        }
        16 => {
            if let Some(v) = pick(u, &mut g.output)? {
                mutate_value_info(u, v)?;
            }
        }
        17 => {
            if let Some(v) = pick(u, &mut g.input)? {
                v.name = format!("renamed_{}", u8::arbitrary(u)?);
            }
        }
        18 => {
            if let Some(o) = pick(u, &mut m.opset_import)? {
                o.version = interesting_i64(u)?;
            }
        }
        _ => {
            if !g.output.is_empty() {
                let i = u.choose_index(g.output.len())?;
                g.output.remove(i);
            }
        }
    }
    Ok(())
}

fn structured(state: &State, selector: u8, rest: &[u8]) {
    let fixture = &state.fixtures[usize::from(selector >> 1) % state.fixtures.len()];
    let mut model = fixture.model.clone();
    let mut u = Unstructured::new(rest);
    let Ok(count) = u.int_in_range(1..=8u8) else {
        return;
    };
    for _ in 0..count {
        if mutate(&mut u, &mut model).is_err() {
            break;
        }
    }
    load_and_lift(fixture.dir.path(), &model.encode_to_vec(), &fixture.config);
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let state = &*STATE;
    if selector & 1 == 0 {
        raw(state, selector, rest);
    } else {
        structured(state, selector, rest);
    }
});
