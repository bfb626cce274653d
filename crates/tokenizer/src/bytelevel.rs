//! Encoding for byte-level BPE (GPT-2, Qwen, ...) the runtime's way: HF normalizers are ignored;
//! text between added tokens is pre-tokenized by the Split regexes of a Sequence pre-tokenizer
//! (each run in turn, unmatched text kept as pieces), else by a top-level Split regex or the GPT-2
//! pattern, all with the runtime's matchers ([`crate::pretok`]); each piece is spelled in GPT-2's
//! byte alphabet, looked up whole, and otherwise BPE-merged from its bytes.

use serde_json::Value as Json;

use crate::bpe::Bpe;
use crate::detok::byte_char;
use crate::pretok::{self, Classifier, Matcher};

/// Pre-tokenizer types the runtime accepts.
const KNOWN_TYPES: [&str; 12] = [
    "BertPreTokenizer",
    "ByteLevel",
    "CharDelimiterSplit",
    "Digits",
    "Metaspace",
    "PreTokenizer",
    "Punctuation",
    "Sequence",
    "Split",
    "UnicodeScripts",
    "Whitespace",
    "WhitespaceSplit",
];

#[derive(Debug)]
enum Splitter {
    /// One pattern; a character no matcher takes is a piece of its own.
    Single(Vec<Matcher>),
    /// Split steps of a Sequence, each applied to the pieces of the one before.
    Steps(Vec<Vec<Matcher>>),
}

#[derive(Debug)]
pub(crate) struct ByteLevelEncoder {
    bpe: Bpe,
    splitter: Splitter,
    /// Token of each byte's character.
    byte_ids: [Option<u32>; 256],
}

impl ByteLevelEncoder {
    /// None when the pre-tokenizer uses a pattern this crate does not reproduce (the caller then
    /// uses the `tokenizers` library).
    pub fn new(json: &Json, bpe: Bpe, model_name: &str) -> Option<Self> {
        let default = if model_name == "Llama" {
            pretok::LLAMA
        } else {
            pretok::GPT2
        };
        let pre = &json["pre_tokenizer"];
        let ty = pre["type"].as_str();
        if ty.is_some_and(|t| !KNOWN_TYPES.contains(&t)) {
            return None;
        }
        let splitter = match (ty, pre["pattern"]["Regex"].as_str()) {
            (Some("Split"), Some(regex)) => Splitter::Single(pretok::compile(regex)?),
            (Some("Split"), None) => Splitter::Single(pretok::compile(default)?),
            _ => {
                let mut steps = Vec::new();
                for step in pre["pretokenizers"].as_array().into_iter().flatten() {
                    match (step["type"].as_str(), step["pattern"]["Regex"].as_str()) {
                        (Some("Split"), Some(regex)) => {
                            steps.push(pretok::compile(&escape(regex))?)
                        }
                        // The runtime stops reading the list here.
                        (Some("Split"), None) | (None, _) => break,
                        (Some(t), _) if !KNOWN_TYPES.contains(&t) => return None,
                        _ => {}
                    }
                }
                match steps.is_empty() {
                    true => Splitter::Single(pretok::compile(default)?),
                    false => Splitter::Steps(steps),
                }
            }
        };
        let mut byte_ids = [None; 256];
        for (b, slot) in (0u8..=255).zip(byte_ids.iter_mut()) {
            *slot = bpe.vocab.get(&byte_char(b).to_string()).copied();
        }
        Some(Self {
            bpe,
            splitter,
            byte_ids,
        })
    }

    /// Appends the ids of a piece of text (no added tokens in it).
    pub fn encode_text(&self, classifier: &Classifier, text: &str, out: &mut Vec<u32>) {
        let chars = classifier.classify(text);
        let pieces = match &self.splitter {
            Splitter::Single(matchers) => pretok::split(matchers, &chars),
            Splitter::Steps(steps) => {
                let mut pieces: Vec<_> = std::iter::once(0..chars.len()).collect();
                for step in steps {
                    let split = |r: std::ops::Range<usize>| {
                        let start = r.start;
                        pretok::split_isolated(step, &chars[r])
                            .into_iter()
                            .map(move |p| p.start + start..p.end + start)
                    };
                    pieces = pieces.into_iter().flat_map(split).collect();
                }
                pieces
            }
        };
        for range in pieces {
            let piece: String = chars[range].iter().map(|&(c, _)| c).collect();
            let spelled: String = piece.bytes().map(byte_char).collect();
            if let Some(&id) = self.bpe.vocab.get(&spelled) {
                out.push(id);
                continue;
            }
            let symbols = piece
                .bytes()
                .filter_map(|b| self.byte_ids[usize::from(b)].or(self.bpe.unk))
                .collect();
            out.extend(self.bpe.merge(symbols));
        }
    }
}

/// Control characters written literally in a pattern, as escapes (the runtime does this to the
/// patterns of Sequence steps).
fn escape(regex: &str) -> String {
    let mut out = String::with_capacity(regex.len());
    for c in regex.chars() {
        match c {
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\x0C' => out.push_str("\\f"),
            '\x0B' => out.push_str("\\v"),
            _ => out.push(c),
        }
    }
    out
}
