//! Streaming detokenizer: turns generated ids, one at a time, into text chunks whose
//! concatenation equals `Tokenizer::decode` of all the ids, never splitting a UTF-8 character.
//!
//! For BPE tokenizers, decoded with the runtime's byte-wise rules, each id adds bytes: the
//! complete characters are emitted and an unfinished one (at most 3 bytes) is held back. Like
//! decode, the stream ends at the first invalid sequence (emitting one U+FFFD) or NUL byte; at
//! `flush`, a held-back partial character becomes U+FFFD, and so does a stream that produced no
//! text at all from at least one id (decode's answer for, say, a lone special token).
//!
//! For other tokenizers (decoded by the `tokenizers` library) it keeps a small window of ids:
//! `window[..read]` is context that was already emitted, `window[read..]` is held back. Each push
//! decodes the window and emits what the held tokens add to the context's text, unless that text
//! ends in U+FFFD (an incomplete character). After each emission the window slides, so a long
//! generation costs O(1) per token.

use crate::detok::{Stop, scan};
use crate::{Error, Tokenizer};

/// Held-back tokens after which a chunk is emitted even if it ends in U+FFFD (window mode only).
/// A character is at most 4 bytes, so real text never gets here; this only bounds the work on
/// hostile id streams.
const MAX_HELD: usize = 64;

/// Incremental decoder made by [`Tokenizer::stream`].
#[derive(Debug)]
pub struct StreamDecoder<'a> {
    tokenizer: &'a Tokenizer,
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
    /// Byte mode: ids seen, text emitted, and whether the text has ended.
    seen_ids: bool,
    emitted: bool,
    ended: bool,
}

impl<'a> StreamDecoder<'a> {
    pub(crate) fn new(tokenizer: &'a Tokenizer) -> Self {
        Self {
            tokenizer,
            window: Vec::new(),
            read: 0,
            context_text: String::new(),
            pending: Vec::new(),
            after_special: false,
            seen_ids: false,
            emitted: false,
            ended: false,
        }
    }

    /// Adds one id; returns the text it completes, if any. An id not in the vocabulary is an
    /// error and leaves the decoder unchanged.
    pub fn push(&mut self, id: i32) -> Result<Option<String>, Error> {
        let id = self.tokenizer.check_id(id)?;
        if self.tokenizer.decodes_bytes() {
            return Ok(self.push_bytes(id));
        }
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
        if self.tokenizer.decodes_bytes() {
            let unfinished = !self.pending.is_empty() || (self.seen_ids && !self.emitted);
            if self.ended || !unfinished {
                return Ok(None);
            }
            self.ended = true;
            self.window.clear();
            self.pending.clear();
            return Ok(Some(self.chunk(String::new(), true)));
        }
        if self.read == self.window.len() {
            return Ok(None);
        }
        let text = self.tokenizer.decode_checked(&self.window)?;
        self.emit(text)
    }

    /// Forgets all ids, to start a new sequence.
    pub fn reset(&mut self) {
        *self = Self::new(self.tokenizer);
    }

    /// Number of ids kept for context and held back (stays small however long the stream).
    pub fn window_len(&self) -> usize {
        self.window.len()
    }

    fn push_bytes(&mut self, id: u32) -> Option<String> {
        self.seen_ids = true;
        if self.ended {
            return None;
        }
        let tokenizer = self.tokenizer;
        tokenizer.push_bytes(id, &mut self.after_special, &mut self.pending);
        self.window.push(id);
        let (valid, end) = match scan(&self.pending) {
            Stop::End => (self.pending.len(), None),
            Stop::Partial(at) => (at, None),
            Stop::Bad(at) => (at, Some(true)),
            Stop::Nul(at) => (at, Some(false)),
        };
        let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
        self.pending.drain(..valid);
        if self.pending.is_empty() {
            self.window.clear();
        }
        match end {
            None => (!text.is_empty()).then(|| self.chunk(text, false)),
            Some(bad) => {
                self.ended = true;
                self.pending.clear();
                self.window.clear();
                let replace = bad || (text.is_empty() && !self.emitted);
                (replace || !text.is_empty()).then(|| self.chunk(text, replace))
            }
        }
    }

    /// A byte-mode chunk, with a U+FFFD appended if asked.
    fn chunk(&mut self, mut text: String, replacement: bool) -> String {
        if replacement {
            text.push('\u{FFFD}');
        }
        self.emitted = true;
        text
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
