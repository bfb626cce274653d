//! `ModelReport`: a serializable summary of a model (interface, opsets,
//! operator histogram, weight sizes), also printable as text.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde::Serialize;

use crate::OnnxModel;
use crate::dtype::code_name;
use crate::proto::type_proto::Value;
use crate::proto::{TensorShapeProto, ValueInfoProto, tensor_shape_proto::dimension};

/// A summary of one model. Domain "" is reported as "ai.onnx".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelReport {
    pub ir_version: i64,
    /// `producer_name` and `producer_version`, space separated.
    pub producer: String,
    pub opsets: Vec<(String, i64)>,
    /// Graph inputs that are not initializers.
    pub inputs: Vec<ValueReport>,
    pub outputs: Vec<ValueReport>,
    /// Top-level nodes per (domain, op_type), most frequent first (ties by
    /// domain, then op_type).
    pub op_histogram: Vec<OpCount>,
    /// Dense initializers per element type, largest first (ties in ONNX
    /// type-code order).
    pub weights: Vec<WeightBytes>,
    pub total_weight_bytes: u64,
    /// External data files (location, file size in bytes).
    pub external_files: Vec<(String, u64)>,
    /// Nodes in the main graph (not counting subgraphs).
    pub node_count: usize,
}

/// A graph input or output.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ValueReport {
    pub name: String,
    /// Element type name ("float", "int64" ...), or the kind for non-tensors.
    pub dtype: String,
    /// Each dim: a number, a symbolic name like "batch_size", or "?".
    pub shape: Vec<String>,
    /// False when the type carries no shape at all (rank unknown).
    pub rank_known: bool,
}

/// How many nodes use one operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct OpCount {
    pub domain: String,
    pub op_type: String,
    pub count: usize,
}

/// Initializer totals for one element type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WeightBytes {
    pub dtype: String,
    pub count: usize,
    pub bytes: u64,
}

fn canonical_domain(domain: &str) -> String {
    if domain.is_empty() { "ai.onnx" } else { domain }.to_string()
}

impl OnnxModel {
    /// A summary of the model's interface, operators and weights.
    pub fn report(&self) -> ModelReport {
        ModelReport::new(self)
    }
}

impl ModelReport {
    fn new(model: &OnnxModel) -> Self {
        let proto = model.proto();
        let graph = model.graph();
        let initializers: HashSet<&str> =
            graph.initializer.iter().map(|t| t.name.as_str()).collect();

        let mut ops: BTreeMap<(String, &str), usize> = BTreeMap::new();
        for node in &graph.node {
            *ops.entry((canonical_domain(&node.domain), &node.op_type))
                .or_default() += 1;
        }
        let mut op_histogram: Vec<OpCount> = ops
            .into_iter()
            .map(|((domain, op_type), count)| OpCount {
                domain,
                op_type: op_type.to_string(),
                count,
            })
            .collect();
        op_histogram.sort_by_key(|o| std::cmp::Reverse(o.count));

        let mut by_type: BTreeMap<_, (usize, u64)> = BTreeMap::new();
        for t in model.initializers() {
            let entry = by_type.entry(t.dtype).or_default();
            entry.0 += 1;
            entry.1 = entry.1.saturating_add(t.byte_len().unwrap_or(0));
        }
        let mut weights: Vec<WeightBytes> = by_type
            .into_iter()
            .map(|(dtype, (count, bytes))| WeightBytes {
                dtype: dtype.name().to_string(),
                count,
                bytes,
            })
            .collect();
        weights.sort_by_key(|w| std::cmp::Reverse(w.bytes));

        Self {
            ir_version: proto.ir_version,
            producer: format!("{} {}", proto.producer_name, proto.producer_version)
                .trim()
                .to_string(),
            opsets: proto
                .opset_import
                .iter()
                .map(|o| (canonical_domain(&o.domain), o.version))
                .collect(),
            inputs: graph
                .input
                .iter()
                .filter(|v| !initializers.contains(v.name.as_str()))
                .map(value_report)
                .collect(),
            outputs: graph.output.iter().map(value_report).collect(),
            op_histogram,
            total_weight_bytes: weights.iter().fold(0, |sum, w| sum.saturating_add(w.bytes)),
            weights,
            external_files: model
                .external_files()
                .map(|f| (f.location.display().to_string(), f.size()))
                .collect(),
            node_count: graph.node.len(),
        }
    }
}

