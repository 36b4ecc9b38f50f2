//! No module imports itself in a circle, between files or between rooms (top-level modules),
//! in `api/src`, `storage/src` and `src` (the `weft` library), on the graph of `modules.rs`.
//!
//! There is no allow-list: issue #41 untied every circle the test found when it began (a
//! 28-file knot and a 9-room knot in storage, 18- and 26-file knots in src, one in api), so
//! any circle fails, printed with its members. `module_report` prints the graph between rooms for the before/after figures:
//! `cargo test --test e2e tidy::circles::module_report -- --nocapture` (it always passes).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use super::modules::{CRATES, Crate, Graph, knots, rooms};

/// Whether a knot is between modules (files) or between rooms (top-level modules).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Files,
    Rooms,
}

fn load(crate_src: &str) -> Crate {
    Crate::load(crate_src)
}

/// The knots of a crate's module graph at both levels.
fn knots_of(graph: &Graph) -> Vec<(Level, Vec<String>)> {
    let files = knots(graph).into_iter().map(|knot| (Level::Files, knot));
    let room_knots = knots(&rooms(graph))
        .into_iter()
        .map(|knot| (Level::Rooms, knot));
    files.chain(room_knots).collect()
}

fn assert_no_knots(crate_src: &str) {
    let graph = load(crate_src).graph();
    assert!(graph.len() > 3, "found modules {graph:?}");
    let found = knots_of(&graph);
    if found.is_empty() {
        return;
    }
    let mut message = format!("modules of {crate_src} import each other in a circle:\n");
    for (level, members) in &found {
        let _ = writeln!(message, "  {level:?}: {}", members.join(" "));
    }
    let _ = writeln!(
        message,
        "`TIDY_EXPLAIN=<room> cargo test --test e2e tidy::circles::module_report -- --nocapture` \
         shows every use that leaves a room."
    );
    panic!("{message}");
}

#[test]
fn api_modules_import_no_circle() {
    assert_no_knots("api/src");
}

#[test]
fn storage_modules_import_no_circle() {
    assert_no_knots("storage/src");
}

#[test]
fn weft_modules_import_no_circle() {
    assert_no_knots("src");
}

/// `storage`'s feature rooms (issue #41): each keeps its methods on its handle and imports the
/// shared rooms (`rows`, `access`, `unit`, `content`, `events`, …), never another feature.
const FEATURES: &[&str] = &[
    "artifacts",
    "compaction",
    "context",
    "delivery",
    "directory",
    "evidence",
    "lifespan",
    "lineage",
    "sessions",
    "work",
];

/// The rooms that put features together: the façade that hands out their handles, answers
/// that need two features, opening the engine, and the offline check (and benchmark setup).
const COMPOSERS: &[&str] = &["lib", "compose", "lifecycle", "fsck", "bench_support"];

/// No feature imports (or calls a method of) another, and no shared room imports a feature:
/// only the composers do. A use through a method call counts (the graph resolves methods to
/// the file that defines them), so an `Engine` method cannot hide one.
#[test]
fn storage_features_import_no_feature() {
    let graph = rooms(&load("storage/src").graph());
    let mut found = Vec::new();
    for feature in FEATURES {
        assert!(graph.contains_key(*feature), "no room {feature} in storage");
    }
    for (from, edges) in &graph {
        if COMPOSERS.contains(&from.as_str()) {
            continue;
        }
        for (to, n) in edges {
            if FEATURES.contains(&to.as_str()) {
                found.push(format!("{from} -> {to} ({n} uses)"));
            }
        }
    }
    assert!(
        found.is_empty(),
        "these rooms import a feature (only {COMPOSERS:?} may; \
         `TIDY_EXPLAIN=<room> cargo test --test e2e tidy::circles::module_report -- --nocapture` \
         shows the uses):\n  {}",
        found.join("\n  ")
    );
}

/// Prints each crate's graph between rooms (edges with the number of module edges each
/// sums) and its knots, for the before/after figures of issue #41; with `TIDY_EXPLAIN=<room>`
/// also every use that leaves that room, and what is written there; with `TIDY_ROOT=<dir>`,
/// on the workspace checked out there.
#[test]
fn module_report() {
    // `TIDY_ROOT=<a checkout>` reports on another tree (the "before" of a change).
    let root = std::env::var("TIDY_ROOT").unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").into());
    let load = |crate_src| Crate::load_from(std::path::Path::new(&root), crate_src);
    for crate_src in CRATES {
        let graph = load(crate_src).graph();
        let room_graph = rooms(&graph);
        let module_edges: usize = graph.values().map(BTreeMap::len).sum();
        let room_edges: usize = room_graph.values().map(BTreeMap::len).sum();
        println!(
            "== {crate_src}: {} modules, {module_edges} module edges; {} rooms, {room_edges} edges between rooms",
            graph.len(),
            room_graph.len()
        );
        for (room, edges) in &room_graph {
            let edges: Vec<String> = edges.iter().map(|(to, n)| format!("{to}({n})")).collect();
            println!("  {room} -> {}", edges.join(" "));
        }
        for (level, knot) in knots_of(&graph) {
            println!(
                "  knot of {:?}, {} members: {}",
                level,
                knot.len(),
                knot.join(" ")
            );
        }
        // `TIDY_EXPLAIN=work` lists what the modules of room `work` use of other rooms;
        // `TIDY_EXPLAIN=*` every use between modules.
        if let Ok(explained) = std::env::var("TIDY_EXPLAIN") {
            for (from, to, written) in load(crate_src).uses() {
                let room = |module: &str| module.split("::").next().unwrap_or_default().to_owned();
                let all = explained == "*";
                if all || (room(&from) == explained && room(&to) != explained) {
                    println!("  {from} -> {to}: {written}");
                }
            }
        }
    }
}

