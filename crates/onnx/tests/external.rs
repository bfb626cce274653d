//! External-data loading on small models built in the test: values read
//! back, sharing of one mapped file, and every rejection path.

use std::path::Path;

use genai_onnx::{DataType, Error, OnnxModel};

mod common;
use common::{TestResult, external, f32_bytes, model, tensor, write_model};

/// Writes `bytes` to `dir/name` (creating parent folders).
fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, bytes)
}

/// Loads a one-initializer model and returns the error it must fail with.
fn load_err(
    dir: &Path,
    t: genai_onnx::proto::TensorProto,
) -> Result<Error, Box<dyn std::error::Error>> {
    let path = write_model(dir, &model(vec![t]))?;
    match OnnxModel::load(&path) {
        Ok(_) => Err("model loaded but should have been rejected".into()),
        Err(e) => Ok(e),
    }
}

#[test]
fn external_values_read_back() -> TestResult {
    let dir = tempfile::tempdir()?;
    let weights = [1.5f32, -2.0, 3.25, 0.0, 7.0, f32::MAX];
    let mut data = vec![0xAAu8; 16]; // padding before the first tensor
    data.extend(f32_bytes(&weights));
    data.extend([5i64, -9].iter().flat_map(|v| v.to_le_bytes()));
    write(dir.path(), "model.onnx.data", &data)?;
    // Runs to the end of the file: no length key.
    write(dir.path(), "sub/half.bin", &[0x00, 0x3c, 0x00, 0xc1])?;

    let m = model(vec![
        external(
            "w",
            DataType::Float,
            &[2, 3],
            "model.onnx.data",
            Some("16"),
            Some("24"),
        ),
        external(
            "ids",
            DataType::Int64,
            &[2],
            "./model.onnx.data",
            Some("40"),
            Some("16"),
        ),
        external("h", DataType::Float16, &[2], "sub/half.bin", None, None),
    ]);
    let model = OnnxModel::load(&write_model(dir.path(), &m)?)?;

    let w = model.initializer("w").ok_or("w")?;
    assert_eq!((w.dtype, w.dims), (DataType::Float, &[2, 3][..]));
    assert_eq!(w.to_f32_vec()?, weights);
    assert_eq!(w.bytes()?.as_ref(), &data[16..40]);
    let ext = w.external().ok_or("w not external")?;
    assert_eq!(
        (ext.location, ext.offset, ext.bytes.len()),
        (Path::new("model.onnx.data"), 16, 24)
    );
    assert_eq!(
        model.initializer("ids").ok_or("ids")?.to_i64_vec()?,
        vec![5, -9]
    );
    assert_eq!(
        model.initializer("h").ok_or("h")?.to_f32_vec()?,
        vec![1.0, -2.5]
    );

    // "./model.onnx.data" and "model.onnx.data" are one mapping.
    let files: Vec<_> = model
        .external_files()
        .map(|f| (f.location.clone(), f.size()))
        .collect();
    assert_eq!(
        files,
        vec![("model.onnx.data".into(), 56), ("sub/half.bin".into(), 4)]
    );
    let report = model.report();
    assert_eq!(
        report.external_files,
        vec![
            ("model.onnx.data".to_string(), 56),
            ("sub/half.bin".to_string(), 4)
        ]
    );
    assert_eq!(report.total_weight_bytes, 24 + 16 + 4);
    assert_eq!(model.initializers().count(), 3);
    Ok(())
}

#[test]
fn past_end_of_file() -> TestResult {
    let dir = tempfile::tempdir()?;
    write(dir.path(), "w.bin", &[0u8; 20])?;
    let t = external("w", DataType::Float, &[4], "w.bin", Some("8"), Some("16"));
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(&err, Error::ExternalOutOfBounds { tensor, offset: 8, length: 16, file_size: 20, path }
            if tensor == "w" && path.ends_with("w.bin")),
        "{err}"
    );
    // No length: the data runs to the end, and an offset past it fails too.
    let t = external("w", DataType::Float, &[4], "w.bin", Some("24"), None);
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(
            err,
            Error::ExternalOutOfBounds {
                offset: 24,
                file_size: 20,
                ..
            }
        ),
        "{err}"
    );
    Ok(())
}

