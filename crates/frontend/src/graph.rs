//! An index over one ONNX graph for the lifter: who produces and who consumes each value (seeing
//! through float-to-float `Cast`s, which change the precision of a step but not what it computes),
//! and which nodes the plan has accounted for. Attribute and constant readers are in `attrs.rs`.

use std::cell::Cell;
use std::collections::{HashMap, HashSet};

use genai_onnx::proto::type_proto::Value as TypeValue;
use genai_onnx::proto::{NodeProto, tensor_shape_proto::dimension};
use genai_onnx::{DataType, OnnxModel};

use crate::error::{Lift, Unsupported};

/// The contrib-op domain of ONNX Runtime.
pub(crate) const MS: &str = "com.microsoft";

/// How deep a chain of casts may be before it is treated as malformed.
const MAX_CAST_CHAIN: usize = 8;

/// Where a value is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use<'m> {
    /// Input `slot` of node `node`.
    Node { node: usize, slot: usize },
    /// The graph output of this name.
    Output(&'m str),
}

/// Producer/consumer maps of one graph, plus the set of nodes the plan accounts for.
pub(crate) struct Graph<'m> {
    pub(crate) model: &'m OnnxModel,
    nodes: &'m [NodeProto],
    producer: HashMap<&'m str, (usize, usize)>,
    consumers: HashMap<&'m str, Vec<(usize, usize)>>,
    inputs: HashSet<&'m str>,
    outputs: HashSet<&'m str>,
    claimed: Vec<Cell<bool>>,
}

impl<'m> Graph<'m> {
    /// Indexes `model`'s main graph; a value produced twice is malformed.
    pub(crate) fn new(model: &'m OnnxModel) -> Lift<Self> {
        let graph = model.graph();
        let nodes = graph.node.as_slice();
        let inputs: HashSet<&str> = graph.input.iter().map(|v| v.name.as_str()).collect();
        let outputs = graph.output.iter().map(|v| v.name.as_str()).collect();
        let mut producer = HashMap::new();
        let mut consumers: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
        let mut g = Graph {
            model,
            nodes,
            producer: HashMap::new(),
            consumers: HashMap::new(),
            inputs,
            outputs,
            claimed: nodes.iter().map(|_| Cell::new(false)).collect(),
        };
        for (i, node) in nodes.iter().enumerate() {
            for (slot, out) in node.output.iter().enumerate() {
                if out.is_empty() {
                    continue;
                }
                if g.inputs.contains(out.as_str()) || model.initializer(out).is_some() {
                    return Err(g.err(i, format!("output `{out}` shadows a graph input or weight")));
                }
                if let Some(&(j, _)) = producer.get(out.as_str()) {
                    let other = g.label(j);
                    return Err(g.err(i, format!("output `{out}` is also produced by {other}")));
                }
                producer.insert(out.as_str(), (i, slot));
            }
            for (slot, input) in node.input.iter().enumerate() {
                if !input.is_empty() {
                    consumers.entry(input.as_str()).or_default().push((i, slot));
                }
            }
        }
        g.producer = producer;
        g.consumers = consumers;
        Ok(g)
    }

