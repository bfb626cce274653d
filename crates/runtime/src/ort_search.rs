//! Where to look for ONNX Runtime first, from the environment: `ORT_DYLIB_PATH` and
//! `ORT_LIB_PATH` (each a library file or a folder holding one; empty counts as unset), read
//! into genai-backend-ort's [`LibrarySearch`], which reads no environment itself.

use genai_backend_ort::library::LibrarySearch;
use std::ffi::OsString;
use std::path::PathBuf;

/// Environment variable: the ONNX Runtime library (or its folder), looked at first.
pub const DYLIB_PATH_ENV: &str = "ORT_DYLIB_PATH";
/// Environment variable: the folder (or file) ONNX Runtime GenAI's Python package sets, looked
/// at second.
pub const LIB_PATH_ENV: &str = "ORT_LIB_PATH";

/// The search `lookup` gives (`lookup(name)` is the variable's value, if set).
pub fn library_search_from(lookup: &dyn Fn(&str) -> Option<String>) -> LibrarySearch {
    search_from_os(&|name| lookup(name).map(OsString::from))
}

/// The search the process environment gives (values need not be UTF-8).
pub fn library_search() -> LibrarySearch {
    search_from_os(&|name| std::env::var_os(name))
}

fn search_from_os(lookup: &dyn Fn(&str) -> Option<OsString>) -> LibrarySearch {
    let path = |name| lookup(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    LibrarySearch {
        dylib_path: path(DYLIB_PATH_ENV),
        lib_path: path(LIB_PATH_ENV),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(vars: &[(&str, &str)]) -> LibrarySearch {
        library_search_from(&|name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.to_string())
        })
    }

    #[test]
    fn reads_both_variables_into_their_places() {
        let found = search(&[
            ("ORT_DYLIB_PATH", "a/libonnxruntime.so"),
            ("ORT_LIB_PATH", "b"),
        ]);
        assert_eq!(found.dylib_path, Some(PathBuf::from("a/libonnxruntime.so")));
        assert_eq!(found.lib_path, Some(PathBuf::from("b")));
    }

    #[test]
    fn unset_and_empty_variables_are_none() {
        assert_eq!(search(&[]), LibrarySearch::default());
        let found = search(&[("ORT_DYLIB_PATH", ""), ("ORT_LIB_PATH", "b")]);
        assert_eq!(found.dylib_path, None);
        assert_eq!(found.lib_path, Some(PathBuf::from("b")));
    }
}
