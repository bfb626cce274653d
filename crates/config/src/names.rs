//! Decoder graph input/output names with the official defaults, and the per-layer `%d` name
//! templates for the key/value cache (split `past_key_values.%d.key` or combined `past_%d`).

use crate::Error;
use crate::raw::{RawDecoderInputs, RawDecoderOutputs};

/// Per-layer key/value cache tensor names, as `%d` templates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KvNames {
    /// Separate key and value tensors per layer, e.g. `past_key_values.%d.key` / `.value`.
    Split {
        /// Key template.
        key: String,
        /// Value template.
        value: String,
    },
    /// One tensor per layer holding key and value stacked (`[2, batch, heads, seq, head]`),
    /// e.g. `past_%d` (GPT-2 style).
    Combined(String),
}

impl KvNames {
    /// The key tensor name of `layer`; for [`KvNames::Combined`] the combined tensor's name.
    pub fn key(&self, layer: usize) -> String {
        match self {
            KvNames::Split { key, .. } => fill_template(key, layer),
            KvNames::Combined(t) => fill_template(t, layer),
        }
    }

    /// The value tensor name of `layer`; for [`KvNames::Combined`] the combined tensor's name.
    pub fn value(&self, layer: usize) -> String {
        match self {
            KvNames::Split { value, .. } => fill_template(value, layer),
            KvNames::Combined(t) => fill_template(t, layer),
        }
    }

    /// The combined tensor name of `layer`, or `None` for split names.
    pub fn combined(&self, layer: usize) -> Option<String> {
        match self {
            KvNames::Split { .. } => None,
            KvNames::Combined(t) => Some(fill_template(t, layer)),
        }
    }

    /// Whether key and value share one tensor per layer.
    pub fn is_combined(&self) -> bool {
        matches!(self, KvNames::Combined(_))
    }
}

/// Expands a printf-style template the way the official `snprintf` call does for the only
/// conversions a valid template holds: `%d` becomes `layer`, `%%` becomes `%`.
pub fn fill_template(template: &str, layer: usize) -> String {
    let mut out = String::with_capacity(template.len() + 4);
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.peek() {
                Some('d') => {
                    chars.next();
                    out.push_str(&layer.to_string());
                    continue;
                }
                Some('%') => {
                    chars.next();
                    out.push('%');
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// Checks a per-layer template: exactly one `%d`, and no other `%` conversion.
pub(crate) fn check_template(template: &str, path: &str) -> Result<(), Error> {
    let mut count = 0;
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c == '%' {
            match chars.next() {
                Some('d') => count += 1,
                Some('%') => {}
                _ => {
                    return Err(Error::invalid(
                        path,
                        format!(
                            "template \"{template}\" may hold only %d (and %% for a literal %)"
                        ),
                    ));
                }
            }
        }
    }
    if count != 1 {
        return Err(Error::invalid(
            path,
            format!("template \"{template}\" must contain %d exactly once (the layer index)"),
        ));
    }
    Ok(())
}

/// `model.decoder.inputs` with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoderInputs {
    /// Token ids (default `input_ids`).
    pub input_ids: String,
    /// Embeddings fed instead of ids (default `inputs_embeds`).
    pub inputs_embeds: String,
    /// Attention mask (default `attention_mask`).
    pub attention_mask: String,
    /// Position ids (default `position_ids`); absent from graphs with fused rotary embedding.
    pub position_ids: String,
    /// Past key/value templates (`past_names` when set, else `past_key_names`/`past_value_names`).
    pub past: KvNames,
    /// Default `past_sequence_length`.
    pub past_sequence_length: String,
    /// Default `total_sequence_length`.
    pub total_sequence_length: String,
    /// Default `current_sequence_length`.
    pub current_sequence_length: String,
    /// Default `past_key_values_length`.
    pub past_key_values_length: String,
    /// Beam search cache indirection (default `cache_indirection`).
    pub cache_indirection: String,
    /// Other keys the file sets (paged attention, quantized or recurrent caches, encoder
    /// inputs, ...), in declaration order; each is also listed in `Config::unsupported`.
    pub other: Vec<(String, String)>,
}

/// `model.decoder.outputs` with defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecoderOutputs {
    /// Logits (default `logits`).
    pub logits: String,
    /// Present key/value templates (`present_names` when set, else split names).
    pub present: KvNames,
    /// Other keys the file sets, in declaration order; each is also in `Config::unsupported`.
    pub other: Vec<(String, String)>,
}

/// Input keys this crate models; any other key set in the file is reported as unsupported.
pub(crate) const CORE_INPUTS: &[&str] = &[
    "input_ids",
    "inputs_embeds",
    "attention_mask",
    "position_ids",
    "past_key_names",
    "past_value_names",
    "past_names",
    "past_sequence_length",
    "total_sequence_length",
    "current_sequence_length",
    "past_key_values_length",
    "cache_indirection",
];

/// Output keys this crate models.
pub(crate) const CORE_OUTPUTS: &[&str] = &[
    "logits",
    "present_key_names",
    "present_value_names",
    "present_names",
];

fn or(value: &Option<String>, default: &str) -> String {
    value.clone().unwrap_or_else(|| default.to_string())
}

