//! Reads the optional files beside tokenizer.json: tokenizer_config.json and chat_template.jinja.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::Error;

/// What the tokenizer takes from tokenizer_config.json and chat_template.jinja.
#[derive(Debug, Default)]
pub(crate) struct TokenizerConfig {
    /// The model's default chat template, if any.
    pub chat_template: Option<String>,
    /// Special token strings by template variable name (`bos_token`, `eos_token`, ...).
    pub special_tokens: Vec<(&'static str, String)>,
    /// `tokenizer_class`, e.g. "LlamaTokenizer".
    pub tokenizer_class: Option<String>,
}

/// The special token names HF passes to chat templates.
const TOKEN_KEYS: [&str; 4] = ["bos_token", "eos_token", "unk_token", "pad_token"];

impl TokenizerConfig {
    /// Reads `tokenizer_config.json` and `chat_template.jinja` from `dir`; both are optional.
    /// A file that exists but is unreadable or malformed is an error naming it.
    pub fn load(dir: &Path) -> Result<Self, Error> {
        let mut config = Self::default();
        let config_path = dir.join("tokenizer_config.json");
        if let Some(text) = read_optional(&config_path)? {
            let json: Json = serde_json::from_str(&text).map_err(|e| Error::InvalidFile {
                path: config_path.clone(),
                message: e.to_string(),
            })?;
            config = Self::from_json(&json).map_err(|message| Error::InvalidFile {
                path: config_path,
                message,
            })?;
        }
        // As in onnxruntime-genai 0.18, a template in tokenizer_config.json wins over the file.
        if config.chat_template.is_none() {
            config.chat_template = read_optional(&dir.join("chat_template.jinja"))?;
        }
        Ok(config)
    }

    /// Picks the fields we use out of a parsed tokenizer_config.json.
    fn from_json(json: &Json) -> Result<Self, String> {
        let Some(obj) = json.as_object() else {
            return Err("the top level is not a JSON object".to_owned());
        };
        let chat_template = match obj.get("chat_template") {
            None | Some(Json::Null) => None,
            Some(Json::String(s)) => Some(s.clone()),
            Some(Json::Array(list)) => default_from_list(list)?,
            Some(_) => return Err("chat_template is neither a string nor a list".to_owned()),
        };
        let mut special_tokens = Vec::new();
        for key in TOKEN_KEYS {
            match obj.get(key) {
                None | Some(Json::Null) => {}
                Some(Json::String(s)) => special_tokens.push((key, s.clone())),
                Some(Json::Object(o)) => match o.get("content") {
                    Some(Json::String(s)) => special_tokens.push((key, s.clone())),
                    _ => return Err(format!("{key} is an object without a string \"content\"")),
                },
                Some(_) => return Err(format!("{key} is neither a string nor an object")),
            }
        }
        let tokenizer_class = obj.get("tokenizer_class").and_then(Json::as_str);
        Ok(Self {
            chat_template,
            special_tokens,
            tokenizer_class: tokenizer_class.map(str::to_owned),
        })
    }
}

/// From a list of `{name, template}` entries, the one named "default" (None if there is none).
fn default_from_list(list: &[Json]) -> Result<Option<String>, String> {
    for entry in list {
        let name = entry.get("name").and_then(Json::as_str);
        let template = entry.get("template").and_then(Json::as_str);
        match (name, template) {
            (Some("default"), Some(t)) => return Ok(Some(t.to_owned())),
            (Some(_), Some(_)) => {}
            _ => return Err("chat_template list entries need string name and template".into()),
        }
    }
    Ok(None)
}

impl TokenizerConfig {
    /// The runtime's model name: the tokenizer class up to "Tokenizer" (or "Backend").
    pub fn model_name(&self) -> &str {
        let class = self.tokenizer_class.as_deref().unwrap_or_default();
        let end = class.find("Tokenizer").or_else(|| class.find("Backend"));
        &class[..end.unwrap_or(class.len())]
    }
}

/// The file's text, or None when it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::Io {
            path: PathBuf::from(path),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_string_and_object_tokens_and_template_list() {
        let json: Json = serde_json::from_str(
            r#"{"bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "</s>",
                "pad_token": null,
                "chat_template": [{"name": "tool_use", "template": "T"},
                                  {"name": "default", "template": "D"}]}"#,
        )
        .unwrap();
        let c = TokenizerConfig::from_json(&json).unwrap();
        assert_eq!(c.chat_template.as_deref(), Some("D"));
        assert_eq!(
            c.special_tokens,
            vec![
                ("bos_token", "<s>".to_owned()),
                ("eos_token", "</s>".to_owned())
            ]
        );
    }

    #[test]
    fn rejects_bad_shapes() {
        for bad in [
            r#"[]"#,
            r#"{"chat_template": 3}"#,
            r#"{"eos_token": 7}"#,
            r#"{"chat_template": [{"name": "default"}]}"#,
        ] {
            let json: Json = serde_json::from_str(bad).unwrap();
            assert!(TokenizerConfig::from_json(&json).is_err(), "{bad}");
        }
    }
}
