//! The runtime's pre-tokenizer (onnxruntime-extensions): it does not run a split regex as a regex
//! but recognises known alternatives in the pattern text and runs a hand-written matcher for each,
//! tried in the order they appear. Where "whitespace" (`\s`) is the Unicode separators (Z) plus
//! `\t\n\v\f\r`, and `\s*[\r\n]+` does not backtrack. [`compile`] returns None for a pattern with
//! any part this crate does not reproduce (the runtime falls back to `std::regex` there).

use std::collections::BTreeMap;

use tokenizers::utils::SysRegex;

const LETTER: u8 = 1;
const NUMBER: u8 = 2;
const SPACE: u8 = 4;
const MARK: u8 = 8;

/// A character with its class bits.
pub(crate) type Ch = (char, u8);

/// Classifies characters by Unicode general category.
#[derive(Debug)]
pub(crate) struct Classifier(Vec<(SysRegex, u8)>);

impl Classifier {
    pub fn new() -> Self {
        let classes = [
            (r"\p{L}+", LETTER),
            (r"\p{N}+", NUMBER),
            (r"\p{Z}+", SPACE),
            (r"\p{M}+", MARK),
        ];
        Self(
            classes
                .into_iter()
                .filter_map(|(p, bit)| SysRegex::new(p).ok().map(|re| (re, bit)))
                .collect(),
        )
    }

    /// The characters of `text` with their classes.
    pub fn classify(&self, text: &str) -> Vec<Ch> {
        let mut by_byte = vec![0u8; text.len()];
        for (regex, bit) in &self.0 {
            for (start, end) in regex.find_iter(text) {
                by_byte[start..end].iter_mut().for_each(|c| *c |= bit);
            }
        }
        let control = |c: char| matches!(c, '\t' | '\n' | '\x0B' | '\x0C' | '\r');
        text.char_indices()
            .map(|(i, c)| (c, by_byte[i] | if control(c) { SPACE } else { 0 }))
            .collect()
    }
}

fn l(c: Ch) -> bool {
    c.1 & LETTER != 0
}
fn n(c: Ch) -> bool {
    c.1 & NUMBER != 0
}
fn z(c: Ch) -> bool {
    c.1 & SPACE != 0
}
fn lm(c: Ch) -> bool {
    c.1 & (LETTER | MARK) != 0
}
fn rn(c: Ch) -> bool {
    matches!(c.0, '\r' | '\n')
}
/// `[^\s\p{L}\p{N}]`
fn other(c: Ch) -> bool {
    c.1 & (LETTER | NUMBER | SPACE) == 0
}
/// `[^\s\p{L}\p{M}\p{N}]`
fn other_m(c: Ch) -> bool {
    c.1 & (LETTER | NUMBER | SPACE | MARK) == 0
}

/// Length of the run of `t` from `from` whose characters satisfy `f`.
fn run(t: &[Ch], from: usize, f: fn(Ch) -> bool) -> usize {
    t.get(from..)
        .map_or(0, |rest| rest.iter().take_while(|&&c| f(c)).count())
}

/// The hand-written matchers; each returns the length matched at the start of `t` (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Matcher {
    /// `'s|'t|'re|'ve|'m|'ll|'d`, `ignore_case` for the `(?i:...)` form.
    Contraction { ignore_case: bool },
    /// `[^\r\n\p{L}\p{N}]?\p{L}+`, or with `marks` `[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+`
    Letters { marks: bool },
    /// ` ?\p{L}+| ?\p{N}+`
    SpaceLettersOrDigits,
    /// `\p{N}{1,max}`
    Digits { max: usize },
    /// ` ?[^\s\p{L}\p{N}]+[\r\n]*` (`newlines`), ` ?[^\s\p{L}\p{N}]+`, or with `marks` also not \p{M}.
    Punctuation { newlines: bool, marks: bool },
    /// `\s*[\r\n]+`
    Newlines,
    /// `\s+(?!\S)|\s+`
    Spaces,
}

