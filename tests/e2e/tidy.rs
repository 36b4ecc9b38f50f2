//! Repository rules checked by `cargo test`: every Rust file opens with a `//!` comment
//! saying what it owns and is short (or says why not), dependencies point one way
//! (`src` → `storage` → `api`), `api` without its client does no I/O, and no module of `api`
//! or `storage` imports itself in a circle.

use std::collections::{BTreeMap, BTreeSet};
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
    assert!(
        !depends_on("weft-storage", "hyper"),
        "storage never sees HTTP"
    );
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

/// Crate-internal module dependencies of the crate whose sources are in `src`: an edge
/// `a -> b` for every `crate::b…` path in `a`'s file. A module is a file (`lib.rs` is `lib`,
/// `x/mod.rs` is `x`, `x/y.rs` is `x::y`); a `crate::Name` that is no module resolves to the
/// root façade `lib`, and `lib`'s own relative `m::` paths are edges to `m`.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let module_of_file = |path: &Path| -> String {
        let relative = path
            .strip_prefix(src)
            .expect("under src")
            .with_extension("");
        let mut segments: Vec<String> = relative
            .iter()
            .map(|segment| segment.to_string_lossy().into_owned())
            .collect();
        if segments.last().is_some_and(|last| last == "mod") {
            segments.pop();
        }
        segments.join("::")
    };
    let modules: BTreeSet<String> = files.iter().map(|path| module_of_file(path)).collect();
    let top_level: Vec<String> = modules
        .iter()
        .filter(|module| !module.contains("::") && *module != "lib")
        .cloned()
        .collect();
    let mut graph = BTreeMap::new();
    for path in &files {
        let module = module_of_file(path);
        let code = without_comments(&std::fs::read_to_string(path).unwrap_or_default());
        let mut imports = BTreeSet::new();
        for segments in crate_paths(&code, "crate::") {
            imports.insert(resolve(&segments, &modules));
        }
        if module == "lib" {
            for name in &top_level {
                if !crate_paths(&code, &format!("{name}::")).is_empty() {
                    imports.insert(name.clone());
                }
            }
        }
        imports.remove(&module);
        graph.insert(module, imports);
    }
    graph
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths that start with `prefix` (not as the tail of a longer path), as segments after
/// it; a `{a::B, c}` group gives one path per item.
fn crate_paths(code: &str, prefix: &str) -> Vec<Vec<String>> {
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut found = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == ':' || c == '$') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        let leading = if prefix == "crate::" {
            Vec::new()
        } else {
            vec![prefix.trim_end_matches("::").to_owned()]
        };
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => return true,
                        '}' => depth -= 1,
                        _ => {}
                    }
                    false
                })
                .map_or(group.len(), |(end, _)| end);
            let mut depth = 0;
            let mut item = String::new();
            let mut items = Vec::new();
            for c in group[..end].chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => items.push(std::mem::take(&mut item)),
                    _ if depth == 0 => item.push(c),
                    _ => {}
                }
            }
            items.push(item);
            for item in items {
                let mut segments = leading.clone();
                segments.extend(path_segments(item.trim()));
                if segments.len() > leading.len() {
                    found.push(segments);
                }
            }
        } else {
            let mut segments = leading;
            segments.extend(path_segments(rest));
            found.push(segments);
        }
    }
    found
}

/// `a::b::C…` → `[a, b, C]`, stopping at the first character that continues no path.
fn path_segments(text: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut rest = text;
    loop {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        segments.push(rest[..end].to_owned());
        match rest[end..].strip_prefix("::") {
            Some(next) => rest = next,
            None => break,
        }
    }
    segments
}

/// The longest module a path names, or `lib` for an item of the crate root.
fn resolve(segments: &[String], modules: &BTreeSet<String>) -> String {
    (1..=segments.len())
        .rev()
        .map(|n| segments[..n].join("::"))
        .find(|candidate| modules.contains(candidate))
        .unwrap_or_else(|| "lib".to_owned())
}

/// Every circle in `graph`, each as `a -> b -> … -> a`, found by depth-first search.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
        found: &mut BTreeSet<String>,
    ) {
        if let Some(at) = stack.iter().position(|m| m == module) {
            let mut circle = stack[at..].to_vec();
            // Start every circle at its smallest name, so one circle is reported once.
            let smallest = (0..circle.len()).min_by_key(|&i| &circle[i]).unwrap_or(0);
            circle.rotate_left(smallest);
            circle.push(circle[0].clone());
            found.insert(circle.join(" -> "));
            return;
        }
        if done.contains(module) {
            return;
        }
        stack.push(module.to_owned());
        for next in graph.get(module).into_iter().flatten() {
            visit(next, graph, stack, done, found);
        }
        stack.pop();
        done.insert(module.to_owned());
    }
    let mut found = BTreeSet::new();
    let mut done = BTreeSet::new();
    for module in graph.keys() {
        visit(module, graph, &mut Vec::new(), &mut done, &mut found);
    }
    found.into_iter().collect()
}

fn assert_no_circle(crate_src: &str) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(crate_src);
    let graph = module_graph(&src);
    assert!(graph.len() > 3, "found modules {graph:?}");
    let found = circles(&graph);
    assert!(
        found.is_empty(),
        "module-import circles in {crate_src}:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_module_graph_check_finds_circles() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("lib", &["a"][..]),
        ("a", &["b"]),
        ("b", &["lib"]),
        ("c", &["a"]),
    ]
    .into_iter()
    .map(|(module, imports)| {
        let imports = imports.iter().map(|name| name.to_string()).collect();
        (module.to_owned(), imports)
    })
    .collect();
    assert_eq!(circles(&graph), ["a -> b -> lib -> a"]);
    let modules: BTreeSet<String> = ["lib", "a", "a::b"].map(String::from).into();
    let paths = crate_paths(
        "use crate::{a::b::C, D};\nlet x = crate::a::f(); $crate::z; other_crate::a",
        "crate::",
    );
    let resolved: Vec<String> = paths.iter().map(|p| resolve(p, &modules)).collect();
    assert_eq!(resolved, ["a::b", "lib", "a"]);
}

#[test]
fn api_modules_import_no_circle() {
    assert_no_circle("api/src");
}

#[test]
fn storage_modules_import_no_circle() {
    assert_no_circle("storage/src");
}
