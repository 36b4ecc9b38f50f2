//! Repository rules checked by `cargo test`: every Rust file opens with a `//!` comment
//! saying what it owns, and dependencies point one way (`src` → `storage` → `api`).

use std::path::{Path, PathBuf};
use std::process::Command;

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("readable").flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != ".git" && name != "fixtures" {
                rust_files(&path, found);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn every_rust_file_says_what_it_owns() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "api", "storage", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 20, "found {files:?}");
    let missing: Vec<_> = files
        .iter()
        .filter(|path| {
            !std::fs::read_to_string(path)
                .unwrap_or_default()
                .starts_with("//!")
        })
        .collect();
    assert!(
        missing.is_empty(),
        "files without a //! header: {missing:?}"
    );
}

/// `cargo tree -i CRATE` succeeds only if `package` depends on `CRATE`.
fn depends_on(package: &str, dependency: &str) -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "-p",
            package,
            "-i",
            dependency,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("cargo runs");
    status.success()
}

#[test]
fn dependencies_point_one_way() {
    assert!(
        depends_on("weft-storage", "rusqlite"),
        "the check itself works"
    );
    assert!(!depends_on("weft-api", "rusqlite"), "api does no I/O");
    assert!(!depends_on("weft-api", "object_store"), "api does no I/O");
    assert!(
        !depends_on("weft-storage", "axum"),
        "storage never sees HTTP"
    );
    assert!(
        !depends_on("weft-storage", "hyper"),
        "storage never sees HTTP"
    );
}
