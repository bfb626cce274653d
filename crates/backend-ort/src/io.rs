//! Matching the decoder graph's inputs and outputs to the roles the generator feeds: token ids,
//! attention mask, position ids, the KV cache (split key/value or combined), and logits.

use crate::Error;
use genai_config::{Config, KvNames};
use ort::session::Session;
use ort::value::TensorElementType;

/// How the KV cache tensors are shaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KvLayout {
    /// One tensor per layer for keys and one for values: `[batch, kv_heads, seq, head]`.
    Split,
    /// One tensor per layer holding both: `[2, batch, kv_heads, seq, head]`.
    Combined,
}

impl KvLayout {
    /// The axis that grows with the sequence.
    pub(crate) fn seq_axis(self) -> usize {
        match self {
            KvLayout::Split => 2,
            KvLayout::Combined => 3,
        }
    }

    /// The full shape of one KV tensor.
    pub(crate) fn shape(self, batch: usize, kv_heads: usize, seq: usize, head: usize) -> Vec<i64> {
        let dims = [batch, kv_heads, seq, head].map(|d| d as i64);
        match self {
            KvLayout::Split => dims.to_vec(),
            KvLayout::Combined => std::iter::once(2).chain(dims).collect(),
        }
    }
}

/// The decoder's graph inputs and outputs by role.
#[derive(Debug, Clone)]
pub(crate) struct IoSpec {
    pub input_ids: (String, TensorElementType),
    pub attention_mask: Option<(String, TensorElementType)>,
    pub position_ids: Option<(String, TensorElementType)>,
    pub kv_layout: KvLayout,
    /// Past inputs, in the same order as `present_outputs`.
    pub past_inputs: Vec<String>,
    pub present_outputs: Vec<String>,
    pub kv_dtype: TensorElementType,
    pub kv_heads: usize,
    pub head_size: usize,
    pub logits: String,
    pub vocab_size: usize,
}

