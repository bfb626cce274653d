//! Streaming detokenizer: turns generated ids, one at a time, into text chunks whose
//! concatenation equals `Tokenizer::decode` of all the ids, never splitting a UTF-8 character.
//!
//! It keeps a small window of ids: `window[..read]` is context that was already emitted (the
//! tokens of the previous chunk), `window[read..]` is held back. Each push decodes the window and
//! emits what the held tokens add to the context's text, unless that text ends in U+FFFD (an
//! incomplete character: byte-fallback or byte-level pieces still to come). The context gives
//! decoders that treat the first token specially (SentencePiece's leading-space strip) the same
//! view as a whole-sequence decode. After each emission the window slides, so a long generation
//! costs O(1) per token.

use crate::{Error, Tokenizer};

/// Held-back tokens after which a chunk is emitted even if it ends in U+FFFD. A character is at
/// most 4 bytes, so real text never gets here; this only bounds the work on hostile id streams.
const MAX_HELD: usize = 64;

/// Incremental decoder made by [`Tokenizer::stream`].
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tokenizer: &'a Tokenizer,
    /// Context ids followed by held-back ids.
    window: Vec<u32>,
    /// Start of the held-back ids in `window`.
    read: usize,
    /// Decoded text of `window[..read]`.
    context_text: String,
}

impl<'a> StreamDecoder<'a> {
    pub(crate) fn new(tokenizer: &'a Tokenizer) -> Self {
        Self {
            tokenizer,
            window: Vec::new(),
            read: 0,
            context_text: String::new(),
        }
    }

    /// Adds one id; returns the text it completes, if any. An id not in the vocabulary is an
    /// error and leaves the decoder unchanged.
    pub fn push(&mut self, id: i32) -> Result<Option<String>, Error> {
        let id = self.tokenizer.check_id(id)?;
        if self.tokenizer.is_skipped(id) {
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
    }

    /// Number of ids kept for context and held back (stays small however long the stream).
    pub fn window_len(&self) -> usize {
        self.window.len()
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
    use super::common_prefix_len;

    #[test]
    fn common_prefix_is_on_char_boundaries() {
        assert_eq!(common_prefix_len("ab", "abc"), 2);
        assert_eq!(common_prefix_len("aé", "aè"), 1);
        assert_eq!(common_prefix_len("abc", "ab"), 2);
        assert_eq!(common_prefix_len("", "x"), 0);
    }
}
