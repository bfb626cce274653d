//! Decoding with the runtime's rules (onnxruntime-extensions' BPE decoder), token by token into
//! bytes, then one UTF-8 check over the whole text:
//! - special tokens give nothing; other added tokens give their text as is;
//! - SentencePiece-style pieces: `<0xNN>` is that byte, "▁" is a space, and with a dummy prefix a
//!   piece right after a special token loses one leading space (the first piece keeps it);
//! - byte-level pieces map back through GPT-2's byte alphabet (an end-of-word suffix becomes a
//!   space);
//! - the text stops at a NUL byte (the C API hands out C strings), and at the first invalid or
//!   incomplete UTF-8 sequence, which is replaced by one U+FFFD with everything after it dropped.
//!   U+FFFE and U+FFFF count as invalid. An empty text from a non-empty id list is also U+FFFD.

use crate::model::Kind;

/// Where the runtime's UTF-8 check stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// All valid.
    End,
    /// A NUL byte at this offset.
    Nul(usize),
    /// An invalid sequence starts here.
    Bad(usize),
    /// A sequence starting here is cut off by the end but may still be completed.
    Partial(usize),
}

/// Checks `bytes` as the runtime does.
pub(crate) fn scan(bytes: &[u8]) -> Stop {
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let (len, second) = match b {
            0 => return Stop::Nul(i),
            0x01..=0x7F => (1, 0x80..=0xBF),
            0xC2..=0xDF => (2, 0x80..=0xBF),
            0xE0 => (3, 0xA0..=0xBF),
            0xED => (3, 0x80..=0x9F),
            0xE1..=0xEF => (3, 0x80..=0xBF),
            0xF0 => (4, 0x90..=0xBF),
            0xF1..=0xF3 => (4, 0x80..=0xBF),
            0xF4 => (4, 0x80..=0x8F),
            _ => return Stop::Bad(i),
        };
        let tail = &bytes[i + 1..bytes.len().min(i + len)];
        let ok = tail.iter().enumerate().all(|(k, &c)| match k {
            0 => second.contains(&c),
            _ => (0x80..=0xBF).contains(&c),
        });
        // U+FFFE and U+FFFF (EF BF BE, EF BF BF) are rejected too.
        let nonchar = b == 0xEF && tail.len() == 2 && tail[0] == 0xBF && tail[1] >= 0xBE;
        if !ok || nonchar {
            return Stop::Bad(i);
        }
        if tail.len() + 1 < len {
            return Stop::Partial(i);
        }
        i += len;
    }
    Stop::End
}

/// The text of the bytes of a non-empty id list.
pub(crate) fn finish(bytes: &[u8]) -> String {
    let (valid, bad) = match scan(bytes) {
        Stop::End => (bytes.len(), false),
        Stop::Nul(at) => (at, false),
        Stop::Bad(at) | Stop::Partial(at) => (at, true),
    };
    let mut text = String::from_utf8_lossy(&bytes[..valid]).into_owned();
    if bad || text.is_empty() {
        text.push('\u{FFFD}');
    }
    text
}

/// What decoding one token needs to know.
pub(crate) enum Token<'a> {
    Special,
    /// An added token that is not special: its text.
    Added(&'a str),
    /// A piece of the model's vocabulary.
    Piece(&'a str),
}

/// Appends the bytes of one token; `after_special` carries whether the previous token was special.
pub(crate) fn push_token(
    kind: &Kind,
    token: Token<'_>,
    after_special: &mut bool,
    out: &mut Vec<u8>,
) {
    let start = out.len();
    match (token, kind) {
        (Token::Special, _) => {
            *after_special = true;
            return;
        }
        (Token::Added(text), _) => out.extend_from_slice(text.as_bytes()),
        (Token::Piece(piece), Kind::SentencePiece { .. }) => match byte_piece(piece) {
            Some(b) => out.push(b),
            None => out.extend_from_slice(piece.replace('\u{2581}', " ").as_bytes()),
        },
        (Token::Piece(piece), Kind::ByteLevel { end_of_word_suffix }) => {
            let suffix = end_of_word_suffix.as_str();
            let stem = piece.strip_suffix(suffix).filter(|_| !suffix.is_empty());
            push_byte_level(stem.unwrap_or(piece), out);
            if stem.is_some() {
                out.push(b' ');
            }
        }
        (Token::Piece(piece), Kind::Other) => out.extend_from_slice(piece.as_bytes()),
    }
    let dummy_prefix = matches!(
        kind,
        Kind::SentencePiece {
            dummy_prefix: true,
            ..
        }
    );
    if dummy_prefix && *after_special && out.get(start) == Some(&b' ') {
        out.remove(start);
    }
    *after_special = false;
}

/// `<0xNN>` byte-fallback pieces; like `strtol`, only the leading hex digits count.
fn byte_piece(piece: &str) -> Option<u8> {
    let b = piece.as_bytes();
    if b.len() != 6 || !piece.starts_with("<0x") || b[5] != b'>' {
        return None;
    }
    let digits: Vec<u8> = b[3..5]
        .iter()
        .map_while(|&d| char::from(d).to_digit(16))
        .filter_map(|d| u8::try_from(d).ok())
        .collect();
    Some(
        digits
            .iter()
            .fold(0u8, |acc, &d| acc.wrapping_mul(16).wrapping_add(d)),
    )
}

/// GPT-2's byte alphabet backwards: printable Latin-1 characters are themselves, the other bytes
/// are U+0100 onwards in order. Other characters below U+0100 pass as one byte, the rest as UTF-8.
fn push_byte_level(piece: &str, out: &mut Vec<u8>) {
    for c in piece.chars() {
        let code = u32::from(c);
        let shifted = code
            .checked_sub(256)
            .and_then(|k| usize::try_from(k).ok())
            .and_then(|k| SHIFTED.get(k));
        match (u8::try_from(code), shifted) {
            (Ok(b), _) | (_, Some(&b)) => out.push(b),
            _ => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
}

/// The character GPT-2's byte alphabet spells byte `b` with.
pub(crate) fn byte_char(b: u8) -> char {
    let shifted = SHIFTED.iter().position(|&s| s == b);
    let code = shifted
        .and_then(|k| u32::try_from(k).ok())
        .map_or(u32::from(b), |k| 256 + k);
    char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The bytes GPT-2 spells as U+0100, U+0101, ...: those that are not printable Latin-1.
const SHIFTED: [u8; 68] = {
    let mut table = [0u8; 68];
    let (mut b, mut k) = (0usize, 0usize);
    while b < 256 {
        let printable = matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
        if !printable {
            table[k] = b as u8;
            k += 1;
        }
        b += 1;
    }
    table
};
