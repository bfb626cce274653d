//! Python-style text for template values, as jinja2 in transformers produces it: `json.dumps`
//! for the `tojson` filter, and `str()` for `{{ value }}` (None, True, ['a', 1], {'k': 1.0}).

use std::fmt::Write as _;

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Output, State, Value};

/// Nesting depth past which a value is refused (JSON input is shallower; this guards cycles).
const MAX_DEPTH: usize = 256;
/// Largest indent honoured by `tojson(indent=N)`.
const MAX_INDENT: i64 = 64;

/// The `json.dumps` options transformers' `tojson` exposes.
pub(crate) struct JsonOptions {
    indent: Option<String>,
    ensure_ascii: bool,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
}

impl JsonOptions {
    /// Reads `indent`, `ensure_ascii`, `separators` and `sort_keys` with Python's defaults.
    pub fn from_kwargs(kwargs: &Kwargs) -> Result<Self, Error> {
        let invalid = |msg: &str| Error::new(ErrorKind::InvalidOperation, msg.to_owned());
        let indent = match kwargs.get::<Option<Value>>("indent")? {
            None => None,
            Some(v) if v.is_none() => None,
            Some(v) => match (v.as_i64(), v.as_str()) {
                (Some(n), _) => Some(" ".repeat(n.clamp(0, MAX_INDENT) as usize)),
                (None, Some(s)) => Some(s.to_owned()),
                _ => return Err(invalid("tojson: indent must be an integer or a string")),
            },
        };
        let (item_sep, key_sep) = match kwargs.get::<Option<Value>>("separators")? {
            Some(v) if !v.is_none() => {
                let parts: Vec<Value> = v.try_iter()?.collect();
                match parts.as_slice() {
                    [a, b] => match (a.as_str(), b.as_str()) {
                        (Some(a), Some(b)) => (a.to_owned(), b.to_owned()),
                        _ => return Err(invalid("tojson: separators must be two strings")),
                    },
                    _ => return Err(invalid("tojson: separators must be two strings")),
                }
            }
            _ if indent.is_some() => (",".to_owned(), ": ".to_owned()),
            _ => (", ".to_owned(), ": ".to_owned()),
        };
        Ok(Self {
            indent,
            ensure_ascii: kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false),
            item_sep,
            key_sep,
            sort_keys: kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false),
        })
    }
}

/// `json.dumps(value, **options)`.
pub(crate) fn to_json(value: &Value, options: &JsonOptions) -> Result<String, Error> {
    let mut out = String::new();
    write_json(&mut out, value, options, 0)?;
    Ok(out)
}

fn write_json(out: &mut String, value: &Value, o: &JsonOptions, depth: usize) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "tojson: value nested too deeply",
        ));
    }
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&json_number(value)),
        ValueKind::String => {
            write_json_str(out, value.as_str().unwrap_or_default(), o.ensure_ascii)
        }
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            write_container(out, '[', ']', &items, o, depth, |out, item| {
                write_json(out, item, o, depth + 1)
            })?;
        }
        ValueKind::Map => {
            let mut entries = value
                .try_iter()?
                .map(|key| Ok((json_key(&key)?, value.get_item(&key)?)))
                .collect::<Result<Vec<_>, Error>>()?;
            if o.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
            }
            write_container(out, '{', '}', &entries, o, depth, |out, (key, item)| {
                write_json_str(out, key, o.ensure_ascii);
                out.push_str(&o.key_sep);
                write_json(out, item, o, depth + 1)
            })?;
        }
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: a {kind} is not JSON serializable"),
            ));
        }
    }
    Ok(())
}

/// Writes `[a, b]` / `{...}` with Python's indentation rules.
fn write_container<T>(
    out: &mut String,
    open: char,
    close: char,
    items: &[T],
    o: &JsonOptions,
    depth: usize,
    mut write_item: impl FnMut(&mut String, &T) -> Result<(), Error>,
) -> Result<(), Error> {
    out.push(open);
    let newline = |out: &mut String, level: usize| {
        if let Some(indent) = &o.indent {
            out.push('\n');
            (0..level).for_each(|_| out.push_str(indent));
        }
    };
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&o.item_sep);
        }
        newline(out, depth + 1);
        write_item(out, item)?;
    }
    if !items.is_empty() {
        newline(out, depth);
    }
    out.push(close);
    Ok(())
}

/// A map key as Python's json turns it into a string.
fn json_key(key: &Value) -> Result<String, Error> {
    Ok(match key.kind() {
        ValueKind::String => key.as_str().unwrap_or_default().to_owned(),
        ValueKind::Number => json_number(key),
        ValueKind::Bool => (if key.is_true() { "true" } else { "false" }).to_owned(),
        ValueKind::None => "null".to_owned(),
        kind => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: keys must be str, int, float, bool or None, not {kind}"),
            ));
        }
    })
}