impl IoSpec {
    /// Reads the session's inputs and outputs and checks them against the config's names.
    pub(crate) fn resolve(session: &Session, config: &Config) -> Result<IoSpec, Error> {
        let decoder = &config.model.decoder;
        let model = config.decoder_path().display().to_string();
        let fail = |message: String| Error::Io {
            model: model.clone(),
            message,
        };
        let input = |name: &str| session.inputs().iter().find(|o| o.name() == name);
        let output = |name: &str| session.outputs().iter().find(|o| o.name() == name);

        let ids_name = &decoder.inputs.input_ids;
        let ids = input(ids_name).ok_or_else(|| {
            fail(format!(
                "has no input named {ids_name:?} (inputs.input_ids)"
            ))
        })?;
        let input_ids = (
            ids_name.clone(),
            int_type(ids.dtype().tensor_type(), ids_name).map_err(&fail)?,
        );
        let optional_int = |name: &str| -> Result<Option<(String, TensorElementType)>, Error> {
            match input(name) {
                Some(o) => Ok(Some((
                    name.to_string(),
                    int_type(o.dtype().tensor_type(), name).map_err(&fail)?,
                ))),
                None => Ok(None),
            }
        };
        let attention_mask = optional_int(&decoder.inputs.attention_mask)?;
        let position_ids = optional_int(&decoder.inputs.position_ids)?;

        let layers = decoder.num_hidden_layers;
        let (kv_layout, past_inputs, present_outputs) =
            kv_names(&decoder.inputs.past, &decoder.outputs.present, layers);
        let first_past = past_inputs
            .first()
            .ok_or_else(|| fail("num_hidden_layers is 0".into()))?;
        let past = input(first_past)
            .ok_or_else(|| fail(format!("has no KV input named {first_past:?}")))?;
        let kv_dtype = past
            .dtype()
            .tensor_type()
            .ok_or_else(|| fail(format!("{first_past} is not a tensor")))?;
        if !matches!(
            kv_dtype,
            TensorElementType::Float32 | TensorElementType::Float16 | TensorElementType::Bfloat16
        ) {
            return Err(fail(format!(
                "KV input {first_past} has element type {kv_dtype}; f32, f16 or bf16 expected"
            )));
        }
        for name in &past_inputs {
            let found =
                input(name).ok_or_else(|| fail(format!("has no KV input named {name:?}")))?;
            if found.dtype().tensor_type() != Some(kv_dtype) {
                return Err(fail(format!(
                    "KV input {name} has a different element type than {first_past}"
                )));
            }
        }
        for name in &present_outputs {
            output(name).ok_or_else(|| fail(format!("has no KV output named {name:?}")))?;
        }

        let logits_name = &decoder.outputs.logits;
        let logits = output(logits_name).ok_or_else(|| {
            fail(format!(
                "has no output named {logits_name:?} (outputs.logits)"
            ))
        })?;
        match logits.dtype().tensor_type() {
            Some(
                TensorElementType::Float32
                | TensorElementType::Float16
                | TensorElementType::Bfloat16,
            ) => {}
            other => {
                return Err(fail(format!(
                    "logits have element type {other:?}; f32, f16 or bf16 expected"
                )));
            }
        }
        let vocab_size = logits
            .dtype()
            .tensor_shape()
            .and_then(|s| s.last().copied())
            .and_then(|d| usize::try_from(d).ok())
            .unwrap_or(config.model.vocab_size);

        let known: Vec<&str> = [
            Some(ids_name.as_str()),
            attention_mask.as_ref().map(|m| m.0.as_str()),
            position_ids.as_ref().map(|p| p.0.as_str()),
        ]
        .into_iter()
        .flatten()
        .chain(past_inputs.iter().map(String::as_str))
        .collect();
        let unknown: Vec<&str> = session
            .inputs()
            .iter()
            .map(|o| o.name())
            .filter(|n| !known.contains(n))
            .collect();
        if !unknown.is_empty() {
            return Err(fail(format!(
                "has inputs this backend does not feed: {}",
                unknown.join(", ")
            )));
        }

        let (kv_heads, head_size) = kv_dims(
            past.dtype().tensor_shape().map(|s| s.to_vec()),
            kv_layout,
            config,
        );
        Ok(IoSpec {
            input_ids,
            attention_mask,
            position_ids,
            kv_layout,
            past_inputs,
            present_outputs,
            kv_dtype,
            kv_heads,
            head_size,
            logits: logits_name.clone(),
            vocab_size,
        })
    }
}

fn int_type(ty: Option<TensorElementType>, name: &str) -> Result<TensorElementType, String> {
    match ty {
        Some(t @ (TensorElementType::Int32 | TensorElementType::Int64)) => Ok(t),
        other => Err(format!(
            "input {name} has element type {other:?}; int32 or int64 expected"
        )),
    }
}

/// Past input and present output names, layer by layer.
fn kv_names(
    past: &KvNames,
    present: &KvNames,
    layers: usize,
) -> (KvLayout, Vec<String>, Vec<String>) {
    let mut past_names = Vec::new();
    let mut present_names = Vec::new();
    let layout = if past.is_combined() {
        KvLayout::Combined
    } else {
        KvLayout::Split
    };
    for layer in 0..layers {
        match (past.combined(layer), present.combined(layer)) {
            (Some(p), Some(q)) => {
                past_names.push(p);
                present_names.push(q);
            }
            _ => {
                past_names.extend([past.key(layer), past.value(layer)]);
                present_names.extend([present.key(layer), present.value(layer)]);
            }
        }
    }
    (layout, past_names, present_names)
}

/// KV heads and head size: the graph's fixed dims when it declares them, else the config's.
fn kv_dims(shape: Option<Vec<i64>>, layout: KvLayout, config: &Config) -> (usize, usize) {
    let decoder = &config.model.decoder;
    let offset = layout.seq_axis() - 2;
    let dim = |i: usize| {
        shape
            .as_ref()
            .and_then(|s| s.get(i + offset))
            .and_then(|&d| usize::try_from(d).ok())
            .filter(|&d| d > 0)
    };
    let heads = dim(1).unwrap_or(decoder.num_key_value_heads);
    let head = dim(3).unwrap_or(decoder.head_size);
    (heads, head)
}
