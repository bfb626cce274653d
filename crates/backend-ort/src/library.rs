//! Finding and loading the ONNX Runtime shared library, in a stated order:
//! 1. [`LibrarySearch::dylib_path`] (`ORT_DYLIB_PATH`: a file, or a folder holding the library),
//!    then [`LibrarySearch::lib_path`] (`ORT_LIB_PATH`, the variable ONNX Runtime GenAI's Python
//!    package sets before it loads its core library),
//! 2. beside the running executable,
//! 3. the project cache under the cargo target directory (filled by this crate's build script),
//! 4. the `onnxruntime` Python package's `capi/` folder (`python3` on PATH).
//!
//! This crate reads no environment variable: the caller (genai-runtime) fills the
//! [`LibrarySearch`]. The library is loaded once per process, by the first search; every
//! candidate that was skipped is kept as a reason.

use crate::Error;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The ONNX Runtime API level this crate is built against (1.x minor version).
pub const REQUIRED_MINOR: u32 = 31;

/// The loaded library and the process-wide ONNX Runtime environment.
pub struct Loaded {
    /// Where the library was loaded from.
    pub path: PathBuf,
    /// The environment every session is created in.
    pub environment: ort::environment::Environment,
}

static LOADED: OnceLock<Result<Loaded, String>> = OnceLock::new();

/// The platform's file name for the unversioned library.
#[cfg(target_os = "windows")]
const LIBRARY_NAMES: &[&str] = &["onnxruntime.dll"];
#[cfg(target_os = "macos")]
const LIBRARY_NAMES: &[&str] = &["libonnxruntime.dylib"];
#[cfg(not(any(target_os = "windows", target_os = "macos")))]
const LIBRARY_NAMES: &[&str] = &["libonnxruntime.so"];

/// The places the caller names, looked at before the fixed ones. Empty paths count as unset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LibrarySearch {
    /// `ORT_DYLIB_PATH`: the library file, or a folder holding it.
    pub dylib_path: Option<PathBuf>,
    /// `ORT_LIB_PATH`: the library file, or a folder holding it.
    pub lib_path: Option<PathBuf>,
}

/// One place we looked.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// Which rule of the search order produced it.
    pub source: &'static str,
    pub path: PathBuf,
}

/// Loads ONNX Runtime if it is not loaded yet, looking where `search` says first (a library
/// already loaded, or a search that already failed, stays: `search` is then not used).
pub fn ensure_loaded(search: &LibrarySearch) -> Result<&'static Loaded, Error> {
    LOADED
        .get_or_init(|| load_first_usable(search))
        .as_ref()
        .map_err(|reasons| Error::LibraryNotFound {
            reasons: reasons.clone(),
        })
}

/// Whether the loaded library has the CUDA execution provider (loading it with `search` if
/// needed).
pub fn cuda_available(search: &LibrarySearch) -> Result<(), String> {
    use ort::ep::ExecutionProvider;
    ensure_loaded(search).map_err(|e| e.to_string())?;
    match ort::ep::CUDA::is_available() {
        Ok(true) => Ok(()),
        Ok(false) => Err("the loaded ONNX Runtime has no CUDA execution provider".into()),
        Err(e) => Err(format!("could not query ONNX Runtime's providers: {e}")),
    }
}

fn load_first_usable(search: &LibrarySearch) -> Result<Loaded, String> {
    let mut skipped = Vec::new();
    for candidate in candidates(search) {
        if !candidate.path.is_file() {
            skipped.push(format!(
                "{}: {} does not exist",
                candidate.source,
                candidate.path.display()
            ));
            continue;
        }
        if let Some(minor) = minor_version_from_name(&candidate.path)
            && minor < REQUIRED_MINOR
        {
            skipped.push(format!(
                "{}: {} is ONNX Runtime 1.{minor}; 1.{REQUIRED_MINOR} or newer is needed",
                candidate.source,
                candidate.path.display()
            ));
            continue;
        }
        match ort::init_from(&candidate.path) {
            Ok(builder) => {
                return match builder.with_name("genai-bridge").build() {
                    Ok(environment) => Ok(Loaded {
                        path: candidate.path,
                        environment,
                    }),
                    Err(e) => Err(format!(
                        "{}: creating the ONNX Runtime environment failed: {e}",
                        candidate.path.display()
                    )),
                };
            }
            Err(e) => skipped.push(format!(
                "{}: {} failed to load: {e}",
                candidate.source,
                candidate.path.display()
            )),
        }
    }
    Err(skipped.join("; "))
}