impl Matcher {
    fn len(self, t: &[Ch]) -> usize {
        let first = t[0];
        match self {
            Self::Contraction { ignore_case } => {
                let at = |i: usize| {
                    let c = t.get(i).map(|c| c.0);
                    if ignore_case {
                        c.map(|c| c.to_ascii_lowercase())
                    } else {
                        c
                    }
                };
                match (at(0), at(1), at(2)) {
                    (Some('\''), Some('s' | 't' | 'm' | 'd'), _) => 2,
                    (Some('\''), Some('r' | 'v'), Some('e'))
                    | (Some('\''), Some('l'), Some('l')) => 3,
                    _ => 0,
                }
            }
            Self::Letters { marks } => {
                let is = if marks { lm } else { l };
                let prefix_ok = (!rn(first) && !n(first)) || is(first);
                let second = t.get(1).is_some_and(|&c| is(c));
                if prefix_ok && (is(first) || second) {
                    1 + run(t, 1, is)
                } else {
                    0
                }
            }
            Self::SpaceLettersOrDigits => [l, n]
                .into_iter()
                .find_map(|is| match (first.0 == ' ', t.get(1)) {
                    (true, Some(&c)) if is(c) => Some(2 + run(t, 2, is)),
                    _ if is(first) => Some(1 + run(t, 1, is)),
                    _ => None,
                })
                .unwrap_or(0),
            Self::Digits { max } => {
                if n(first) {
                    1 + run(t, 1, n).min(max - 1)
                } else {
                    0
                }
            }
            Self::Punctuation { newlines, marks } => {
                let is = if marks { other_m } else { other };
                let start = usize::from(first.0 == ' ' && t.get(1).is_some_and(|&c| is(c)));
                if !is(t[start]) {
                    return 0;
                }
                let end = start + 1 + run(t, start + 1, is);
                end + if newlines { run(t, end, rn) } else { 0 }
            }
            Self::Newlines => {
                let end = 1 + run(t, 1, z);
                if z(first) && end > 1 && rn(t[end - 1]) {
                    end
                } else if rn(first) {
                    1 + run(t, 1, rn)
                } else {
                    0
                }
            }
            Self::Spaces => {
                let end = 1 + run(t, 1, z);
                match z(first) {
                    false => 0,
                    true if end > 1 && end != t.len() => end - 1,
                    true => end,
                }
            }
        }
    }
}

/// Pattern texts the runtime recognises, in its order; None: one this crate does not reproduce.
const KNOWN: [(&str, Option<Matcher>); 24] = {
    use Matcher::*;
    let (p, pm) = (
        Punctuation {
            newlines: true,
            marks: false,
        },
        Punctuation {
            newlines: true,
            marks: true,
        },
    );
    [
        (
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            None,
        ),
        (
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
            None,
        ),
        (
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+",
            None,
        ),
        (
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*",
            None,
        ),
        (
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])",
            Some(Contraction { ignore_case: true }),
        ),
        (
            r"(?i:'s|'t|'re|'ve|'m|'ll|'d)",
            Some(Contraction { ignore_case: true }),
        ),
        (r" ?[^\s\p{L}\p{N}]+[\r\n/]*", Some(p)),
        (r" ?[^\s\p{L}\p{N}]+[\r\n]*", Some(p)),
        (
            r"[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+",
            Some(Letters { marks: true }),
        ),
        (r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*", Some(pm)),
        (r"[^\r\n\p{L}\p{N}]?\p{L}+", Some(Letters { marks: false })),
        (
            r"'s|'t|'re|'ve|'m|'ll|'d",
            Some(Contraction { ignore_case: false }),
        ),
        (
            r" ?[^\s\p{L}\p{N}]+",
            Some(Punctuation {
                newlines: false,
                marks: false,
            }),
        ),
        (r" ?\p{L}+| ?\p{N}+", Some(SpaceLettersOrDigits)),
        (r"[\p{L}]+|[\p{N}]", None),
        (r"[^\s\p{L}\p{N}]+", None),
        (r"\s+(?!\S)|\s+", Some(Spaces)),
        (r"\p{N}{1,3}", Some(Digits { max: 3 })),
        (r"\s*[\r\n]+", Some(Newlines)),
        (r"\p{N}", Some(Digits { max: 1 })),
        ("[一-龥぀-ゟ゠-ヿ]+", None),
        (r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"##, None),
        (r"[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+", None),
        (r" ?[\p{P}\p{S}]+[\r\n]*", None),
    ]
};

