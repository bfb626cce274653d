//! Readers for node attributes (type-checked, unknown ones rejected) and constant values (a
//! `Constant` node's output, claimed when read, or an initializer).

use genai_onnx::Tensor;
use genai_onnx::proto::AttributeProto;
use genai_onnx::proto::attribute_proto::AttributeType;

use crate::error::Lift;
use crate::graph::Graph;

impl<'m> Graph<'m> {
    /// The attribute `name` of node `i`.
    pub(crate) fn attr(&self, i: usize, name: &str) -> Option<&'m AttributeProto> {
        self.node(i).attribute.iter().find(|a| a.name == name)
    }

    /// Fails on the first attribute of node `i` that is not in `known`.
    pub(crate) fn only_attrs(&self, i: usize, known: &[&str]) -> Lift<()> {
        match self
            .node(i)
            .attribute
            .iter()
            .find(|a| !known.contains(&a.name.as_str()))
        {
            Some(a) => Err(self.err(i, format!("attribute `{}` is not supported", a.name))),
            None => Ok(()),
        }
    }

    fn typed(&self, i: usize, name: &str, want: AttributeType) -> Lift<Option<&'m AttributeProto>> {
        match self.attr(i, name) {
            Some(a) if a.r#type == want as i32 || a.r#type == AttributeType::Undefined as i32 => {
                Ok(Some(a))
            }
            Some(_) => Err(self.err(
                i,
                format!(
                    "attribute `{name}` has the wrong type (expected {})",
                    want.as_str_name()
                ),
            )),
            None => Ok(None),
        }
    }

    pub(crate) fn int_attr(&self, i: usize, name: &str) -> Lift<Option<i64>> {
        Ok(self.typed(i, name, AttributeType::Int)?.map(|a| a.i))
    }

    pub(crate) fn float_attr(&self, i: usize, name: &str) -> Lift<Option<f32>> {
        Ok(self.typed(i, name, AttributeType::Float)?.map(|a| a.f))
    }

    pub(crate) fn ints_attr(&self, i: usize, name: &str) -> Lift<Option<Vec<i64>>> {
        Ok(self
            .typed(i, name, AttributeType::Ints)?
            .map(|a| a.ints.clone()))
    }

    pub(crate) fn str_attr(&self, i: usize, name: &str) -> Lift<Option<String>> {
        Ok(self
            .typed(i, name, AttributeType::String)?
            .map(|a| String::from_utf8_lossy(&a.s).into_owned()))
    }

    /// An integer attribute that must be present.
    pub(crate) fn req_int(&self, i: usize, name: &str) -> Lift<i64> {
        self.int_attr(i, name)?
            .ok_or_else(|| self.err(i, format!("attribute `{name}` missing")))
    }

    /// An integer attribute that may only take `allowed` values (`default` when absent).
    pub(crate) fn int_in(&self, i: usize, name: &str, default: i64, allowed: &[i64]) -> Lift<i64> {
        let v = self.int_attr(i, name)?.unwrap_or(default);
        if allowed.contains(&v) {
            Ok(v)
        } else {
            Err(self.err(i, format!("{name} {v} is not supported")))
        }
    }

    /// The values of a constant (a `Constant` node's output, claimed, or an initializer) as i64.
    pub(crate) fn const_i64s(&self, value: &str) -> Option<Vec<i64>> {
        self.constant(
            value,
            |t| t.to_i64_vec().ok(),
            |a| match a.name.as_str() {
                "value_int" => Some(vec![a.i]),
                "value_ints" => Some(a.ints.clone()),
                _ => None,
            },
        )
    }

    /// The values of a float constant.
    pub(crate) fn const_f32s(&self, value: &str) -> Option<Vec<f32>> {
        self.constant(
            value,
            |t| t.to_f32_vec().ok(),
            |a| match a.name.as_str() {
                "value_float" => Some(vec![a.f]),
                "value_floats" => Some(a.floats.clone()),
                _ => None,
            },
        )
    }

    fn constant<T>(
        &self,
        value: &str,
        from_tensor: impl Fn(&Tensor) -> Option<Vec<T>>,
        from_attr: impl Fn(&AttributeProto) -> Option<Vec<T>>,
    ) -> Option<Vec<T>> {
        if let Some(t) = self.model.initializer(value) {
            return from_tensor(&t);
        }
        let (p, _) = self.producer(value)?;
        if !self.is_op(p, "", "Constant") || self.node(p).attribute.len() != 1 {
            return None;
        }
        let a = self.node(p).attribute.first()?;
        let values = match (&a.t, a.name.as_str()) {
            (Some(t), "value") => from_tensor(&Tensor::from_proto(t).ok()?),
            _ => from_attr(a),
        }?;
        self.claim(p);
        Some(values)
    }
}
