//! Streaming detokenizer: turns generated ids, one at a time, into text chunks, never splitting
//! a UTF-8 character, with the official runtime's streaming rules.
//!
//! For BPE tokenizers, decoded with the runtime's byte-wise rules, each id adds bytes to a
//! pending buffer, which is then cut into characters by their lead byte's declared length
//! (high nibble 0x0-0xB: 1 byte, 0xC-0xD: 2, 0xE: 3, 0xF: 4). Each whole cut is emitted when it
//! is a valid character — not NUL, not U+FFFE/U+FFFF — and silently dropped otherwise; a last
//! cut that is still short stays pending for the next id. So unlike `decode` (which stops at the
//! first invalid sequence with one U+FFFD) a stream skips broken bytes and goes on; for valid
//! text the two agree. `flush` drops whatever is still pending, as the official stream (which
//! has no flush) never emits it.
//!
//! For other tokenizers (decoded by the `tokenizers` library) it keeps a small window of ids:
//! `window[..read]` is context that was already emitted, `window[read..]` is held back. Each push
//! decodes the window and emits what the held tokens add to the context's text, unless that text
//! ends in U+FFFD (an incomplete character). After each emission the window slides, so a long
//! generation costs O(1) per token.

use crate::Error;
use crate::tokenizer::Tokenizer;
use std::ops::Deref;
use std::sync::Arc;

/// Held-back tokens after which a chunk is emitted even if it ends in U+FFFD (window mode only).
/// A character is at most 4 bytes, so real text never gets here; this only bounds the work on
/// hostile id streams.
const MAX_HELD: usize = 64;

/// Incremental decoder made by [`Tokenizer::stream`] (borrowing the tokenizer) or
/// [`StreamDecoder::shared`] (holding an `Arc` of it). Thread safety: `Send + Sync`, one stream
/// per sequence, mutated through `&mut self`.
#[derive(Debug)]
pub struct StreamDecoder<T: Deref<Target = Tokenizer>> {
    tokenizer: T,
    /// Window mode: context ids followed by held-back ids. Byte mode: the held-back ids.
    window: Vec<u32>,
    /// Window mode: start of the held-back ids in `window`.
    read: usize,
    /// Window mode: decoded text of `window[..read]`.
    context_text: String,
    /// Byte mode: bytes of an unfinished character.
    pending: Vec<u8>,
    /// Byte mode: whether the last id was a special token.
    after_special: bool,
}

impl Tokenizer {
    /// A streaming decoder: feed it generated ids one at a time.
    pub fn stream(&self) -> StreamDecoder<&Tokenizer> {
        StreamDecoder::new(self)
    }
}

impl StreamDecoder<Arc<Tokenizer>> {
    /// A decoder that keeps the tokenizer alive itself.
    pub fn shared(tokenizer: Arc<Tokenizer>) -> Self {
        Self::new(tokenizer)
    }
}

impl<T: Deref<Target = Tokenizer>> StreamDecoder<T> {
    pub(crate) fn new(tokenizer: T) -> Self {
        Self {
            tokenizer,
            window: Vec::new(),
            read: 0,
            context_text: String::new(),
            pending: Vec::new(),
            after_special: false,
        }
    }

    /// Adds one id; returns the text it completes, if any. An id not in the vocabulary adds
    /// the model's unknown token, as in decode.
    pub fn push(&mut self, id: i32) -> Result<Option<String>, Error> {
        let id = self.tokenizer.resolve_id(id);
        if self.tokenizer.decodes_bytes() {
            return Ok(self.push_bytes(id));
        }
        if id == crate::tokenizer::UNKNOWN_ID || self.tokenizer.is_skipped(id) {
            // decode() drops special tokens before its decoder runs, so they add nothing.
            return Ok(None);
        }
        self.window.push(id);
        let text = self.tokenizer.decode_checked(&self.window)?;
        let complete = text.len() > self.context_text.len() && !text.ends_with('\u{FFFD}');
        if complete || self.window.len() - self.read > MAX_HELD {
            self.emit(text)
        } else {
            Ok(None)
        }
    }

    /// Emits whatever is still held back (at the end of a generation).
    pub fn flush(&mut self) -> Result<Option<String>, Error> {
        if self.tokenizer.decodes_bytes() {
            self.pending.clear();
            self.window.clear();
            return Ok(None);
        }
        if self.read == self.window.len() {
            return Ok(None);
        }
        let text = self.tokenizer.decode_checked(&self.window)?;
        self.emit(text)
    }