/// The LLaMA pattern the runtime uses for SentencePiece-style models.
pub(crate) const LLAMA: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The GPT-2 pattern, the runtime's default for other BPE models.
pub(crate) const GPT2: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// The matchers the runtime makes of `regex`, in order, as its pattern compiler picks them out.
pub(crate) fn compile(regex: &str) -> Option<Vec<Matcher>> {
    let mut rest = regex.to_owned();
    let mut found = BTreeMap::new();
    for (pattern, matcher) in KNOWN {
        let Some(pos) = rest.find(pattern) else {
            continue;
        };
        let end = pos + pattern.len();
        if (pos > 0 && rest.as_bytes()[pos - 1] != b'|')
            || (end < rest.len() && rest.as_bytes()[end] != b'|')
        {
            continue;
        }
        found.insert(regex.find(pattern)?, matcher?);
        rest = match pos {
            0 => rest.get(end + 1..).unwrap_or_default().to_owned(),
            _ => format!("{}{}", &rest[..pos - 1], &rest[end..]),
        };
    }
    rest.is_empty().then(|| found.into_values().collect())
}

/// Length of the first match at the start of `t`, 0 if none.
fn first_match(matchers: &[Matcher], t: &[Ch]) -> usize {
    matchers
        .iter()
        .map(|m| m.len(t))
        .find(|&n| n > 0)
        .unwrap_or(0)
}

/// Splits into pieces (char ranges); a character no matcher takes is a piece of its own.
pub(crate) fn split(matchers: &[Matcher], t: &[Ch]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < t.len() {
        let len = first_match(matchers, &t[pos..]).max(1);
        out.push(pos..pos + len);
        pos += len;
    }
    out
}

/// Like [`split`], but characters no matcher takes stay together as one piece (a Split step of
/// a Sequence pre-tokenizer).
pub(crate) fn split_isolated(matchers: &[Matcher], t: &[Ch]) -> Vec<std::ops::Range<usize>> {
    let (mut out, mut gap, mut pos) = (Vec::new(), None, 0);
    while pos < t.len() {
        let len = first_match(matchers, &t[pos..]);
        if len == 0 {
            gap.get_or_insert(pos);
            pos += 1;
            continue;
        }
        out.extend(gap.take().map(|start| start..pos));
        out.push(pos..pos + len);
        pos += len;
    }
    out.extend(gap.map(|start| start..pos));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(regex: &str, text: &str) -> Vec<String> {
        let matchers = compile(regex).expect("supported pattern");
        let t = Classifier::new().classify(text);
        split(&matchers, &t)
            .into_iter()
            .map(|r| t[r].iter().map(|c| c.0).collect())
            .collect()
    }

    #[test]
    fn splits_like_the_runtime() {
        assert_eq!(pieces(LLAMA, "▁Hello▁world"), ["▁Hello", "▁world"]);
        assert_eq!(pieces(LLAMA, "▁a 12345"), ["▁a", " ", "123", "45"]);
        assert_eq!(
            pieces(LLAMA, "it's ok,\tyes"),
            ["it", "'s", " ok", ",", "\tyes"]
        );
        assert_eq!(pieces(LLAMA, "a  \n  x"), ["a", "  \n ", " x"]);
        assert_eq!(
            pieces(LLAMA, "x\n\ny end  "),
            ["x", "\n\n", "y", " end", "  "]
        );
        assert_eq!(
            pieces(GPT2, "it's 12 ab\u{85}'t"),
            ["it", "'s", " 12", " ab", "\u{85}'", "t"]
        );
    }

    #[test]
    fn compiles_known_patterns_in_pattern_order() {
        use Matcher::*;
        let gpt2 = compile(GPT2).unwrap();
        assert_eq!(gpt2[1], SpaceLettersOrDigits);
        assert_eq!(gpt2[3], Spaces);
        assert!(compile(r"\p{N}{1,3}|[a-z]+").is_none());
        assert!(compile(r"[\p{L}]+|[\p{N}]").is_none());
    }
}
