//! `include/ort_genai_c.h` is generated from this crate's code by cbindgen; this test regenerates
//! it and fails when the committed copy is stale (`GENAI_BRIDGE_BLESS=1` rewrites it). It also
//! checks that every function the library exports is declared.

use std::path::PathBuf;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn generate() -> String {
    let config = cbindgen::Config::from_file(crate_dir().join("cbindgen.toml"))
        .expect("cbindgen.toml parses");
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir())
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("the header is UTF-8")
}

#[test]
fn committed_header_is_current() {
    let path = crate_dir().join("include/ort_genai_c.h");
    let generated = generate();
    if std::env::var("GENAI_BRIDGE_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, &generated).expect("write the header");
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: regenerate it with GENAI_BRIDGE_BLESS=1 cargo test -p genai-capi --test header",
        path.display()
    );
}

#[test]
fn header_declares_every_exported_function() {
    let header = generate();
    let sources = ["src", "src/unsupported"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(crate_dir().join(dir)).expect("source folder"))
        .map(|entry| entry.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"));
    let mut exported = 0;
    for path in sources {
        let text = std::fs::read_to_string(&path).expect("read source");
        for line in text.lines() {
            let Some(rest) = line.split("extern \"C\" fn ").nth(1) else {
                continue;
            };
            let name = rest.split('(').next().unwrap_or_default();
            if !name.starts_with("Oga") {
                continue;
            }
            exported += 1;
            assert!(
                header.contains(&format!(" {name}(")) || header.contains(&format!("*{name}(")),
                "{name} is exported but missing from the header"
            );
        }
    }
    // The official 0.18 library exports 216 Oga* functions; so must we.
    assert_eq!(exported, 216, "exported Oga* functions");
}