fn value_report(v: &ValueInfoProto) -> ValueReport {
    let value = v.r#type.as_ref().and_then(|t| t.value.as_ref());
    let (dtype, shape) = match value {
        Some(Value::TensorType(t)) => (code_name(t.elem_type), t.shape.as_ref()),
        Some(Value::SparseTensorType(t)) => (
            format!("sparse({})", code_name(t.elem_type)),
            t.shape.as_ref(),
        ),
        Some(Value::SequenceType(_)) => ("sequence".to_string(), None),
        Some(Value::MapType(_)) => ("map".to_string(), None),
        Some(Value::OptionalType(_)) => ("optional".to_string(), None),
        Some(Value::OpaqueType(_)) => ("opaque".to_string(), None),
        None => ("unknown".to_string(), None),
    };
    ValueReport {
        name: v.name.clone(),
        dtype,
        shape: shape.map(dims).unwrap_or_default(),
        rank_known: shape.is_some(),
    }
}

fn dims(shape: &TensorShapeProto) -> Vec<String> {
    let dim = |d: &_| match d {
        Some(dimension::Value::DimValue(n)) => n.to_string(),
        Some(dimension::Value::DimParam(p)) if !p.is_empty() => p.clone(),
        _ => "?".to_string(),
    };
    shape.dim.iter().map(|d| dim(&d.value)).collect()
}

/// "12.3 MiB" style size.
fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    match unit {
        0 => format!("{bytes} B"),
        _ => format!("{value:.1} {}", UNITS[unit]),
    }
}

fn write_values(f: &mut fmt::Formatter<'_>, title: &str, values: &[ValueReport]) -> fmt::Result {
    writeln!(f, "{title} ({}):", values.len())?;
    let name_w = values.iter().map(|v| v.name.len()).max().unwrap_or(0);
    let type_w = values.iter().map(|v| v.dtype.len()).max().unwrap_or(0);
    for v in values {
        let shape = if v.rank_known {
            format!("[{}]", v.shape.join(", "))
        } else {
            "(rank unknown)".to_string()
        };
        writeln!(f, "  {:name_w$}  {:type_w$}  {shape}", v.name, v.dtype)?;
    }
    Ok(())
}

impl fmt::Display for ModelReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let producer = if self.producer.is_empty() {
            "(unknown)"
        } else {
            &self.producer
        };
        writeln!(f, "IR version: {}   producer: {producer}", self.ir_version)?;
        let opsets: Vec<String> = self
            .opsets
            .iter()
            .map(|(d, v)| format!("{d} {v}"))
            .collect();
        writeln!(f, "opsets: {}", opsets.join(", "))?;
        write_values(f, "inputs", &self.inputs)?;
        write_values(f, "outputs", &self.outputs)?;
        writeln!(f, "nodes: {}", self.node_count)?;
        let domain_w = self
            .op_histogram
            .iter()
            .map(|o| o.domain.len())
            .max()
            .unwrap_or(0);
        for op in &self.op_histogram {
            writeln!(
                f,
                "  {:>6}  {:domain_w$}  {}",
                op.count, op.domain, op.op_type
            )?;
        }
        let count: usize = self.weights.iter().map(|w| w.count).sum();
        let total = self.total_weight_bytes;
        writeln!(
            f,
            "weights: {count} tensors, {} ({total} bytes)",
            human(total)
        )?;
        let type_w = self
            .weights
            .iter()
            .map(|w| w.dtype.len())
            .max()
            .unwrap_or(0);
        for w in &self.weights {
            let size = human(w.bytes);
            writeln!(f, "  {:type_w$}  {:>6} tensors  {size}", w.dtype, w.count)?;
        }
        if !self.external_files.is_empty() {
            writeln!(f, "external data files:")?;
            for (location, size) in &self.external_files {
                writeln!(f, "  {location}  {} ({size} bytes)", human(*size))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::human;

    #[test]
    fn human_sizes() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(3 * 1024 * 1024 * 1024), "3.0 GiB");
    }
}
