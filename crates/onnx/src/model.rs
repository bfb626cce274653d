//! `OnnxModel`: decodes a model file, resolves and validates every
//! initializer's data (inline or external) up front, and hands out tensors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};

use prost::Message;

use crate::external::{self, ExternalFile, ExternalFiles};
use crate::proto::tensor_proto::DataLocation;
use crate::proto::{GraphProto, ModelProto, TensorProto};
use crate::tensor::{Data, ExternalRef};
use crate::validate::{self, Inline};
use crate::{DataType, Error, Tensor};

/// A loaded ONNX model whose initializers have all been checked.
#[derive(Debug)]
pub struct OnnxModel {
    path: PathBuf,
    proto: ModelProto,
    files: Vec<Arc<ExternalFile>>,
    /// One entry per `graph.initializer`, same order.
    slots: Vec<Slot>,
    by_name: HashMap<String, usize>,
}

/// The validated storage of one initializer.
#[derive(Debug)]
struct Slot {
    dtype: DataType,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Inline(Inline),
    External {
        file: Arc<ExternalFile>,
        offset: u64,
        /// Byte range within the file, checked against its size at load.
        start: usize,
        end: usize,
    },
}

impl OnnxModel {
    /// Reads and decodes `path`, then resolves external data relative to
    /// its directory. Every initializer is validated here, so later tensor
    /// access only fails for unsupported conversions.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_bytes(path, &bytes)
    }

    /// Like [`OnnxModel::load`] for a model already in memory; `path` names
    /// the model in errors and its directory holds the external data.
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Self, Error> {
        let proto = ModelProto::decode(bytes).map_err(|source| Error::Decode {
            path: path.to_path_buf(),
            source,
        })?;
        let Some(graph) = proto.graph.as_ref() else {
            return Err(Error::MissingGraph {
                path: path.to_path_buf(),
            });
        };
        let dir = path.parent().unwrap_or(Path::new(""));
        let mut files = ExternalFiles::default();
        let mut slots = Vec::with_capacity(graph.initializer.len());
        let mut by_name = HashMap::with_capacity(graph.initializer.len());
        for (i, t) in graph.initializer.iter().enumerate() {
            if by_name.insert(t.name.clone(), i).is_some() {
                return Err(Error::DuplicateInitializer {
                    path: path.to_path_buf(),
                    name: t.name.clone(),
                });
            }
            let dtype = validate::data_type(t)?;
            let kind = if t.data_location == DataLocation::External as i32 {
                resolve_external(t, dtype, dir, &mut files)?
            } else {
                Kind::Inline(validate::inline_data(t, dtype)?)
            };
            slots.push(Slot { dtype, kind });
        }
        Ok(Self {
            path: path.to_path_buf(),
            proto,
            files: files.files,
            slots,
            by_name,
        })
    }

    /// The model file this was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The decoded ModelProto (external data not inlined).
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// The main graph (its presence is checked at load).
    pub fn graph(&self) -> &GraphProto {
        static EMPTY: LazyLock<GraphProto> = LazyLock::new(GraphProto::default);
        self.proto.graph.as_ref().unwrap_or(&EMPTY)
    }

    /// The opset version imported for `domain` ("" and "ai.onnx" are the same).
    pub fn opset(&self, domain: &str) -> Option<i64> {
        let canon = |d: &str| if d.is_empty() { "ai.onnx" } else { d }.to_string();
        let want = canon(domain);
        self.proto
            .opset_import
            .iter()
            .find(|o| canon(&o.domain) == want)
            .map(|o| o.version)
    }

    /// The element type of the graph output named `name`, when the graph declares it as a
    /// tensor.
    pub fn output_type(&self, name: &str) -> Option<DataType> {
        use crate::proto::type_proto::Value;
        let output = self.graph().output.iter().find(|o| o.name == name)?;
        match output.r#type.as_ref()?.value.as_ref()? {
            Value::TensorType(t) => DataType::from_onnx(t.elem_type),
            _ => None,
        }
    }

    /// The initializer named `name`.
    pub fn initializer(&self, name: &str) -> Option<Tensor<'_>> {
        let &i = self.by_name.get(name)?;
        Some(self.tensor_at(self.graph().initializer.get(i)?, self.slots.get(i)?))
    }

    /// All initializers, in graph order.
    pub fn initializers(&self) -> impl Iterator<Item = Tensor<'_>> {
        let graph = self.graph();
        graph
            .initializer
            .iter()
            .zip(&self.slots)
            .map(|(t, s)| self.tensor_at(t, s))
    }

    /// The external data files in use, each mapped once.
    pub fn external_files(&self) -> impl Iterator<Item = &ExternalFile> {
        self.files.iter().map(|f| f.as_ref())
    }

    fn tensor_at<'a>(&'a self, proto: &'a TensorProto, slot: &'a Slot) -> Tensor<'a> {
        let data = match &slot.kind {
            Kind::Inline(Inline::Raw) => Data::Raw(&proto.raw_data),
            Kind::Inline(Inline::Typed) => Data::Typed,
            Kind::External {
                file,
                offset,
                start,
                end,
            } => Data::External(ExternalRef {
                location: &file.location,
                path: &file.path,
                offset: *offset,
                // The range was checked against the mapped size at load.
                bytes: file.bytes().get(*start..*end).unwrap_or_default(),
            }),
        };
        Tensor::new(proto, slot.dtype, data)
    }
}

/// Opens (once) and bounds-checks one initializer's external data.
fn resolve_external(
    t: &TensorProto,
    dtype: DataType,
    dir: &Path,
    files: &mut ExternalFiles,
) -> Result<Kind, Error> {
    let unsupported = |what: &str| Error::Unsupported {
        tensor: t.name.clone(),
        what: what.to_string(),
    };
    if t.segment.is_some() {
        return Err(unsupported("segmented tensor"));
    }
    if dtype == DataType::String {
        return Err(unsupported("string tensor in external data"));
    }
    let desc = external::descriptor(t)?;
    let location = external::relative_location(&t.name, desc.location)?;
    let file = files.open(dir, &t.name, location)?;
    let file_size = file.size();
    let offset = desc.offset;
    let out_of_bounds = |length| Error::ExternalOutOfBounds {
        tensor: t.name.clone(),
        path: file.path.clone(),
        offset,
        length,
        file_size,
    };
    // Without a length the data runs to the end of the file.
    let length = match desc.length {
        Some(length) => length,
        None => file_size
            .checked_sub(offset)
            .ok_or_else(|| out_of_bounds(0))?,
    };
    let end = offset
        .checked_add(length)
        .ok_or_else(|| Error::ExternalRangeOverflow {
            tensor: t.name.clone(),
            offset,
            length,
        })?;
    if end > file_size {
        return Err(out_of_bounds(length));
    }
    validate::check_byte_len(t, dtype, "external data", length)?;
    // Both fit: they are within a file that is mapped into memory.
    let to_usize = |v: u64| usize::try_from(v).map_err(|_| out_of_bounds(length));
    Ok(Kind::External {
        offset,
        start: to_usize(offset)?,
        end: to_usize(end)?,
        file,
    })
}
