//! The model's tokenizer: loading it from a model folder, encoding, decoding and chat templates
//! (the streaming decoder is in `stream.rs`).

use std::collections::HashMap;
use std::path::Path;

use crate::Error;
use crate::model::{self, Kind};
use crate::{chat, config, detok, encoder};

/// The special token ids of a model, as genai_config.json gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecialTokens {
    pub bos: Option<i32>,
    pub eos: Vec<i32>,
    pub pad: i32,
}

/// A model's tokenizer: tokenizer.json plus the optional tokenizer_config.json and
/// chat_template.jinja beside it. Thread safety: `Send + Sync`, every method takes `&self`, so
/// one tokenizer may serve any number of threads.
#[derive(Debug)]
pub struct Tokenizer {
    inner: tokenizers::Tokenizer,
    special: SpecialTokens,
    /// Added tokens: whether each is special (decode skips those).
    added: HashMap<u32, bool>,
    kind: Kind,
    /// The runtime's encoder, for BPE models (else the `tokenizers` library encodes).
    encoder: Option<encoder::Encoder>,
    vocab_size: usize,
    chat_template: Option<String>,
    /// Template variables such as `bos_token`, with their strings.
    template_tokens: Vec<(&'static str, String)>,
    /// What an id outside the vocabulary decodes to: for SentencePiece-style models their
    /// unknown token (tokenizer_config or tokenizer.json), else nothing.
    unknown_text: String,
}

/// Stands for an id outside the vocabulary once ids are checked.
pub(crate) const UNKNOWN_ID: u32 = u32::MAX;

impl Tokenizer {
    /// Loads the tokenizer from a model folder. `tokenizer.json` is required;
    /// `tokenizer_config.json` and `chat_template.jinja` are optional.
    pub fn from_dir(model_dir: &Path, special: SpecialTokens) -> Result<Self, Error> {
        let path = model_dir.join("tokenizer.json");
        let Some(text) = config::read_optional(&path)? else {
            return Err(Error::MissingFile { path });
        };
        let invalid = |message: String| Error::InvalidFile {
            path: path.clone(),
            message,
        };
        let mut json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        let config = config::TokenizerConfig::load(model_dir)?;
        let kind = model::kind(&json, config.model_name() == "Gemma");
        let encoder = encoder::Encoder::new(&json, &kind, config.model_name()).map_err(invalid)?;
        if kind != Kind::Other {
            // The runtime applies no normalizer to BPE models.
            json["normalizer"] = serde_json::Value::Null;
        }
        let unknown_text = json["model"]["unk_token"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let inner: tokenizers::Tokenizer =
            serde_json::from_value(json).map_err(|e| invalid(e.to_string()))?;
        let mut tokenizer = Self::new(inner, special, config, kind, encoder);
        // SentencePiece-style models print tokenizer_config.json's unk_token (else the one
        // tokenizer.json's model names); byte-level ones print nothing, as the official runtime.
        if matches!(tokenizer.kind, Kind::SentencePiece { .. }) {
            let configured = tokenizer
                .template_tokens
                .iter()
                .find(|(key, _)| *key == "unk_token")
                .map(|(_, text)| text.clone());
            tokenizer.unknown_text = configured.unwrap_or(unknown_text);
        }
        Ok(tokenizer)
    }

    fn new(
        inner: tokenizers::Tokenizer,
        special: SpecialTokens,
        config: config::TokenizerConfig,
        kind: Kind,
        encoder: Option<encoder::Encoder>,
    ) -> Self {
        let added = inner
            .get_added_tokens_decoder()
            .into_iter()
            .map(|(id, token)| (id, token.special))
            .collect();
        let vocab_size = inner.get_vocab_size(true);
        let mut template_tokens = config.special_tokens;
        // Where tokenizer_config.json names no BOS/EOS string, use genai_config.json's ids.
        let fallbacks = [
            ("bos_token", special.bos),
            ("eos_token", special.eos.first().copied()),
        ];
        for (key, id) in fallbacks {
            let known = template_tokens.iter().any(|(k, _)| *k == key);
            let token = id
                .and_then(|id| u32::try_from(id).ok())
                .and_then(|id| inner.id_to_token(id));
            if let (false, Some(token)) = (known, token) {
                template_tokens.push((key, token));
            }
        }
        Self {
            inner,
            special,
            added,
            kind,
            encoder,
            vocab_size,
            chat_template: config.chat_template,
            template_tokens,
            unknown_text: String::new(),
        }
    }

    /// Token ids of `text`, without any special tokens added.
    pub fn encode(&self, text: &str) -> Result<Vec<i32>, Error> {
        let text = text.split('\0').next().unwrap_or_default();
        let ids = match &self.encoder {
            Some(encoder) => encoder.encode(text),
            None => {
                let encoding = self.inner.encode(text, false).map_err(|e| Error::Encode {
                    message: e.to_string(),
                })?;
                encoding.get_ids().to_vec()
            }
        };
        ids.into_iter()
            .map(|id| {
                i32::try_from(id).map_err(|_| Error::InvalidTokenId {
                    id: i64::from(id),
                    vocab_size: self.vocab_size,
                })
            })
            .collect()
    }

    /// Encodes each text, padding on the right with the pad id to the longest.
    pub fn encode_batch(&self, texts: &[&str]) -> Result<Vec<Vec<i32>>, Error> {
        let mut batch = texts
            .iter()
            .map(|text| self.encode(text))
            .collect::<Result<Vec<_>, _>>()?;
        let longest = batch.iter().map(Vec::len).max().unwrap_or(0);
        for ids in &mut batch {
            ids.resize(longest, self.special.pad);
        }
        Ok(batch)
    }

    /// The text of `ids`, skipping special tokens. As in the official runtime, an id that is
    /// negative or not in the vocabulary decodes as a SentencePiece-style model's unknown token
    /// (`unk_token`), and as nothing otherwise.
    pub fn decode(&self, ids: &[i32]) -> Result<String, Error> {
        let ids: Vec<u32> = ids.iter().map(|&id| self.resolve_id(id)).collect();
        self.decode_checked(&ids)
    }

    /// Decodes each sequence.
    pub fn decode_batch(&self, seqs: &[&[i32]]) -> Result<Vec<String>, Error> {
        seqs.iter().map(|ids| self.decode(ids)).collect()
    }

    /// The id of a token string (added tokens included), if it is in the vocabulary.
    pub fn token_to_id(&self, token: &str) -> Option<i32> {
        self.inner
            .token_to_id(token)
            .and_then(|id| i32::try_from(id).ok())
    }

    /// Number of tokens in the vocabulary, added tokens included.
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// The special token ids this tokenizer was loaded with.
    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    /// The model's chat template (from tokenizer_config.json, else chat_template.jinja), if any.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// Renders a chat template over `messages_json` (a JSON array of `{role, content}` objects).
    /// `template` overrides the model's template when given and non-empty; `tools_json`, when
    /// given and non-empty, is a JSON array passed to the template as `tools`.
    pub fn apply_chat_template(
        &self,
        template: Option<&str>,
        messages_json: &str,
        tools_json: Option<&str>,
        add_generation_prompt: bool,
    ) -> Result<String, Error> {
        let template = template
            .filter(|t| !t.is_empty())
            .or(self.chat_template.as_deref())
            .ok_or(Error::NoChatTemplate)?;
        chat::render(
            template,
            messages_json,
            tools_json,
            add_generation_prompt,
            &self.template_tokens,
        )
    }

    /// The id as u32 if the vocabulary has it, else [`UNKNOWN_ID`].
    pub(crate) fn resolve_id(&self, id: i32) -> u32 {
        u32::try_from(id)
            .ok()
            .filter(|&id| id != UNKNOWN_ID && self.inner.id_to_token(id).is_some())
            .unwrap_or(UNKNOWN_ID)
    }

    /// Whether decode skips this (already checked) id.
    pub(crate) fn is_skipped(&self, id: u32) -> bool {
        self.added.get(&id) == Some(&true)
    }

    /// Whether decoding follows the runtime's byte-wise rules ([`detok`]) rather than the
    /// `tokenizers` library's decoders.
    pub(crate) fn decodes_bytes(&self) -> bool {
        self.kind != Kind::Other
    }

    /// Appends the bytes of one resolved id, as [`detok::push_token`] does.
    pub(crate) fn push_bytes(&self, id: u32, after_special: &mut bool, out: &mut Vec<u8>) {
        if id == UNKNOWN_ID {
            let token = detok::Token::Added(&self.unknown_text);
            detok::push_token(&self.kind, token, after_special, out);
            return;
        }
        let piece = self.inner.id_to_token(id).unwrap_or_default();
        let token = match self.added.get(&id) {
            Some(true) => detok::Token::Special,
            Some(false) => detok::Token::Added(&piece),
            None => detok::Token::Piece(&piece),
        };
        detok::push_token(&self.kind, token, after_special, out);
    }

    /// Decodes resolved ids.
    pub(crate) fn decode_checked(&self, ids: &[u32]) -> Result<String, Error> {
        if !self.decodes_bytes() {
            // The `tokenizers` library cannot take unknown ids: they add nothing here.
            let known: Vec<u32> = ids.iter().copied().filter(|&id| id != UNKNOWN_ID).collect();
            return self.inner.decode(&known, true).map_err(|e| Error::Decode {
                message: e.to_string(),
            });
        }
        if ids.is_empty() {
            return Ok(String::new());
        }
        let (mut bytes, mut after_special) = (Vec::new(), false);
        for &id in ids {
            self.push_bytes(id, &mut after_special, &mut bytes);
        }
        Ok(detok::finish(&bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn tokenizer_is_send_and_sync() {
        assert_send_sync::<Tokenizer>();
        assert_send_sync::<crate::StreamDecoder<&Tokenizer>>();
        assert_send_sync::<crate::StreamDecoder<std::sync::Arc<Tokenizer>>>();
    }
}
