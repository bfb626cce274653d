//! External tensor data: parsing a tensor's `external_data` entries,
//! validating its `location`, and memory-mapping each data file once.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use crate::Error;
use crate::proto::TensorProto;

/// A tensor's parsed `external_data` entries.
#[derive(Debug)]
pub(crate) struct Descriptor<'a> {
    pub location: &'a str,
    pub offset: u64,
    pub length: Option<u64>,
}

/// Parses the `location`, `offset` and `length` keys (others, such as
/// `checksum`, are ignored). Duplicated keys are rejected as ambiguous.
pub(crate) fn descriptor(t: &TensorProto) -> Result<Descriptor<'_>, Error> {
    let invalid = |key: &str, value: &str, reason| Error::ExternalDataInvalid {
        tensor: t.name.clone(),
        key: key.to_string(),
        value: value.to_string(),
        reason,
    };
    let (mut location, mut offset, mut length) = (None, None, None);
    for entry in &t.external_data {
        let slot = match entry.key.as_str() {
            "location" => &mut location,
            "offset" => &mut offset,
            "length" => &mut length,
            _ => continue,
        };
        if slot.replace(entry.value.as_str()).is_some() {
            return Err(invalid(
                &entry.key,
                &entry.value,
                "key given more than once",
            ));
        }
    }
    let number = |key: &str, value: Option<&str>| -> Result<Option<u64>, Error> {
        match value {
            None => Ok(None),
            Some(v) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => v
                .parse::<u64>()
                .map(Some)
                .map_err(|_| invalid(key, v, "does not fit in 64 bits")),
            Some(v) => Err(invalid(key, v, "not a non-negative decimal integer")),
        }
    };
    Ok(Descriptor {
        location: location.ok_or_else(|| invalid("location", "", "required key missing"))?,
        offset: number("offset", offset)?.unwrap_or(0),
        length: number("length", length)?,
    })
}

/// Checks that `location` is a relative path that stays inside the model
/// directory (lexically: no root, no prefix, no `..`), and returns it with
/// `.` components removed so equal files compare equal.
pub(crate) fn relative_location(tensor: &str, location: &str) -> Result<PathBuf, Error> {
    let reject = |reason| Error::ExternalLocation {
        tensor: tensor.to_string(),
        location: location.to_string(),
        reason,
    };
    let path = Path::new(location);
    if path.is_absolute() || path.has_root() {
        return Err(reject("absolute paths are not allowed"));
    }
    let mut clean = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(reject("'..' would leave the model directory")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(reject("absolute paths are not allowed"));
            }
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(reject("does not name a file"));
    }
    Ok(clean)
}

/// One mapped external data file.
#[derive(Debug)]
pub struct ExternalFile {
    /// The location as written in the model, normalized (no `.` parts).
    pub location: PathBuf,
    /// The full path it was opened from.
    pub path: PathBuf,
    map: Option<Mmap>,
}

impl ExternalFile {
    /// The whole file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// File size in bytes.
    pub fn size(&self) -> u64 {
        self.bytes().len() as u64
    }
}

/// The external files of one model, each opened and mapped once.
#[derive(Debug, Default)]
pub(crate) struct ExternalFiles {
    pub files: Vec<Arc<ExternalFile>>,
    index: HashMap<PathBuf, usize>,
}

impl ExternalFiles {
    /// Returns the mapped file for `location` (already validated by
    /// [`relative_location`]), opening and mapping it on first use only.
    pub fn open(
        &mut self,
        dir: &Path,
        tensor: &str,
        location: PathBuf,
    ) -> Result<Arc<ExternalFile>, Error> {
        if let Some(file) = self.index.get(&location).and_then(|&i| self.files.get(i)) {
            return Ok(Arc::clone(file));
        }
        let path = dir.join(&location);
        let fail = |source| Error::ExternalFile {
            tensor: tensor.to_string(),
            location: location.display().to_string(),
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(fail)?;
        let meta = file.metadata().map_err(fail)?;
        if !meta.is_file() {
            return Err(fail(std::io::Error::other("not a regular file")));
        }
        let map = if meta.len() == 0 {
            None
        } else {
            // SAFETY: the mapping is only ever read, through `&[u8]` slices
            // borrowed from this `ExternalFile`. Soundness needs the invariant
            // that no one truncates or writes the file while the model is
            // loaded; model weight files are read-only inputs, and this is
            // the same contract every mmap-based model loader relies on.
            Some(unsafe { Mmap::map(&file) }.map_err(fail)?)
        };
        let file = Arc::new(ExternalFile {
            location: location.clone(),
            path,
            map,
        });
        self.index.insert(location, self.files.len());
        self.files.push(Arc::clone(&file));
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::StringStringEntryProto;

    fn tensor(entries: &[(&str, &str)]) -> TensorProto {
        TensorProto {
            name: "w".into(),
            external_data: entries
                .iter()
                .map(|(k, v)| StringStringEntryProto {
                    key: (*k).into(),
                    value: (*v).into(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn parses_keys() {
        let t = tensor(&[("location", "a.bin"), ("offset", "4096"), ("checksum", "x")]);
        let d = descriptor(&t).map_err(|e| e.to_string());
        let d = d.as_ref().map(|d| (d.location, d.offset, d.length));
        assert_eq!(d, Ok(("a.bin", 4096, None)));
    }

    #[test]
    fn rejects_bad_numbers_and_duplicates() {
        for bad in ["-1", "", "1e3", " 5", "18446744073709551616"] {
            let t = tensor(&[("location", "a"), ("offset", bad)]);
            assert!(
                matches!(descriptor(&t), Err(Error::ExternalDataInvalid { ref key, .. }) if key == "offset"),
                "{bad}"
            );
        }
        let t = tensor(&[("location", "a"), ("location", "b")]);
        assert!(matches!(
            descriptor(&t),
            Err(Error::ExternalDataInvalid { .. })
        ));
        let t = tensor(&[("offset", "0")]);
        assert!(
            matches!(descriptor(&t), Err(Error::ExternalDataInvalid { ref key, .. }) if key == "location")
        );
    }

    #[test]
    fn locations() {
        assert_eq!(
            relative_location("w", "./sub/./a.bin").ok(),
            Some(PathBuf::from("sub/a.bin"))
        );
        for bad in ["/etc/passwd", "../a.bin", "sub/../../a", "a/..", ".", ""] {
            assert!(
                matches!(
                    relative_location("w", bad),
                    Err(Error::ExternalLocation { .. })
                ),
                "{bad}"
            );
        }
    }
}