/// Every place we look, in order.
pub fn candidates(search: &LibrarySearch) -> Vec<Candidate> {
    let mut found = Vec::new();
    let given = [
        ("ORT_DYLIB_PATH", &search.dylib_path),
        ("ORT_LIB_PATH", &search.lib_path),
    ];
    for (source, path) in given {
        if let Some(path) = path.as_ref().filter(|p| !p.as_os_str().is_empty()) {
            if path.is_dir() {
                found.extend(in_folder(source, path));
            } else {
                found.push(Candidate {
                    source,
                    path: path.clone(),
                });
            }
        }
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .as_deref()
        .and_then(Path::parent)
    {
        found.extend(in_folder("beside the executable", dir));
    }
    found.extend(in_folder(
        "project cache",
        Path::new(env!("GENAI_BRIDGE_ORT_CACHE")),
    ));
    if let Some(dir) = python_package_dir() {
        found.extend(in_folder("Python onnxruntime package", &dir.join("capi")));
    }
    found
}

/// The library files in a folder: the plain name, then versioned names (newest first).
fn in_folder(source: &'static str, dir: &Path) -> Vec<Candidate> {
    let mut paths: Vec<PathBuf> = LIBRARY_NAMES
        .iter()
        .map(|n| dir.join(n))
        .filter(|p| p.is_file())
        .collect();
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut versioned: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| is_versioned_library(p))
            .collect();
        versioned.sort();
        versioned.reverse();
        paths.extend(versioned);
    }
    if paths.is_empty() {
        paths.push(dir.join(LIBRARY_NAMES[0]));
    }
    paths
        .into_iter()
        .map(|path| Candidate { source, path })
        .collect()
}

/// `libonnxruntime.so.1.31.1` or `libonnxruntime.1.31.1.dylib`.
fn is_versioned_library(path: &Path) -> bool {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    (name.starts_with("libonnxruntime.so.")
        || (name.starts_with("libonnxruntime.1.") && name.ends_with(".dylib")))
        && minor_version_from_name(path).is_some()
}

/// The minor version in a versioned library name, e.g. 31 from `libonnxruntime.so.1.31.1`.
pub fn minor_version_from_name(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let rest = name
        .strip_prefix("libonnxruntime.so.")
        .or_else(|| name.strip_prefix("libonnxruntime."))?;
    let mut parts = rest.split('.');
    if parts.next()? != "1" {
        return None;
    }
    parts.next()?.parse().ok()
}

/// The `onnxruntime` package folder of the first `python3` on PATH, found without importing it.
fn python_package_dir() -> Option<PathBuf> {
    let script = "import importlib.util as u\ns = u.find_spec('onnxruntime')\n\
                  print(s.submodule_search_locations[0] if s and s.submodule_search_locations else '')";
    let python = if cfg!(windows) { "python" } else { "python3" };
    let output = Command::new(python).args(["-c", script]).output().ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let dir = text.trim();
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_minor_versions_from_library_names() {
        assert_eq!(
            minor_version_from_name(Path::new("/x/libonnxruntime.so.1.31.1")),
            Some(31)
        );
        assert_eq!(
            minor_version_from_name(Path::new("libonnxruntime.1.30.0.dylib")),
            Some(30)
        );
        assert_eq!(
            minor_version_from_name(Path::new("libonnxruntime.so")),
            None
        );
        assert_eq!(
            minor_version_from_name(Path::new("libonnxruntime.so.2.1.0")),
            None
        );
    }

    /// The rules in the documented order; each candidate's rule must not come before the
    /// previous candidate's.
    const ORDER: [&str; 5] = [
        "ORT_DYLIB_PATH",
        "ORT_LIB_PATH",
        "beside the executable",
        "project cache",
        "Python onnxruntime package",
    ];

    fn rank(source: &str) -> usize {
        ORDER
            .iter()
            .position(|s| *s == source)
            .unwrap_or_else(|| panic!("unknown source {source:?}"))
    }

    #[test]
    fn orders_given_paths_then_executable_then_cache() {
        // ORT_DYLIB_PATH names a file (missing: still listed first), ORT_LIB_PATH a folder
        // holding the library: both come before the fixed places, in that order.
        let dir = std::env::temp_dir().join(format!("genai-bridge-search-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp folder");
        let in_dir = dir.join(LIBRARY_NAMES[0]);
        std::fs::write(&in_dir, b"").expect("library file");
        let file = dir.join("missing").join(LIBRARY_NAMES[0]);
        let search = LibrarySearch {
            dylib_path: Some(file.clone()),
            lib_path: Some(dir.clone()),
        };
        let found = candidates(&search);
        std::fs::remove_dir_all(&dir).expect("temp folder removed");
        let sources: Vec<_> = found.iter().map(|c| c.source).collect();
        assert_eq!(found[0].source, "ORT_DYLIB_PATH");
        assert_eq!(found[0].path, file);
        assert_eq!(found[1].source, "ORT_LIB_PATH");
        assert_eq!(found[1].path, in_dir);
        assert!(
            sources.windows(2).all(|w| rank(w[0]) <= rank(w[1])),
            "{sources:?}"
        );
        for source in ["beside the executable", "project cache"] {
            assert!(sources.contains(&source), "{source} missing: {sources:?}");
        }
    }

    #[test]
    fn unset_and_empty_paths_add_nothing() {
        let empty = LibrarySearch {
            dylib_path: Some(PathBuf::new()),
            lib_path: None,
        };
        let sources: Vec<_> = candidates(&empty).iter().map(|c| c.source).collect();
        assert_eq!(
            sources.first(),
            Some(&"beside the executable"),
            "{sources:?}"
        );
        assert!(
            sources.windows(2).all(|w| rank(w[0]) <= rank(w[1])),
            "{sources:?}"
        );
    }
}
