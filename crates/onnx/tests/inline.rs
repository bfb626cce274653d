//! Inline initializers (raw_data and the typed fields), type conversions,
//! wire-format compatibility, and model-level errors and reports.

use std::path::Path;

use genai_onnx::proto::{ModelProto, TensorProto};
use genai_onnx::{DataType, Error, OnnxModel, Tensor};
use prost::Message;

mod common;
use common::{TestResult, f32_bytes, model, node, tensor, value};

fn load(m: &ModelProto) -> Result<OnnxModel, Error> {
    OnnxModel::from_bytes(Path::new("mem/model.onnx"), &m.encode_to_vec())
}

fn raw(name: &str, dtype: DataType, dims: &[i64], bytes: &[u8]) -> TensorProto {
    TensorProto {
        raw_data: bytes.to_vec(),
        ..tensor(name, dtype, dims)
    }
}

fn u16_bytes(bits: &[u16]) -> Vec<u8> {
    bits.iter().flat_map(|b| b.to_le_bytes()).collect()
}

#[test]
fn half_precision_to_f32() -> TestResult {
    // float16: 1, -2.5, 65504 (max), 0.5, -0, 2^-24 (smallest subnormal), +inf
    let f16 = [0x3c00, 0xc100, 0x7bff, 0x3800, 0x8000, 0x0001, 0x7c00];
    // bfloat16: 1, -2.5, 3.140625, 2^-133 (a subnormal, 9.18e-41), -inf
    let bf16 = [0x3f80, 0xc020, 0x4049, 0x0001, 0xff80];
    let m = model(vec![
        raw("h", DataType::Float16, &[7], &u16_bytes(&f16)),
        raw("b", DataType::BFloat16, &[5], &u16_bytes(&bf16)),
    ]);
    let model = load(&m)?;
    let h = model.initializer("h").ok_or("h")?.to_f32_vec()?;
    assert_eq!(&h[..4], &[1.0, -2.5, 65504.0, 0.5]);
    assert!(h[4] == 0.0 && h[4].is_sign_negative());
    assert_eq!(h[5], 2f32.powi(-24));
    assert_eq!(h[6], f32::INFINITY);
    let b = model.initializer("b").ok_or("b")?.to_f32_vec()?;
    assert_eq!(
        b,
        vec![
            1.0,
            -2.5,
            3.140625,
            f32::from_bits(0x0001_0000),
            f32::NEG_INFINITY
        ]
    );
    // The same float16 values stored in int32_data (one per entry).
    let mut typed = tensor("t", DataType::Float16, &[2]);
    typed.int32_data = vec![0x3c00, 0xc100];
    assert_eq!(Tensor::from_proto(&typed)?.to_f32_vec()?, vec![1.0, -2.5]);
    Ok(())
}

