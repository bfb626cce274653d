//! Encoding for SentencePiece-style BPE (Metaspace or Prepend+Replace, usually byte fallback) the
//! runtime's way, not the `tokenizers` pipeline's: HF normalizers and pre-tokenizers are ignored;
//! each piece of text between added tokens gets a "▁" prefix when the decoder strips one
//! (SentencePiece's add_dummy_prefix); a piece that then starts with "▁ " is BPE-merged as a whole
//! (in chunks of about ten symbols, cut before a space), any other piece is first split with the
//! LLaMA pattern ([`crate::pretok`]) and each part is looked up whole before being BPE-merged.
//! Characters missing from the vocabulary become `<0xNN>` tokens.

use crate::bpe::Bpe;
use crate::pretok::{self, Ch, Classifier, Matcher};

const META: char = '\u{2581}';

#[derive(Debug)]
pub(crate) struct SpmEncoder {
    bpe: Bpe,
    /// Token of each single byte: the character itself if in the vocabulary, else `<0xNN>`.
    byte_ids: [Option<u32>; 256],
    matchers: Vec<Matcher>,
    /// Prefix each piece of text with "▁".
    dummy_prefix: bool,
    /// Never pre-tokenize (a no-op Split pre-tokenizer, or a Gemma tokenizer).
    whole_pieces: bool,
}

impl SpmEncoder {
    pub fn new(bpe: Bpe, dummy_prefix: bool, whole_pieces: bool) -> Self {
        let mut byte_ids = [None; 256];
        for (b, slot) in (0u8..=255).zip(byte_ids.iter_mut()) {
            let own = b
                .is_ascii()
                .then(|| bpe.vocab.get(&char::from(b).to_string()))
                .flatten();
            *slot = own
                .or_else(|| bpe.vocab.get(&format!("<0x{b:02X}>")))
                .copied();
        }
        let matchers = pretok::compile(pretok::LLAMA).unwrap_or_default();
        Self {
            bpe,
            byte_ids,
            matchers,
            dummy_prefix,
            whole_pieces,
        }
    }

    /// Appends the ids of a piece of text (no added tokens in it).
    pub fn encode_text(&self, classifier: &Classifier, text: &str, out: &mut Vec<u32>) {
        let starts_with_space = text.starts_with(' ');
        let text = match self.dummy_prefix {
            true => format!("{META}{text}"),
            false => text.to_owned(),
        };
        let chars = classifier.classify(&text);
        if self.whole_pieces || (self.dummy_prefix && starts_with_space) {
            self.encode_chunks(&chars, out);
            return;
        }
        for range in pretok::split(&self.matchers, &chars) {
            let word: String = chars[range]
                .iter()
                .map(|&(c, _)| space_to_meta(c))
                .collect();
            if let Some(id) = self.lookup(&word) {
                out.push(id);
                continue;
            }
            let mut symbols = Vec::new();
            word.chars().for_each(|c| self.push_char(c, &mut symbols));
            out.extend(self.bpe.merge(symbols));
        }
    }

    /// BPE over the whole text, cut into chunks: after more than 10 symbols, before a space or
    /// newline that follows a non-space; after more than 100 symbols, anywhere.
    fn encode_chunks(&self, chars: &[Ch], out: &mut Vec<u32>) {
        let is_split = |c: char| matches!(c, ' ' | '\n' | '\r' | META);
        let mut symbols = Vec::new();
        for (pos, &(c, _)) in chars.iter().enumerate() {
            let boundary = pos > 0 && !is_split(chars[pos - 1].0) && is_split(c);
            if symbols.len() > 10 && (boundary || symbols.len() > 100) {
                out.extend(self.bpe.merge(std::mem::take(&mut symbols)));
            }
            self.push_char(space_to_meta(c), &mut symbols);
        }
        out.extend(self.bpe.merge(symbols));
    }

    /// A token of the vocabulary (single ASCII characters may also be byte tokens).
    fn lookup(&self, s: &str) -> Option<u32> {
        match s.as_bytes() {
            [b] if b.is_ascii() => self.byte_ids[usize::from(*b)],
            _ => self.bpe.vocab.get(s).copied(),
        }
    }

    /// The symbols of one character: its token, else its UTF-8 bytes' tokens.
    fn push_char(&self, c: char, symbols: &mut Vec<u32>) {
        let mut buf = [0u8; 4];
        let s = c.encode_utf8(&mut buf);
        if let Some(id) = self.lookup(s) {
            symbols.push(id);
            return;
        }
        for &b in s.as_bytes() {
            symbols.extend(self.byte_ids[usize::from(b)].or(self.bpe.unk));
        }
    }
}

fn space_to_meta(c: char) -> char {
    if c == ' ' { META } else { c }
}
