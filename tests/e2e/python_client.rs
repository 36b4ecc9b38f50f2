//! The Python client (issue #48, `clients/python/`): its pytest suite runs against this
//! build's binary (`WEFT_BIN`; the suite starts its own `weft serve` processes on
//! 127.0.0.1:0), `mypy --strict` passes over the package, its tests, its example, its
//! benchmark and its docs generator, and `pip install` builds it (offline, with the venv's setuptools and wheel).
//! `scripts/test` installs what they need into the venv it exports as `WEFT_PYTHON`; with
//! `WEFT_PYTHON` set, a missing package is a failure, never a skip.

use std::path::Path;
use std::process::Command;

use crate::support::WEFT;

const PACKAGE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/clients/python");

/// The Python `scripts/test` prepared, checked to hold the client's dependencies.
fn python() -> Option<String> {
    let Ok(python) = std::env::var("WEFT_PYTHON") else {
        eprintln!("SKIPPED: WEFT_PYTHON is not set; run scripts/test, which prepares it");
        return None;
    };
    let check = Command::new(&python)
        .args([
            "-c",
            "import httpx, blake3, cryptography, pytest, mypy, setuptools, wheel",
        ])
        .output()
        .expect("WEFT_PYTHON runs");
    assert!(
        check.status.success(),
        "WEFT_PYTHON lacks the client's packages (scripts/test installs them): {}",
        String::from_utf8_lossy(&check.stderr)
    );
    Some(python)
}

fn run(python: &str, dir: &Path, args: &[&str]) -> (bool, String) {
    let output = Command::new(python)
        .args(args)
        .current_dir(dir)
        .env("WEFT_BIN", WEFT)
        .env("PYTHONPATH", Path::new(PACKAGE).join("src"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn the_python_clients_suite_passes_against_the_real_server() {
    let Some(python) = python() else { return };
    let (ok, text) = run(
        &python,
        Path::new(PACKAGE),
        &[
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            "tests",
        ],
    );
    assert!(ok, "pytest failed:\n{text}");
    let passed = text
        .lines()
        .rev()
        .find_map(|line| {
            let (count, rest) = line.trim().trim_matches('=').trim().split_once(' ')?;
            rest.starts_with("passed")
                .then(|| count.parse::<u32>().ok())?
        })
        .unwrap_or(0);
    assert!(passed >= 15, "only {passed} Python tests passed:\n{text}");
    assert!(!text.contains("skipped"), "a Python test skipped:\n{text}");
}

#[test]
fn the_python_client_is_mypy_strict_clean() {
    let Some(python) = python() else { return };
    let cache = tempfile::tempdir().expect("tempdir");
    let cache_dir = cache.path().to_str().expect("utf-8 path");
    let (ok, text) = run(
        &python,
        Path::new(PACKAGE),
        &[
            "-m",
            "mypy",
            "--strict",
            "--cache-dir",
            cache_dir,
            "src/weft",
            "tests",
            "examples",
            "bench",
            "docs",
        ],
    );
    assert!(ok, "mypy --strict found problems:\n{text}");
    assert!(text.contains("Success: no issues found"), "{text}");
}

/// `pip install ./clients/python` works as the package README says (from a copy, so the
/// build leaves nothing in the repository), and installs the typed package.
#[test]
fn the_python_client_installs_with_pip() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let source = dir.path().join("python");
    let copied = Command::new("cp")
        .args(["-r", PACKAGE])
        .arg(&source)
        .status()
        .expect("cp runs");
    assert!(copied.success());
    let target = dir.path().join("site");
    let installed = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
        ])
        .args(["--disable-pip-version-check", "--target"])
        .arg(&target)
        .arg(&source)
        .output()
        .expect("pip runs");
    assert!(
        installed.status.success(),
        "pip install failed: {}",
        String::from_utf8_lossy(&installed.stderr)
    );
    assert!(
        target.join("weft/py.typed").exists(),
        "the package is marked typed"
    );
    let imported = Command::new(&python)
        .args([
            "-c",
            "import weft, sys; print(weft.__file__); print(weft.__version__)",
        ])
        .env("PYTHONPATH", &target)
        .current_dir(dir.path())
        .output()
        .expect("python runs");
    let printed = String::from_utf8_lossy(&imported.stdout);
    assert!(imported.status.success(), "{printed}");
    assert!(
        printed.contains(target.to_str().expect("utf-8")),
        "{printed}"
    );
}
