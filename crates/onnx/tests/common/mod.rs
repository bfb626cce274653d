//! Helpers shared by the integration tests: build small ModelProtos with
//! prost and write them (and their external data) into a directory.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use genai_onnx::DataType;
use genai_onnx::proto::tensor_proto::DataLocation;
use genai_onnx::proto::tensor_shape_proto::{Dimension, dimension};
use genai_onnx::proto::type_proto::{self, Value};
use genai_onnx::proto::{
    GraphProto, ModelProto, NodeProto, OperatorSetIdProto, StringStringEntryProto, TensorProto,
    TensorShapeProto, TypeProto, ValueInfoProto,
};
use prost::Message;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A tensor with name, type and dims but no data yet.
pub fn tensor(name: &str, dtype: DataType, dims: &[i64]) -> TensorProto {
    TensorProto {
        name: name.into(),
        data_type: dtype.to_onnx(),
        dims: dims.to_vec(),
        ..Default::default()
    }
}

/// A tensor whose data lives in an external file; `None` leaves a key out.
pub fn external(
    name: &str,
    dtype: DataType,
    dims: &[i64],
    location: &str,
    offset: Option<&str>,
    length: Option<&str>,
) -> TensorProto {
    let mut t = tensor(name, dtype, dims);
    t.data_location = DataLocation::External as i32;
    let keys = [
        ("location", Some(location)),
        ("offset", offset),
        ("length", length),
    ];
    for (key, value) in keys {
        if let Some(value) = value {
            t.external_data.push(StringStringEntryProto {
                key: key.into(),
                value: value.into(),
            });
        }
    }
    t
}

/// A tensor-typed value with a shape of numbers ("3"), names ("batch")
/// or unknown dims ("?").
pub fn value(name: &str, dtype: DataType, shape: &[&str]) -> ValueInfoProto {
    let dim = |d: &&str| Dimension {
        value: match (*d, d.parse::<i64>()) {
            ("?", _) => None,
            (_, Ok(n)) => Some(dimension::Value::DimValue(n)),
            (_, Err(_)) => Some(dimension::Value::DimParam((*d).into())),
        },
        denotation: String::new(),
    };
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(Value::TensorType(type_proto::Tensor {
                elem_type: dtype.to_onnx(),
                shape: Some(TensorShapeProto {
                    dim: shape.iter().map(dim).collect(),
                }),
            })),
            denotation: String::new(),
        }),
        ..Default::default()
    }
}

pub fn node(domain: &str, op_type: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        domain: domain.into(),
        op_type: op_type.into(),
        input: inputs.iter().map(|s| (*s).into()).collect(),
        output: outputs.iter().map(|s| (*s).into()).collect(),
        ..Default::default()
    }
}

/// A model `y = MatMul(x, <first initializer>)` holding `initializers`.
pub fn model(initializers: Vec<TensorProto>) -> ModelProto {
    let weight = initializers
        .first()
        .map(|t| t.name.clone())
        .unwrap_or_default();
    ModelProto {
        ir_version: 10,
        producer_name: "genai-onnx-tests".into(),
        producer_version: "1".into(),
        opset_import: vec![
            OperatorSetIdProto {
                domain: String::new(),
                version: 21,
            },
            OperatorSetIdProto {
                domain: "com.microsoft".into(),
                version: 1,
            },
        ],
        graph: Some(GraphProto {
            name: "test".into(),
            node: vec![node("", "MatMul", &["x", &weight], &["y"])],
            input: vec![value("x", DataType::Float, &["batch", "3"])],
            output: vec![value("y", DataType::Float, &["batch", "?"])],
            initializer: initializers,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Encodes `model` to `dir/model.onnx` and returns that path.
pub fn write_model(dir: &Path, model: &ModelProto) -> std::io::Result<PathBuf> {
    let path = dir.join("model.onnx");
    std::fs::write(&path, model.encode_to_vec())?;
    Ok(path)
}

pub fn f32_bytes(values: &[f32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}