#[test]
fn bad_offsets() -> TestResult {
    let dir = tempfile::tempdir()?;
    write(dir.path(), "w.bin", &[0u8; 16])?;
    let t = external("w", DataType::Float, &[4], "w.bin", Some("-4"), Some("16"));
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(&err, Error::ExternalDataInvalid { tensor, key, value, .. }
            if tensor == "w" && key == "offset" && value == "-4"),
        "{err}"
    );
    let max = u64::MAX.to_string();
    let t = external("w", DataType::Float, &[4], "w.bin", Some(&max), Some("16"));
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(
            err,
            Error::ExternalRangeOverflow {
                offset: u64::MAX,
                length: 16,
                ..
            }
        ),
        "{err}"
    );
    let t = external(
        "w",
        DataType::Float,
        &[4],
        "w.bin",
        Some("0"),
        Some("99999999999999999999"),
    );
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(&err, Error::ExternalDataInvalid { key, .. } if key == "length"),
        "{err}"
    );
    Ok(())
}

#[test]
fn missing_external_file_is_named() -> TestResult {
    let dir = tempfile::tempdir()?;
    let t = external(
        "layer.0.w",
        DataType::Float,
        &[4],
        "missing.bin",
        None,
        None,
    );
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(&err, Error::ExternalFile { tensor, location, source, .. }
            if tensor == "layer.0.w" && location == "missing.bin"
                && source.kind() == std::io::ErrorKind::NotFound),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("missing.bin") && text.contains("layer.0.w"),
        "{text}"
    );
    Ok(())
}

#[test]
fn locations_outside_the_model_directory() -> TestResult {
    let root = tempfile::tempdir()?;
    write(root.path(), "outside.bin", &[0u8; 16])?;
    let dir = root.path().join("model");
    std::fs::create_dir(&dir)?;
    let outside = root.path().join("outside.bin");
    let absolute = outside.to_str().ok_or("non-UTF-8 temp path")?;
    for location in ["../outside.bin", "a/../../outside.bin", absolute] {
        let t = external("w", DataType::Float, &[4], location, None, None);
        let err = load_err(&dir, t)?;
        assert!(
            matches!(&err, Error::ExternalLocation { location: l, .. } if l == location),
            "{location}: {err}"
        );
    }
    Ok(())
}

#[test]
fn byte_length_must_match_dims() -> TestResult {
    let dir = tempfile::tempdir()?;
    write(dir.path(), "w.bin", &[0u8; 64])?;
    let t = external(
        "w",
        DataType::Float,
        &[2, 3],
        "w.bin",
        Some("0"),
        Some("20"),
    );
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(
            &err,
            Error::ByteLengthMismatch {
                storage: "external data",
                expected: 24,
                actual: 20,
                ..
            }
        ),
        "{err}"
    );
    // int4: 5 elements pack into 3 bytes.
    let t = external("q", DataType::Int4, &[5], "w.bin", Some("0"), Some("2"));
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(
            err,
            Error::ByteLengthMismatch {
                expected: 3,
                actual: 2,
                ..
            }
        ),
        "{err}"
    );
    // Inline raw_data is checked the same way.
    let mut t = tensor("w", DataType::Float16, &[3]);
    t.raw_data = vec![0; 4];
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(
            err,
            Error::ByteLengthMismatch {
                storage: "raw_data",
                expected: 6,
                actual: 4,
                ..
            }
        ),
        "{err}"
    );
    Ok(())
}

#[test]
fn string_weights_in_external_data_are_rejected() -> TestResult {
    let dir = tempfile::tempdir()?;
    write(dir.path(), "w.bin", &[0u8; 8])?;
    let t = external("s", DataType::String, &[1], "w.bin", None, None);
    let err = load_err(dir.path(), t)?;
    assert!(
        matches!(&err, Error::Unsupported { tensor, .. } if tensor == "s"),
        "{err}"
    );
    Ok(())
}

#[test]
fn empty_file_and_empty_tensor() -> TestResult {
    let dir = tempfile::tempdir()?;
    write(dir.path(), "empty.bin", &[])?;
    let m = model(vec![external(
        "e",
        DataType::Float,
        &[0, 4],
        "empty.bin",
        None,
        None,
    )]);
    let model = OnnxModel::load(&write_model(dir.path(), &m)?)?;
    let e = model.initializer("e").ok_or("e")?;
    assert_eq!(e.num_elements()?, 0);
    assert!(e.to_f32_vec()?.is_empty());
    Ok(())
}
