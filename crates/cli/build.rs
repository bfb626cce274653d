//! Records the commit the binary is built from as `GENAI_BRIDGE_COMMIT` (what `bench --json` and
//! `generate --json` report), with `+dirty` when tracked files differ from it, "unknown" outside
//! a git checkout; reruns when HEAD moves or a source file changes.

use std::path::{Path, PathBuf};
use std::process::Command;

fn git(root: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(root)
        .args(args)
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_string()).filter(|s| !s.is_empty())
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let commit = match git(&root, &["rev-parse", "--short=12", "HEAD"]) {
        // A binary built from uncommitted changes must not pass for the commit.
        Some(c) if git(&root, &["status", "--porcelain", "--untracked-files=no"]).is_some() => {
            format!("{c}+dirty")
        }
        Some(c) => c,
        None => "unknown".into(),
    };
    println!("cargo:rustc-env=GENAI_BRIDGE_COMMIT={commit}");
    println!("cargo:rerun-if-changed=build.rs");
    // Any source change may make the tree dirty (or clean again).
    for dir in ["crates", "kernels", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    // HEAD (per worktree), the branch it names and the packed refs (shared): a new commit
    // changes one of them.
    let (Some(git_dir), Some(common)) = (
        git(&root, &["rev-parse", "--absolute-git-dir"]),
        git(
            &root,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        ),
    ) else {
        return;
    };
    let head = Path::new(&git_dir).join("HEAD");
    println!("cargo:rerun-if-changed={}", head.display());
    if let Some(name) = std::fs::read_to_string(&head)
        .ok()
        .and_then(|h| h.strip_prefix("ref: ").map(|r| r.trim().to_string()))
    {
        println!(
            "cargo:rerun-if-changed={}",
            Path::new(&common).join(name).display()
        );
    }
    println!(
        "cargo:rerun-if-changed={}",
        Path::new(&common).join("packed-refs").display()
    );
}