#[test]
fn typed_fields_become_little_endian_bytes() -> TestResult {
    let mut f = tensor("f", DataType::Float, &[2]);
    f.float_data = vec![1.5, -3.0];
    let mut i8t = tensor("i8", DataType::Int8, &[3]);
    i8t.int32_data = vec![-3, 127, -128];
    let mut u16t = tensor("u16", DataType::Uint16, &[2]);
    u16t.int32_data = vec![65535, 258];
    let mut i64t = tensor("i64", DataType::Int64, &[2, 1]);
    i64t.int64_data = vec![i64::MIN, 42];
    let mut u32t = tensor("u32", DataType::Uint32, &[1]);
    u32t.uint64_data = vec![0xdead_beef];
    let mut d = tensor("d", DataType::Double, &[1]);
    d.double_data = vec![0.25];
    let mut c = tensor("c", DataType::Complex64, &[1]);
    c.float_data = vec![1.0, 2.0];
    let mut b = tensor("b", DataType::Bool, &[2]);
    b.int32_data = vec![1, 0];
    let model = load(&model(vec![f, i8t, u16t, i64t, u32t, d, c, b]))?;
    let get = |n: &str| model.initializer(n).ok_or(format!("missing {n}"));

    assert_eq!(
        get("f")?.bytes()?.as_ref(),
        f32_bytes(&[1.5, -3.0]).as_slice()
    );
    assert_eq!(get("f")?.to_f32_vec()?, vec![1.5, -3.0]);
    assert!(get("f")?.raw_bytes().is_none());
    assert_eq!(get("i8")?.bytes()?.as_ref(), &[0xfd, 0x7f, 0x80]);
    assert_eq!(get("i8")?.to_i64_vec()?, vec![-3, 127, -128]);
    assert_eq!(get("u16")?.bytes()?.as_ref(), &[0xff, 0xff, 0x02, 0x01]);
    assert_eq!(get("u16")?.to_i64_vec()?, vec![65535, 258]);
    assert_eq!(get("i64")?.to_i64_vec()?, vec![i64::MIN, 42]);
    assert_eq!(get("i64")?.bytes()?.len(), 16);
    assert_eq!(get("u32")?.bytes()?.as_ref(), &[0xef, 0xbe, 0xad, 0xde]);
    assert_eq!(get("u32")?.to_i64_vec()?, vec![0xdead_beef]);
    assert_eq!(get("d")?.bytes()?.as_ref(), &0.25f64.to_le_bytes());
    assert_eq!(get("c")?.bytes()?.len(), 8);
    assert_eq!(get("b")?.to_i64_vec()?, vec![1, 0]);
    assert!(matches!(
        get("d")?.to_f32_vec(),
        Err(Error::Conversion {
            dtype: DataType::Double,
            target: "f32",
            ..
        })
    ));
    assert!(matches!(
        get("f")?.to_i64_vec(),
        Err(Error::Conversion { .. })
    ));

    let report = model.report();
    let weights: Vec<(&str, usize, u64)> = report
        .weights
        .iter()
        .map(|w| (w.dtype.as_str(), w.count, w.bytes))
        .collect();
    assert_eq!(
        weights,
        vec![
            ("int64", 1, 16),
            // Ties keep ONNX type-code order.
            ("float", 1, 8),
            ("double", 1, 8),
            ("complex64", 1, 8),
            ("uint16", 1, 4),
            ("uint32", 1, 4),
            ("int8", 1, 3),
            ("bool", 1, 2),
        ]
    );
    assert_eq!(report.total_weight_bytes, 53);
    Ok(())
}

#[test]
fn typed_field_count_must_match_dims() {
    let mut t = tensor("w", DataType::Int64, &[3]);
    t.int64_data = vec![1, 2];
    let err = load(&model(vec![t])).err();
    assert!(
        matches!(&err, Some(Error::ElementCountMismatch { tensor, field: "int64_data", expected: 3, actual: 2, .. })
            if tensor == "w"),
        "{err:?}"
    );
}

#[test]
fn truncated_model_is_a_decode_error_naming_the_file() -> TestResult {
    let big = raw("w", DataType::Float, &[1024], &[7u8; 4096]);
    let bytes = model(vec![big]).encode_to_vec();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("half.onnx");
    std::fs::write(&path, &bytes[..bytes.len() / 2])?;
    let err = OnnxModel::load(&path)
        .err()
        .ok_or("loaded a truncated model")?;
    assert!(
        matches!(&err, Error::Decode { path: p, .. } if *p == path),
        "{err}"
    );
    assert!(err.to_string().contains("half.onnx"), "{err}");
    // The whole file loads.
    std::fs::write(&path, &bytes)?;
    assert_eq!(
        OnnxModel::load(&path)?
            .initializer("w")
            .ok_or("w")?
            .bytes()?
            .len(),
        4096
    );
    Ok(())
}

#[test]
fn missing_model_file_and_missing_graph() -> TestResult {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("nope.onnx");
    let err = OnnxModel::load(&path).err();
    assert!(
        matches!(&err, Some(Error::Io { path: p, .. }) if *p == path),
        "{err:?}"
    );

    let no_graph = ModelProto {
        ir_version: 9,
        ..Default::default()
    };
    let err = load(&no_graph).err();
    assert!(matches!(err, Some(Error::MissingGraph { .. })), "{err:?}");
    Ok(())
}

#[test]
fn duplicate_initializers_are_rejected() {
    let a = raw("w", DataType::Uint8, &[1], &[1]);
    let err = load(&model(vec![a.clone(), a])).err();
    assert!(
        matches!(&err, Some(Error::DuplicateInitializer { name, .. }) if name == "w"),
        "{err:?}"
    );
}

#[test]
fn unknown_data_type_is_rejected() {
    let mut t = raw("w", DataType::Uint8, &[1], &[1]);
    t.data_type = 99;
    let err = load(&model(vec![t])).err();
    assert!(
        matches!(err, Some(Error::UnknownDataType { code: 99, .. })),
        "{err:?}"
    );
}