    /// Forgets all ids, to start a new sequence.
    pub fn reset(&mut self) {
        self.window.clear();
        self.read = 0;
        self.context_text.clear();
        self.pending.clear();
        self.after_special = false;
    }

    /// Ids (window mode) or bytes (byte mode) kept for context and held back; stays small
    /// however long the stream.
    pub fn window_len(&self) -> usize {
        self.window.len() + self.pending.len()
    }

    fn push_bytes(&mut self, id: u32) -> Option<String> {
        self.tokenizer
            .push_bytes(id, &mut self.after_special, &mut self.pending);
        let mut text = String::new();
        let mut at = 0;
        while let Some(&lead) = self.pending.get(at) {
            let len = declared_len(lead);
            let Some(cut) = self.pending.get(at..at + len) else {
                break;
            };
            if let Some(c) = whole_char(cut) {
                text.push(c);
            }
            at += len;
        }
        self.pending.drain(..at);
        (!text.is_empty()).then_some(text)
    }

    /// Returns the part of `text` (the decoded window) past the context, and slides the window
    /// so that the ids just emitted become the context.
    fn emit(&mut self, text: String) -> Result<Option<String>, Error> {
        let start = common_prefix_len(&self.context_text, &text);
        let chunk = text.get(start..).unwrap_or_default().to_owned();
        self.window.drain(..self.read);
        self.read = self.window.len();
        self.context_text = self.tokenizer.decode_checked(&self.window)?;
        Ok((!chunk.is_empty()).then_some(chunk))
    }
}

/// Byte length of the longest common prefix of `a` and `b` that ends on a char boundary.
/// Normally `b` starts with all of `a`; decoders that rewrite earlier text are the exception.
/// The length a UTF-8 lead byte declares, read from its high nibble alone (continuation and
/// invalid bytes count as one byte, 0xF8-0xFF as four).
fn declared_len(lead: u8) -> usize {
    match lead >> 4 {
        0x0..=0xB => 1,
        0xC | 0xD => 2,
        0xE => 3,
        _ => 4,
    }
}

/// The character `bytes` encode, if they are exactly one valid one that the stream emits (NUL,
/// U+FFFE and U+FFFF are not).
fn whole_char(bytes: &[u8]) -> Option<char> {
    let mut chars = std::str::from_utf8(bytes).ok()?.chars();
    let c = chars.next()?;
    let emitted = chars.next().is_none() && !matches!(c, '\0' | '\u{FFFE}' | '\u{FFFF}');
    emitted.then_some(c)
}

fn common_prefix_len(a: &str, b: &str) -> usize {
    if b.starts_with(a) {
        return a.len();
    }
    a.char_indices()
        .zip(b.chars())
        .find(|((_, ca), cb)| ca != cb)
        .map_or(a.len().min(b.len()), |((i, _), _)| i)
}

#[cfg(test)]
mod tests {
    use super::{common_prefix_len, declared_len, whole_char};

    #[test]
    fn cuts_follow_the_lead_nibble_and_drop_what_is_not_one_character() {
        assert_eq!(declared_len(b'a'), 1);
        assert_eq!(declared_len(0x80), 1);
        assert_eq!(declared_len(0xC3), 2);
        assert_eq!(declared_len(0xE2), 3);
        assert_eq!(declared_len(0xF0), 4);
        assert_eq!(declared_len(0xFF), 4);
        assert_eq!(whole_char("é".as_bytes()), Some('é'));
        assert_eq!(whole_char(&[0x80]), None);
        assert_eq!(whole_char(&[0]), None);
        assert_eq!(whole_char("\u{FFFF}".as_bytes()), None);
        assert_eq!(whole_char(&[0xF0, b'a', b'b', b'c']), None);
        assert_eq!(whole_char(&[0xC0, 0x80]), None);
    }

    #[test]
    fn common_prefix_is_on_char_boundaries() {
        assert_eq!(common_prefix_len("ab", "abc"), 2);
        assert_eq!(common_prefix_len("aé", "aè"), 1);
        assert_eq!(common_prefix_len("abc", "ab"), 2);
        assert_eq!(common_prefix_len("", "x"), 0);
    }
}