fn crate_of(files: &[(&str, &str)]) -> Crate {
    let files: BTreeMap<PathBuf, String> = files
        .iter()
        .map(|(path, text)| (PathBuf::from(path), text.to_string()))
        .collect();
    Crate::from_files(&files)
}

#[test]
fn the_module_graph_check_finds_circles() {
    // Through `super::`: a folder's `mod.rs` uses its child, which uses a helper of `mod.rs`.
    let through_super = crate_of(&[
        ("lib.rs", "mod a; mod b;"),
        (
            "a/mod.rs",
            "mod c;\npub(crate) fn shared() {}\npub(crate) fn go() { c::run() }",
        ),
        ("a/c.rs", "pub(crate) fn run() { super::shared() }"),
        ("b.rs", "use crate::a::go; fn f() { go() }"),
    ]);
    let graph = through_super.graph();
    assert_eq!(knots(&graph), [["a", "a::c"]]);
    assert!(knots(&rooms(&graph)).is_empty(), "one room: {graph:?}");

    // Through a re-export: `b::Thing` is defined in `b::inner`, which uses `d`, which uses
    // `b::Thing`. The knot is `b::inner`–`d` (not `b`), and rooms `b` and `d` knot too.
    let through_reexport = crate_of(&[
        ("lib.rs", "mod b; mod d; mod e;"),
        ("b/mod.rs", "mod inner;\npub(crate) use inner::Thing;"),
        (
            "b/inner.rs",
            "pub(crate) struct Thing;\nfn f() { crate::d::g(); }",
        ),
        (
            "d.rs",
            "use crate::b::Thing;\npub(crate) fn g() -> Option<Thing> { None }",
        ),
        ("e.rs", "use super::b;\nfn h() -> b::Thing { todo!() }"),
    ]);
    let graph = through_reexport.graph();
    assert_eq!(knots(&graph), [["b::inner", "d"]]);
    assert_eq!(knots(&rooms(&graph)), [["b", "d"]]);
    assert_eq!(graph["e"].keys().collect::<Vec<_>>(), ["b::inner"]);

    // Through an alias, a glob and an inherent method defined in another room's file.
    let through_methods = crate_of(&[
        (
            "lib.rs",
            "mod engine; mod work; mod artifacts;\npub struct Engine;",
        ),
        (
            "engine.rs",
            "use crate::Engine;\nimpl Engine { fn open() {} }",
        ),
        (
            "work/mod.rs",
            "mod apply;\nuse crate::artifacts as arts;\nfn w() { arts::publish() }",
        ),
        (
            "work/apply.rs",
            "use super::*;\nfn x(engine: &crate::Engine) { engine.accept(); arts::publish() }",
        ),
        (
            "artifacts.rs",
            "pub(crate) fn publish() {}\nimpl crate::Engine {\n    pub(crate) fn reserve(&self) {}\n}\nfn y(e: &crate::Engine) { e.accept() }",
        ),
        (
            "work/accept.rs",
            "not a module: no `mod accept;` declares it",
        ),
    ]);
    let graph = through_methods.graph();
    assert_eq!(graph["work"].keys().collect::<Vec<_>>(), ["artifacts"]);
    assert_eq!(
        graph["work::apply"].keys().collect::<Vec<_>>(),
        ["artifacts", "lib"]
    );
    let methods_elsewhere = crate_of(&[
        (
            "lib.rs",
            "mod engine; mod work;\npub struct Engine;\nimpl Engine { fn open(&self) {} }",
        ),
        (
            "engine.rs",
            "impl crate::Engine { pub(crate) fn reserve(&self) { crate::work::after() } }",
        ),
        (
            "work.rs",
            "pub(crate) fn after() {}\nfn go(engine: &crate::Engine) { engine.reserve() }",
        ),
    ]);
    assert_eq!(knots(&methods_elsewhere.graph()), [["engine", "work"]]);
}
