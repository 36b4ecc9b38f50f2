//! Repository rules checked by `cargo test`: every Rust file opens with a `//!` comment
//! saying what it owns and is short (or says why not), dependencies point one way
//! (`src` → `storage` → `api`), and `api` without its client does no I/O. Below: no module
//! of `api`, `storage` or `src` imports itself in a circle (`circles.rs`, on the graph of
//! `modules.rs`), and no SQL names a table outside its `storage/src/rows/` file (`tables.rs`).

mod circles;
mod modules;
mod source;
mod tables;

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
    for dir in ["src", "api", "storage", "sqlite-vfs", "tests"] {
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
    // Storage is an HTTP client of an S3 blob store (object_store's `aws`, on reqwest, which
    // brings hyper and tower-http), never a server: the check above (no axum) is the one
    // that holds.
    // The one crate that allows `unsafe` (SQLite's VFS) is a leaf: it knows nothing of weft.
    assert!(
        !depends_on("weft-sqlite-vfs", "weft-api"),
        "the VFS shim is a leaf"
    );
}

#[test]
fn api_without_its_client_does_no_io() {
    for dependency in ["tokio", "reqwest", "futures"] {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args([
                "tree",
                "--offline",
                "-e",
                "normal",
                "-p",
                "weft-api",
                "--no-default-features",
                "-i",
                dependency,
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("cargo runs");
        assert!(
            !status.success(),
            "weft-api without feature `client` pulls in {dependency}"
        );
    }
    assert!(
        depends_on_with_client("tokio"),
        "the check itself works: the client does pull in tokio"
    );
}

/// Whether `weft-api` with its `client` feature depends on `dependency`.
fn depends_on_with_client(dependency: &str) -> bool {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "-p",
            "weft-api",
            "--features",
            "client",
            "-i",
            dependency,
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("cargo runs")
        .success()
}

/// A file past this many lines must say at its top why it is that long.
const LONG_FILE: usize = 600;
/// No file may pass this many lines, reason or not.
const LONGEST_FILE: usize = 800;

#[test]
fn no_rust_file_is_too_long_and_long_ones_say_why() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(root, &mut files);
    let mut problems = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let n_lines = text.lines().count();
        let shown = path.strip_prefix(root).unwrap_or(path).display();
        if n_lines > LONGEST_FILE {
            problems.push(format!("{shown}: {n_lines} lines (at most {LONGEST_FILE})"));
        } else if n_lines > LONG_FILE && !says_why_it_is_long(&text) {
            problems.push(format!(
                "{shown}: {n_lines} lines and no `//!` line in its first 15 saying why it is large"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn says_why_it_is_long(text: &str) -> bool {
    text.lines()
        .take(15)
        .filter(|line| line.trim_start().starts_with("//!"))
        .map(str::to_ascii_lowercase)
        .any(|line| {
            ["large", "long", "size", "why"]
                .iter()
                .any(|word| line.contains(word))
        })
}
