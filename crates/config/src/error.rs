//! The crate's error type. Every variant names where the problem is (a JSON path such as
//! `model.decoder.session_options`, a file, or a search option name) and what to do about it.

use std::path::PathBuf;

use serde_json::error::Category;

/// Everything that can go wrong while loading, overlaying or editing a config.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The model folder has no `genai_config.json`.
    #[error(
        "no genai_config.json in {}: point at a model folder written by the ONNX Runtime GenAI \
         model builder",
        dir.display()
    )]
    MissingConfig {
        /// The folder that was searched.
        dir: PathBuf,
    },

    /// A file exists but could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The text is not valid JSON.
    #[error("invalid JSON at line {line}, column {column}: {message}")]
    Syntax {
        /// What the JSON parser expected.
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },

    /// A key that ONNX Runtime GenAI 0.18 does not know at this place.
    #[error(
        "{path}: unknown key{} (line {line}, column {column})",
        hint(suggestion)
    )]
    UnknownKey {
        /// JSON path including the key, e.g. `model.decoder.sesion_options`.
        path: String,
        /// The key itself.
        key: String,
        /// The closest known key, when one is close.
        suggestion: Option<String>,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },

    /// A value of the wrong JSON type, or one the parser rejects outright (`2.5` for an integer,
    /// `null`, an unknown `graph_optimization_level`).
    #[error("{path}: {message} (line {line}, column {column})")]
    WrongType {
        /// JSON path of the value.
        path: String,
        /// What was found and what was expected.
        message: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
    },

    /// A well-typed value that cannot work (a zero size, an id outside the vocabulary, ...).
    #[error("{path}: {message}")]
    InvalidValue {
        /// JSON path of the offending value.
        path: String,
        /// What is wrong and how to fix it.
        message: String,
    },

    /// A file named by the config is not in the model folder.
    #[error("{path}: {} does not exist; put the file there or fix the name", file.display())]
    MissingFile {
        /// JSON path of the key naming the file, e.g. `model.decoder.filename`.
        path: String,
        /// The file looked for.
        file: PathBuf,
    },

    /// An error in the text of a config overlay (as opposed to the original file).
    #[error("config overlay: {source}")]
    Overlay {
        /// The error found in the overlay.
        #[source]
        source: Box<Error>,
    },

    /// A search option set or read by name (`OgaGeneratorParamsSetSearchNumber` and friends).
    #[error("search option \"{name}\": {message}")]
    SearchOption {
        /// The option name as given.
        name: String,
        /// What is wrong.
        message: String,
    },
}

fn hint(suggestion: &Option<String>) -> String {
    match suggestion {
        Some(s) => format!(" (did you mean \"{s}\"?)"),
        None => String::new(),
    }
}

impl Error {
    /// Shorthand for [`Error::InvalidValue`].
    pub(crate) fn invalid(path: impl Into<String>, message: impl Into<String>) -> Error {
        Error::InvalidValue {
            path: path.into(),
            message: message.into(),
        }
    }

    /// Converts a deserialization failure into a located, path-naming error.
    pub(crate) fn from_parse(err: serde_path_to_error::Error<serde_json::Error>) -> Error {
        let path = format_path(err.path());
        let inner = err.into_inner();
        // serde_json counts columns from 1 but says 0 before the first character of a line.
        let (line, column) = (inner.line(), inner.column().max(1));
        let message = bare_message(&inner);
        match inner.classify() {
            Category::Data => match parse_unknown_field(&message) {
                Some((key, known)) => Error::UnknownKey {
                    suggestion: closest(&key, &known),
                    path,
                    key,
                    line,
                    column,
                },
                None => Error::WrongType {
                    path,
                    message,
                    line,
                    column,
                },
            },
            Category::Syntax | Category::Eof | Category::Io => Error::Syntax {
                message,
                line,
                column,
            },
        }
    }
}

/// Formats a serde path as `model.decoder.inputs`, `a.b[2].c`; the root is `(top level)`.
fn format_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Enum { variant } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(variant);
            }
            Segment::Unknown => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push('?');
            }
        }
    }
    if out.is_empty() {
        "(top level)".to_string()
    } else {
        out
    }
}

/// serde_json appends " at line L column C" to its messages; the variants carry those apart.
fn bare_message(err: &serde_json::Error) -> String {
    let full = err.to_string();
    let suffix = format!(" at line {} column {}", err.line(), err.column());
    match full.strip_suffix(&suffix) {
        Some(bare) => bare.to_string(),
        None => full,
    }
}

/// Reads serde's "unknown field `x`, expected one of `a`, `b`" into the key and the known keys.
fn parse_unknown_field(message: &str) -> Option<(String, Vec<String>)> {
    let rest = message.strip_prefix("unknown field `")?;
    let end = rest.find('`')?;
    let key = rest[..end].to_string();
    let known = rest[end + 1..]
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect();
    Some((key, known))
}

/// The known key closest to `key` by edit distance, if it is plausibly a typo of it.
fn closest(key: &str, known: &[String]) -> Option<String> {
    let limit = (key.chars().count() / 3).max(2);
    known
        .iter()
        .map(|k| (edit_distance(key, k), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.clone())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(cur).min(row[j])
            };
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_field_message_is_read() {
        let (key, known) =
            parse_unknown_field("unknown field `sesion_options`, expected one of `a`, `b`")
                .unwrap();
        assert_eq!(key, "sesion_options");
        assert_eq!(known, vec!["a".to_string(), "b".to_string()]);
        let (key, known) = parse_unknown_field("unknown field `x`, there are no fields").unwrap();
        assert_eq!((key.as_str(), known.len()), ("x", 0));
    }

    #[test]
    fn suggestions_are_close_matches_only() {
        let known = vec!["session_options".to_string(), "filename".to_string()];
        assert_eq!(
            closest("sesion_options", &known).as_deref(),
            Some("session_options")
        );
        assert_eq!(closest("zzz", &known), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn display_names_path_and_fix() {
        let e = Error::UnknownKey {
            path: "model.decoder.sesion_options".into(),
            key: "sesion_options".into(),
            suggestion: Some("session_options".into()),
            line: 3,
            column: 7,
        };
        assert_eq!(
            e.to_string(),
            "model.decoder.sesion_options: unknown key (did you mean \"session_options\"?) \
             (line 3, column 7)"
        );
    }
}
