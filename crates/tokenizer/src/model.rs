//! What onnxruntime-extensions takes from tokenizer.json to pick its rules: whether a BPE model is
//! SentencePiece-style (the decoder turns "▁" into spaces) and adds a dummy prefix (the decoder
//! strips a leading space), and the added tokens.

use std::collections::HashMap;

use serde_json::Value as Json;

/// How the runtime treats a tokenizer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// BPE whose decoder maps "▁" to a space. `dummy_prefix`: encode prefixes "▁" to each piece
    /// of text and decode drops one leading space after a special token.
    SentencePiece {
        dummy_prefix: bool,
        whole_pieces: bool,
    },
    /// Any other BPE: pieces are spelled in GPT-2's byte alphabet.
    ByteLevel { end_of_word_suffix: String },
    /// Not BPE: left to the `tokenizers` library.
    Other,
}

/// Reads the kind; `gemma` says tokenizer_config.json names a Gemma tokenizer class.
pub(crate) fn kind(json: &Json, gemma: bool) -> Kind {
    let model = &json["model"];
    let is_bpe = match model.get("type").and_then(Json::as_str) {
        Some(t) => t == "BPE",
        None => model.get("merges").is_some(),
    };
    if !is_bpe {
        return Kind::Other;
    }
    let decoder = &json["decoder"];
    let steps: Vec<&Json> = match decoder.get("decoders").and_then(Json::as_array) {
        Some(list) => list.iter().collect(),
        None => vec![decoder],
    };
    let is = |step: &&Json, ty: &str| step.get("type").and_then(Json::as_str) == Some(ty);
    let str_at = |v: &Json, key: &str| v.get(key).and_then(Json::as_str).map(str::to_owned);
    let meta = Some("\u{2581}".to_owned());
    let spm = steps.iter().any(|s| {
        (is(s, "Replace") && str_at(&s["pattern"], "String") == meta)
            || (is(s, "Metaspace") && str_at(s, "replacement") == meta)
    });
    if !spm {
        let end_of_word_suffix = str_at(model, "end_of_word_suffix").unwrap_or_default();
        return Kind::ByteLevel { end_of_word_suffix };
    }
    // A Split pre-tokenizer on a plain string never splits real text: no prefix, no pattern.
    let pre = &json["pre_tokenizer"];
    let no_op = pre.get("type").and_then(Json::as_str) == Some("Split")
        && pre
            .get("pattern")
            .is_some_and(|p| p.get("Regex").is_none_or(Json::is_null));
    let dummy_prefix = !no_op
        && steps.iter().any(|s| {
            (is(s, "Metaspace") && s.get("add_prefix_space") == Some(&Json::Bool(true)))
                || (is(s, "Strip") && str_at(s, "content").as_deref() == Some(" "))
        });
    Kind::SentencePiece {
        dummy_prefix,
        whole_pieces: no_op || gemma,
    }
}

/// The added tokens, split out of text before anything else, by longest match.
#[derive(Debug, Default)]
pub(crate) struct AddedTokens {
    /// Trie over characters: children of each node, and the token ending there.
    children: Vec<HashMap<char, usize>>,
    ends: Vec<Option<(u32, bool)>>,
}

impl AddedTokens {
    /// From tokenizer.json's `added_tokens` (content, id, rstrip).
    pub fn from_json(json: &Json) -> Self {
        let mut trie = Self {
            children: vec![HashMap::new()],
            ends: vec![None],
        };
        for token in json["added_tokens"].as_array().into_iter().flatten() {
            let id = token["id"].as_u64().and_then(|id| u32::try_from(id).ok());
            let (Some(content), Some(id)) = (token["content"].as_str(), id) else {
                continue;
            };
            let rstrip = token["rstrip"].as_bool().unwrap_or(false);
            let mut node = 0;
            for c in content.chars() {
                node = match trie.children[node].get(&c) {
                    Some(&next) => next,
                    None => {
                        trie.children.push(HashMap::new());
                        trie.ends.push(None);
                        let next = trie.children.len() - 1;
                        trie.children[node].insert(c, next);
                        next
                    }
                };
            }
            if node != 0 {
                trie.ends[node] = Some((id, rstrip));
            }
        }
        trie
    }

    /// Splits `text` into added token ids (`Ok`) and the text between them (`Err`). As in the
    /// runtime, the text after a token with `rstrip` loses its leading whitespace, and a failed
    /// match that reaches the last character ends the search.
    pub fn split<'t>(&self, text: &'t str) -> Vec<Result<u32, &'t str>> {
        let mut out = Vec::new();
        let (mut seg, mut pos, mut strip_next) = (0, 0, false);
        let last_char = text.char_indices().last().map_or(0, |(i, _)| i);
        while pos < text.len() {
            let (mut node, mut found, mut stop) = (0, None, text.len());
            for (i, c) in text[pos..].char_indices() {
                let Some(&next) = self.children[node].get(&c) else {
                    stop = pos + i;
                    break;
                };
                node = next;
                let end = pos + i + c.len_utf8();
                if let Some(value) = self.ends[node] {
                    found = Some((end, value));
                }
            }
            let Some((end, (id, rstrip))) = found else {
                // The runtime gives up when the failed match reached the last character.
                if stop >= last_char {
                    break;
                }
                pos += text[pos..].chars().next().map_or(1, char::len_utf8);
                continue;
            };
            push_text(&mut out, &text[seg..pos], strip_next);
            out.push(Ok(id));
            (seg, pos, strip_next) = (end, end, rstrip);
        }
        push_text(&mut out, &text[seg..], strip_next);
        out
    }
}

fn push_text<'t>(out: &mut Vec<Result<u32, &'t str>>, text: &'t str, strip: bool) {
    let text = match strip {
        true => text.trim_start_matches([' ', '\n', '\r', '\t']),
        false => text,
    };
    if !text.is_empty() {
        out.push(Err(text));
    }
}
