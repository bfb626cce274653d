//! Small value checks used while converting raw structs: sizes that must be positive or
//! non-negative, and file names that must stay inside the model folder.

use crate::Error;
use crate::de::Int;

/// A count that must be > 0. `what` says what the number is, for the message.
pub(crate) fn positive(value: Option<Int>, path: &str, what: &str) -> Result<usize, Error> {
    match value {
        Some(Int(v)) if v > 0 => Ok(v as usize),
        Some(Int(v)) => Err(Error::invalid(
            path,
            format!("must be greater than 0 (it is {v}); set it to {what}"),
        )),
        None => Err(Error::invalid(path, format!("missing; set it to {what}"))),
    }
}

/// A count that must be >= 0, with a default when absent.
pub(crate) fn non_negative(value: Option<Int>, path: &str, default: usize) -> Result<usize, Error> {
    match value {
        None => Ok(default),
        Some(Int(v)) => usize::try_from(v)
            .map_err(|_| Error::invalid(path, format!("must not be negative (it is {v})"))),
    }
}

/// A number that must be finite (JSON cannot hold NaN, but the setters can receive it).
pub(crate) fn finite(value: f64, path: &str) -> Result<f32, Error> {
    if value.is_finite() {
        Ok(value as f32)
    } else {
        Err(Error::invalid(
            path,
            format!("must be a finite number (it is {value})"),
        ))
    }
}

/// A file name from the config: relative, inside the model folder (no `..`), like the official
/// `ValidateConfigPath`.
pub(crate) fn relative_path(value: &str, path: &str) -> Result<(), Error> {
    let absolute = value.starts_with('/')
        || value.starts_with('\\')
        || (value.len() >= 2
            && value.as_bytes()[1] == b':'
            && value.as_bytes()[0].is_ascii_alphabetic());
    if absolute {
        return Err(Error::invalid(
            path,
            format!("\"{value}\" must be a path relative to the model folder"),
        ));
    }
    if value.split(['/', '\\']).any(|part| part == "..") {
        return Err(Error::invalid(
            path,
            format!("\"{value}\" must stay inside the model folder (no \"..\")"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positive_messages_say_what_to_set() {
        let e = positive(
            Some(Int(0)),
            "model.decoder.head_size",
            "the size of one head",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "model.decoder.head_size: must be greater than 0 (it is 0); set it to the size of one head"
        );
        let e = positive(None, "model.vocab_size", "the vocabulary size").unwrap_err();
        assert_eq!(
            e.to_string(),
            "model.vocab_size: missing; set it to the vocabulary size"
        );
        assert_eq!(positive(Some(Int(3)), "x", "y").unwrap(), 3);
    }

    #[test]
    fn non_negative_defaults_and_rejects() {
        assert_eq!(non_negative(None, "a", 7).unwrap(), 7);
        assert!(
            non_negative(Some(Int(-1)), "search.top_k", 50)
                .unwrap_err()
                .to_string()
                .starts_with("search.top_k: must not be negative")
        );
    }

    #[test]
    fn paths_stay_inside() {
        assert!(relative_path("model.onnx", "p").is_ok());
        assert!(relative_path("sub/model.onnx", "p").is_ok());
        assert!(relative_path("/etc/passwd", "p").is_err());
        assert!(relative_path("C:\\x.onnx", "p").is_err());
        assert!(relative_path("../x.onnx", "p").is_err());
        assert!(relative_path("a/../../x.onnx", "p").is_err());
    }
}