// --- hand-encoded protobuf, as proto2 writers emit it ---

fn varint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}

fn field(number: u64, wire: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = varint(number << 3 | wire);
    if wire == 2 {
        out.extend(varint(payload.len() as u64));
    }
    out.extend(payload);
    out
}

#[test]
fn unpacked_and_packed_repeated_fields_both_decode() -> TestResult {
    // TensorProto "a": dims 2, 3 unpacked; INT64; int64_data unpacked, incl. -1.
    let mut a = Vec::new();
    a.extend(field(1, 0, &varint(2)));
    a.extend(field(1, 0, &varint(3)));
    a.extend(field(2, 0, &varint(7)));
    for v in [1i64, 2, 3, 4, 5, -1] {
        a.extend(field(7, 0, &varint(v as u64)));
    }
    a.extend(field(8, 2, b"a"));
    // TensorProto "b": dims packed; FLOAT; float_data as unpacked fixed32 entries.
    let mut b = Vec::new();
    b.extend(field(1, 2, &[2]));
    b.extend(field(2, 0, &varint(1)));
    b.extend(field(4, 5, &0.5f32.to_le_bytes()));
    b.extend(field(4, 5, &(-4.0f32).to_le_bytes()));
    b.extend(field(8, 2, b"b"));
    let mut graph = field(5, 2, &a);
    graph.extend(field(5, 2, &b));
    let mut model_bytes = field(1, 0, &varint(8));
    model_bytes.extend(field(7, 2, &graph));
    model_bytes.extend(field(99, 2, b"unknown fields are skipped"));

    let model = OnnxModel::from_bytes(Path::new("wire.onnx"), &model_bytes)?;
    let a = model.initializer("a").ok_or("a")?;
    assert_eq!(a.dims, [2, 3]);
    assert_eq!(a.to_i64_vec()?, vec![1, 2, 3, 4, 5, -1]);
    let b = model.initializer("b").ok_or("b")?;
    assert_eq!(b.dims, [2]);
    assert_eq!(b.to_f32_vec()?, vec![0.5, -4.0]);
    assert_eq!(model.proto().ir_version, 8);
    Ok(())
}

#[test]
fn report_of_a_built_model() -> TestResult {
    let mut m = model(vec![raw(
        "w",
        DataType::Float,
        &[3, 2],
        &f32_bytes(&[0.0; 6]),
    )]);
    let graph = m.graph.as_mut().ok_or("graph")?;
    // Old-style models also list initializers as inputs; the report drops them.
    graph.input.push(value("w", DataType::Float, &["3", "2"]));
    graph
        .node
        .push(node("com.microsoft", "FastGelu", &["y"], &["z"]));
    graph.node.push(node("ai.onnx", "Relu", &["z"], &["r"]));
    graph.node.push(node("", "Relu", &["r"], &["s"]));
    let report = load(&m)?.report();
    assert_eq!(report.inputs.len(), 1);
    assert_eq!(report.inputs[0].name, "x");
    assert_eq!(report.inputs[0].shape, ["batch", "3"]);
    assert_eq!(report.outputs[0].shape, ["batch", "?"]);
    assert!(report.outputs[0].rank_known);
    let ops: Vec<(&str, &str, usize)> = report
        .op_histogram
        .iter()
        .map(|o| (o.domain.as_str(), o.op_type.as_str(), o.count))
        .collect();
    assert_eq!(
        ops,
        vec![
            ("ai.onnx", "Relu", 2),
            ("ai.onnx", "MatMul", 1),
            ("com.microsoft", "FastGelu", 1)
        ]
    );
    assert_eq!(report.node_count, 4);
    assert_eq!(report.total_weight_bytes, 24);
    assert_eq!(report.producer, "genai-onnx-tests 1");
    assert!(report.to_string().contains("[batch, ?]"));
    Ok(())
}

#[test]
fn constant_tensors_from_proto() -> TestResult {
    let t = raw("c", DataType::Int32, &[], &7i32.to_le_bytes());
    let c = Tensor::from_proto(&t)?;
    assert_eq!(c.num_elements()?, 1);
    assert_eq!(c.to_i64_vec()?, vec![7]);
    let ext = common::external("e", DataType::Float, &[1], "x.bin", None, None);
    assert!(matches!(
        Tensor::from_proto(&ext),
        Err(Error::Unsupported { .. })
    ));
    Ok(())
}

#[test]
fn model_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<OnnxModel>();
}