fn kv_names(
    combined: &Option<String>,
    key: &Option<String>,
    value: &Option<String>,
    defaults: (&str, &str),
    path: &str,
    names: (&str, &str, &str),
) -> Result<KvNames, Error> {
    match combined.as_deref() {
        Some(t) if !t.is_empty() => {
            check_template(t, &format!("{path}.{}", names.0))?;
            Ok(KvNames::Combined(t.to_string()))
        }
        _ => {
            let key = or(key, defaults.0);
            let value = or(value, defaults.1);
            check_template(&key, &format!("{path}.{}", names.1))?;
            check_template(&value, &format!("{path}.{}", names.2))?;
            Ok(KvNames::Split { key, value })
        }
    }
}

impl DecoderInputs {
    /// Applies the official defaults; `path` is where the section sits (`model.decoder.inputs`).
    pub(crate) fn from_raw(raw: &RawDecoderInputs, path: &str) -> Result<Self, Error> {
        let past = kv_names(
            &raw.past_names,
            &raw.past_key_names,
            &raw.past_value_names,
            ("past_key_values.%d.key", "past_key_values.%d.value"),
            path,
            ("past_names", "past_key_names", "past_value_names"),
        )?;
        Ok(DecoderInputs {
            input_ids: or(&raw.input_ids, "input_ids"),
            inputs_embeds: or(&raw.inputs_embeds, "inputs_embeds"),
            attention_mask: or(&raw.attention_mask, "attention_mask"),
            position_ids: or(&raw.position_ids, "position_ids"),
            past,
            past_sequence_length: or(&raw.past_sequence_length, "past_sequence_length"),
            total_sequence_length: or(&raw.total_sequence_length, "total_sequence_length"),
            current_sequence_length: or(&raw.current_sequence_length, "current_sequence_length"),
            past_key_values_length: or(&raw.past_key_values_length, "past_key_values_length"),
            cache_indirection: or(&raw.cache_indirection, "cache_indirection"),
            other: others(raw.entries(), CORE_INPUTS),
        })
    }
}

impl DecoderOutputs {
    /// Applies the official defaults; `path` is where the section sits.
    pub(crate) fn from_raw(raw: &RawDecoderOutputs, path: &str) -> Result<Self, Error> {
        let present = kv_names(
            &raw.present_names,
            &raw.present_key_names,
            &raw.present_value_names,
            ("present.%d.key", "present.%d.value"),
            path,
            ("present_names", "present_key_names", "present_value_names"),
        )?;
        Ok(DecoderOutputs {
            logits: or(&raw.logits, "logits"),
            present,
            other: others(raw.entries(), CORE_OUTPUTS),
        })
    }
}

fn others(entries: Vec<(&'static str, &str)>, core: &[&str]) -> Vec<(String, String)> {
    entries
        .into_iter()
        .filter(|(k, _)| !core.contains(k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_like_snprintf() {
        assert_eq!(
            fill_template("past_key_values.%d.key", 3),
            "past_key_values.3.key"
        );
        assert_eq!(fill_template("past_%d", 0), "past_0");
        assert_eq!(fill_template("a%%b%d", 12), "a%b12");
    }

    #[test]
    fn templates_are_checked() {
        assert!(check_template("past_%d", "p").is_ok());
        let e = check_template("past", "model.decoder.inputs.past_names").unwrap_err();
        assert_eq!(
            e.to_string(),
            "model.decoder.inputs.past_names: template \"past\" must contain %d exactly once \
             (the layer index)"
        );
        assert!(check_template("past_%s", "p").is_err());
        assert!(check_template("p_%d_%d", "p").is_err());
    }

    #[test]
    fn defaults_match_official() {
        let i = DecoderInputs::from_raw(&RawDecoderInputs::default(), "i").unwrap();
        assert_eq!(i.input_ids, "input_ids");
        assert_eq!(i.attention_mask, "attention_mask");
        assert_eq!(i.position_ids, "position_ids");
        assert_eq!(i.past.key(1), "past_key_values.1.key");
        assert_eq!(i.past.value(1), "past_key_values.1.value");
        assert_eq!(i.past.combined(1), None);
        let o = DecoderOutputs::from_raw(&RawDecoderOutputs::default(), "o").unwrap();
        assert_eq!(o.logits, "logits");
        assert_eq!(o.present.key(0), "present.0.key");
        assert_eq!(o.present.value(0), "present.0.value");
    }

    #[test]
    fn combined_names_win() {
        let raw = RawDecoderInputs {
            past_names: Some("past_%d".into()),
            ..Default::default()
        };
        let i = DecoderInputs::from_raw(&raw, "i").unwrap();
        assert!(i.past.is_combined());
        assert_eq!(i.past.combined(4).as_deref(), Some("past_4"));
        assert_eq!(i.past.key(4), "past_4");
    }

    #[test]
    fn other_keys_are_kept() {
        let raw = RawDecoderInputs {
            block_table: Some("block_table".into()),
            input_ids: Some("ids".into()),
            ..Default::default()
        };
        let i = DecoderInputs::from_raw(&raw, "i").unwrap();
        assert_eq!(i.input_ids, "ids");
        assert_eq!(
            i.other,
            vec![("block_table".to_string(), "block_table".to_string())]
        );
    }
}