fn json_number(value: &Value) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    match f64::try_from(value.clone()) {
        Ok(f) if f.is_nan() => "NaN".to_owned(),
        Ok(f) if f.is_infinite() => (if f > 0.0 { "Infinity" } else { "-Infinity" }).to_owned(),
        Ok(f) => float_repr(f),
        Err(_) => value.to_string(),
    }
}

fn write_json_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (ensure_ascii && !c.is_ascii()) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Python's `repr(float)`: shortest round-trip digits, exponent form outside 1e-4 .. 1e16.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_owned();
    }
    if f.is_infinite() {
        return (if f > 0.0 { "inf" } else { "-inf" }).to_owned();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        if exp < 0 {
            let zeros = "0".repeat((-exp - 1) as usize);
            return format!("{sign}0.{zeros}{digits}");
        }
        let int_len = exp as usize + 1;
        let (int_part, frac) = if digits.len() > int_len {
            (digits[..int_len].to_owned(), digits[int_len..].to_owned())
        } else {
            let pad = "0".repeat(int_len - digits.len());
            (format!("{digits}{pad}"), "0".to_owned())
        };
        return format!("{sign}{int_part}.{frac}");
    }
    let (first, rest) = digits.split_at(1);
    let frac = if rest.is_empty() {
        String::new()
    } else {
        format!(".{rest}")
    };
    let exp_sign = if exp < 0 { '-' } else { '+' };
    format!("{sign}{first}{frac}e{exp_sign}{:02}", exp.unsigned_abs())
}

/// The formatter for `{{ value }}`: Python's `str()` for None, booleans, lists and dicts.
pub(crate) fn python_formatter(
    out: &mut Output,
    state: &State,
    value: &Value,
) -> Result<(), Error> {
    match value.kind() {
        ValueKind::None | ValueKind::Bool | ValueKind::Seq | ValueKind::Map => {
            let mut text = String::new();
            write_repr(&mut text, value, 0)?;
            out.write_str(&text).map_err(Error::from)
        }
        ValueKind::Number if !value.is_integer() => match f64::try_from(value.clone()) {
            Ok(f) => out.write_str(&float_repr(f)).map_err(Error::from),
            Err(_) => minijinja::escape_formatter(out, state, value),
        },
        _ => minijinja::escape_formatter(out, state, value),
    }
}

/// Python's `repr()` of a value.
fn write_repr(out: &mut String, value: &Value, depth: usize) -> Result<(), Error> {
    if depth > MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "value nested too deeply to print",
        ));
    }
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number if !value.is_integer() => match f64::try_from(value.clone()) {
            Ok(f) => out.push_str(&float_repr(f)),
            Err(_) => out.push_str(&value.to_string()),
        },
        ValueKind::String => write_str_repr(out, value.as_str().unwrap_or_default()),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (i, item) in value.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, &item, depth + 1)?;
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in value.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, &key, depth + 1)?;
                out.push_str(": ");
                write_repr(out, &value.get_item(&key)?, depth + 1)?;
            }
            out.push('}');
        }
        _ => out.push_str(&value.to_string()),
    }
    Ok(())
}

/// Python's `repr(str)`: single quotes unless the text has ' and no ", escapes for the
/// characters Python does not print as they are.
fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if !is_printable(c) => {
                let code = c as u32;
                let _ = match code {
                    0..=0xff => write!(out, "\\x{code:02x}"),
                    0x100..=0xffff => write!(out, "\\u{code:04x}"),
                    _ => write!(out, "\\U{code:08x}"),
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Approximates Python's `str.isprintable` (controls, separators other than space, formats).
fn is_printable(c: char) -> bool {
    !(c.is_control()
        || matches!(
            c,
            '\u{a0}' | '\u{ad}' | '\u{1680}' | '\u{3000}' | '\u{feff}'
        )
        || ('\u{2000}'..='\u{200f}').contains(&c)
        || ('\u{2028}'..='\u{202f}').contains(&c)
        || ('\u{205f}'..='\u{206f}').contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_like_python() {
        let cases = [
            (1.0, "1.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (1.5e-7, "1.5e-07"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123.456, "123.456"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (2.5e300, "2.5e+300"),
        ];
        for (f, want) in cases {
            assert_eq!(float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn strings_repr_like_python() {
        let mut out = String::new();
        write_str_repr(&mut out, "it's\n\u{1}é");
        assert_eq!(out, "\"it's\\n\\x01é\"");
    }
}