    pub(crate) fn node(&self, i: usize) -> &'m NodeProto {
        &self.nodes[i]
    }

    /// The node's name, or `"<op_type> #<index>"` when it has none.
    pub(crate) fn label(&self, i: usize) -> String {
        let n = self.node(i);
        if n.name.is_empty() {
            format!("{} #{i}", n.op_type)
        } else {
            n.name.clone()
        }
    }

    /// An [`Unsupported`] naming node `i`.
    pub(crate) fn err(&self, i: usize, reason: impl Into<String>) -> Unsupported {
        Unsupported {
            node: self.label(i),
            op_type: self.node(i).op_type.clone(),
            reason: reason.into(),
        }
    }

    /// Marks node `i` as accounted for by the plan.
    pub(crate) fn claim(&self, i: usize) {
        self.claimed[i].set(true);
    }

    /// The first node the plan has not accounted for.
    pub(crate) fn first_unclaimed(&self) -> Option<usize> {
        self.claimed.iter().position(|c| !c.get())
    }

    /// Whether node `i` is `op` of `domain` ("" and "ai.onnx" are the same domain).
    pub(crate) fn is_op(&self, i: usize, domain: &str, op: &str) -> bool {
        let n = self.node(i);
        let canon = |d: &str| if d == "ai.onnx" { "" } else { d }.to_string();
        n.op_type == op && canon(&n.domain) == canon(domain)
    }

    /// Input `slot` of node `i`, "" when absent.
    pub(crate) fn input(&self, i: usize, slot: usize) -> &'m str {
        self.node(i).input.get(slot).map_or("", String::as_str)
    }

    /// Output `slot` of node `i`, "" when absent.
    pub(crate) fn output(&self, i: usize, slot: usize) -> &'m str {
        self.node(i).output.get(slot).map_or("", String::as_str)
    }

    pub(crate) fn is_graph_input(&self, name: &str) -> bool {
        self.inputs.contains(name)
    }

    pub(crate) fn graph_outputs(&self) -> impl Iterator<Item = &'m str> + '_ {
        self.model.graph().output.iter().map(|v| v.name.as_str())
    }

    /// The node and output slot producing `value`.
    pub(crate) fn producer(&self, value: &str) -> Option<(usize, usize)> {
        self.producer.get(value).copied()
    }

    /// Static dims of a graph input (`None` for symbolic ones), when its type is a tensor.
    pub(crate) fn input_dims(&self, name: &str) -> Option<Vec<Option<i64>>> {
        let info = self.model.graph().input.iter().find(|v| v.name == name)?;
        let Some(TypeValue::TensorType(t)) = info.r#type.as_ref()?.value.as_ref() else {
            return None;
        };
        let shape = t.shape.as_ref()?;
        Some(
            shape
                .dim
                .iter()
                .map(|d| match d.value {
                    Some(dimension::Value::DimValue(v)) => Some(v),
                    _ => None,
                })
                .collect(),
        )
    }

    /// A `Cast` between float types: the lifted plan ignores it (it only moves a step's precision).
    pub(crate) fn is_float_cast(&self, i: usize) -> bool {
        const FLOATS: [DataType; 3] = [DataType::Float, DataType::Float16, DataType::BFloat16];
        self.is_op(i, "", "Cast")
            && self.node(i).attribute.len() == 1
            && self.attr(i, "to").is_some_and(|a| {
                i32::try_from(a.i)
                    .ok()
                    .and_then(DataType::from_onnx)
                    .is_some_and(|t| FLOATS.contains(&t))
            })
    }

    /// The uses of `value`, looking through float casts (which are claimed on the way).
    pub(crate) fn uses(&self, value: &'m str) -> Vec<Use<'m>> {
        let mut out = Vec::new();
        self.collect_uses(value, 0, &mut out);
        out
    }

    fn collect_uses(&self, value: &'m str, depth: usize, out: &mut Vec<Use<'m>>) {
        if self.outputs.contains(value) {
            out.push(Use::Output(value));
        }
        for &(node, slot) in self.consumers.get(value).map_or(&[][..], Vec::as_slice) {
            if depth < MAX_CAST_CHAIN
                && self.is_float_cast(node)
                && !self.output(node, 0).is_empty()
            {
                self.claim(node);
                self.collect_uses(self.output(node, 0), depth + 1, out);
            } else {
                out.push(Use::Node { node, slot });
            }
        }
    }

    /// Where `value` comes from, looking back through float casts (which are claimed).
    pub(crate) fn source(&self, value: &'m str) -> &'m str {
        let mut v = value;
        for _ in 0..MAX_CAST_CHAIN {
            match self.producer(v) {
                Some((p, _)) if self.is_float_cast(p) => {
                    self.claim(p);
                    v = self.input(p, 0);
                }
                _ => break,
            }
        }
        v
    }

    /// The one use of `value` (an output of node `owner`), which must satisfy `accept`; `want`
    /// says what the plan expects there. Any other use is reported, naming the node at fault.
    pub(crate) fn one_use(
        &self,
        value: &'m str,
        owner: usize,
        want: &str,
        accept: impl Fn(usize, usize) -> bool,
    ) -> Lift<(usize, usize)> {
        let uses = self.uses(value);
        let is_ok = |u: &Use| matches!(*u, Use::Node { node, slot } if accept(node, slot));
        let matching: Vec<(usize, usize)> = uses
            .iter()
            .filter_map(|u| match *u {
                Use::Node { node, slot } if accept(node, slot) => Some((node, slot)),
                _ => None,
            })
            .collect();
        let owner_label = self.label(owner);
        match (matching.as_slice(), uses.iter().find(|u| !is_ok(u))) {
            ([one], None) => Ok(*one),
            ([_], Some(extra)) => Err(self.extra_use(*extra, value, owner, want)),
            ([_, second, ..], _) => Err(self.err(
                second.0,
                format!(
                    "is a second consumer of `{value}` (output of {owner_label}), which the plan \
                     expects to feed only {want}"
                ),
            )),
            ([], Some(Use::Node { node, .. })) => {
                let n = self.node(*node);
                // Name the domain when the op itself is the expected one.
                let domain = if want.contains(n.op_type.as_str()) {
                    format!(" (domain \"{}\")", n.domain)
                } else {
                    String::new()
                };
                Err(self.err(
                    *node,
                    format!(
                        "{}{domain} consumes `{value}` (output of {owner_label}) where the plan \
                         expects {want}",
                        n.op_type
                    ),
                ))
            }
            ([], Some(Use::Output(name))) => Err(self.err(
                owner,
                format!("output `{name}` is a graph output where the plan expects {want}"),
            )),
            ([], None) => Err(self.err(
                owner,
                format!("output `{value}` is not used; the plan expects it to feed {want}"),
            )),
        }
    }

    /// Reports `extra`, a use of `value` (output of `owner`) that the plan does not expect.
    pub(crate) fn extra_use(
        &self,
        extra: Use,
        value: &str,
        owner: usize,
        want: &str,
    ) -> Unsupported {
        let owner_label = self.label(owner);
        match extra {
            Use::Node { node, .. } => self.err(
                node,
                format!(
                    "unexpected extra consumer of `{value}` (output of {owner_label}), which the \
                     plan expects to feed only {want}"
                ),
            ),
            Use::Output(name) => self.err(
                owner,
                format!(
                    "`{value}` is also the graph output `{name}`, but the plan expects it to feed \
                     only {want}"
                ),
            ),
        }
    }

    /// Checks that `value` (output of `owner`) is used exactly by `expected`, in any order.
    pub(crate) fn only_uses(
        &self,
        value: &'m str,
        owner: usize,
        expected: &[Use],
        want: &str,
    ) -> Lift<()> {
        let uses = self.uses(value);
        if let Some(extra) = uses.iter().find(|u| !expected.contains(u)) {
            return Err(self.extra_use(*extra, value, owner, want));
        }
        if uses.len() != expected.len() {
            return Err(self.err(owner, format!("`{value}` does not feed {want} as expected")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use genai_onnx::proto::attribute_proto::AttributeType;
    use genai_onnx::proto::{AttributeProto, GraphProto, ModelProto, ValueInfoProto};
    use prost::Message;

    fn node(name: &str, op: &str, inputs: &[&str], outputs: &[&str], to: Option<i64>) -> NodeProto {
        NodeProto {
            name: name.into(),
            op_type: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            attribute: to
                .map(|i| AttributeProto {
                    name: "to".into(),
                    r#type: AttributeType::Int as i32,
                    i,
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }

    fn model(nodes: Vec<NodeProto>) -> OnnxModel {
        let value = |n: &str| ValueInfoProto {
            name: n.into(),
            ..Default::default()
        };
        let proto = ModelProto {
            graph: Some(GraphProto {
                node: nodes,
                input: vec![value("x")],
                output: vec![value("y")],
                ..Default::default()
            }),
            ..Default::default()
        };
        OnnxModel::from_bytes(std::path::Path::new("t.onnx"), &proto.encode_to_vec())
            .expect("valid model")
    }

    #[test]
    fn float_casts_are_seen_through_and_claimed() {
        // x -> Cast(f16) -> Cast(f32) -> Relu -> y, and x -> Cast(int64) -> Neg.
        let m = model(vec![
            node("c16", "Cast", &["x"], &["x16"], Some(10)),
            node("c32", "Cast", &["x16"], &["x32"], Some(1)),
            node("relu", "Relu", &["x32"], &["y"], None),
            node("cint", "Cast", &["x"], &["xi"], Some(7)),
            node("neg", "Neg", &["xi"], &["n"], None),
        ]);
        let g = Graph::new(&m).expect("index");
        let uses = g.uses("x");
        assert_eq!(
            uses,
            vec![
                Use::Node { node: 2, slot: 0 },
                Use::Node { node: 3, slot: 0 }
            ]
        );
        assert_eq!(g.uses("y"), vec![Use::Output("y")]);
        assert_eq!(g.source("x32"), "x");
        // Only the float casts were claimed on the way.
        assert_eq!(g.first_unclaimed(), Some(2));
        g.claim(2);
        assert_eq!(g.first_unclaimed(), Some(3));
        let e = g
            .one_use("x", 0, "a Relu", |n, _| g.is_op(n, "", "Relu"))
            .expect_err("the int cast is an extra use");
        assert_eq!((e.node.as_str(), e.op_type.as_str()), ("cint", "Cast"));
        assert!(e.reason.contains("unexpected extra consumer of `x`"), "{e}");
    }

    #[test]
    fn unnamed_nodes_are_labelled_by_op_and_index() {
        let m = model(vec![node("", "Relu", &["x"], &["y"], None)]);
        let g = Graph::new(&m).expect("index");
        assert_eq!(g.label(0), "Relu #0");
        assert_eq!(g.err(0, "why").to_string(), "Relu #0 (Relu): why");
    }
}
