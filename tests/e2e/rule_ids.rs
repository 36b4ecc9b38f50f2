//! Every protocol rule the server implements is cited by a test (issue #49). The rule ids and
//! who implements each (`server`, `worker`: the Worker runtime of issue #47, `open`: not yet,
//! with its issue) are copied into `fixtures/rule_ids.json`, because a clean clone has no
//! `../shared`; when `../shared/spec/REQUIREMENTS.md` is there, the copy must list exactly its
//! ids. A test cites a rule by naming it in its doc comment (`OFR-9`, `SM-T6` or the table's
//! `T6`) or in its name (`ofr_9_…`, `sm_t6_…`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A rule of `fixtures/rule_ids.json`.
#[derive(Debug, serde::Deserialize)]
struct Rule {
    id: String,
    status: String,
    issue: Option<u32>,
    note: Option<String>,
}

fn rules() -> Vec<Rule> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/rule_ids.json");
    let text = std::fs::read_to_string(&path).expect("fixtures/rule_ids.json");
    let file: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    serde_json::from_value(file["rules"].clone()).expect("a list of rules")
}

/// The ids REQUIREMENTS.md defines: each bold `**XXX-n**` or `**XXX-n.m**`, and the
/// transition table's rows `| Tn |`, cited as `SM-Tn`.
fn requirement_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for (index, bold) in text.split("**").enumerate() {
        if index % 2 == 1 && is_rule_id(bold) {
            ids.insert(bold.to_owned());
        }
    }
    for line in text.lines() {
        if let Some(row) = line.strip_prefix("| T")
            && let Some((number, _)) = row.split_once(' ')
            && !number.is_empty()
            && number.bytes().all(|b| b.is_ascii_digit())
        {
            ids.insert(format!("SM-T{number}"));
        }
    }
    ids
}

fn is_rule_id(text: &str) -> bool {
    let Some((family, number)) = text.split_once('-') else {
        return false;
    };
    let digits = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    !family.is_empty()
        && family.bytes().all(|b| b.is_ascii_uppercase())
        && match number.split_once('.') {
            Some((whole, item)) => digits(whole) && digits(item),
            None => digits(number),
        }
}

/// A test: its function name and its doc comment, joined into one line.
struct Test {
    name: String,
    doc: String,
}

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

/// The tests of `source`: functions under a `#[test]`-like attribute, and the
/// `async fn name(kind: Kind)` bodies that `backends!` stamps into tests.
fn tests_in(source: &str, tests: &mut Vec<Test>) {
    let (mut doc, mut attributes) = (Vec::new(), Vec::new());
    for line in source.lines().map(str::trim) {
        if let Some(text) = line.strip_prefix("///") {
            doc.push(text.trim());
            continue;
        }
        if line.starts_with("#[") {
            attributes.push(line);
            continue;
        }
        let signature = line
            .trim_start_matches("pub ")
            .trim_start_matches("pub(super) ");
        let (is_async, rest) = match signature.strip_prefix("async ") {
            Some(rest) => (true, rest),
            None => (false, signature),
        };
        if let Some(rest) = rest.strip_prefix("fn ")
            && let Some((name, parameters)) = rest.split_once('(')
        {
            let marked = attributes.iter().any(|a| a.contains("test"));
            if marked || (is_async && parameters.starts_with("kind: Kind")) {
                tests.push(Test {
                    name: name.trim().to_owned(),
                    doc: doc.join(" "),
                });
            }
        }
        doc.clear();
        attributes.clear();
    }
}

fn all_tests() -> Vec<Test> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["src", "storage", "api", "tests"] {
        rust_files(&root.join(dir), &mut files);
    }
    let mut tests = Vec::new();
    for file in files {
        let source = std::fs::read_to_string(&file).expect("readable");
        tests_in(&source, &mut tests);
    }
    tests
}

/// Whether `text` names `id` as a whole: `CON-1` is not cited by `CON-1.9` or `CON-10`.
fn names(text: &str, id: &str) -> bool {
    text.match_indices(id).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let mut after = text[at + id.len()..].chars();
        let next = after.next();
        let clear_before = !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-');
        let clear_after = match next {
            Some(c) if c.is_ascii_digit() => false,
            Some('.') => !after.next().is_some_and(|c| c.is_ascii_digit()),
            _ => true,
        };
        clear_before && clear_after
    })
}

/// Whether `test` cites `id` in its doc comment or its name.
fn cites(test: &Test, id: &str) -> bool {
    let mut spellings = vec![id.to_owned()];
    if let Some(row) = id.strip_prefix("SM-") {
        spellings.push(row.to_owned());
    }
    spellings.iter().any(|spelling| {
        let in_name = spelling.to_lowercase().replace(['-', '.'], "_");
        let words: Vec<&str> = test.name.split('_').collect();
        let wanted: Vec<&str> = in_name.split('_').collect();
        names(&test.doc, spelling) || words.windows(wanted.len()).any(|w| w == wanted.as_slice())
    })
}

#[test]
fn the_rule_ids_fixture_lists_every_requirement() {
    let rules = rules();
    let listed: BTreeSet<String> = rules.iter().map(|r| r.id.clone()).collect();
    assert_eq!(listed.len(), rules.len(), "an id listed twice");
    for rule in &rules {
        assert!(
            is_rule_id(&rule.id) || rule.id.starts_with("SM-T"),
            "{rule:?}"
        );
        match rule.status.as_str() {
            "server" => assert!(rule.issue.is_none(), "{rule:?}"),
            "worker" => assert_eq!(rule.issue, Some(47), "{rule:?}"),
            "open" => assert!(rule.issue.is_some() || rule.note.is_some(), "{rule:?}"),
            other => panic!("status {other:?} is not server, worker or open: {rule:?}"),
        }
    }
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/spec/REQUIREMENTS.md");
    // A clean clone has no ../shared: the fixture is then the only copy.
    if let Ok(text) = std::fs::read_to_string(&spec) {
        assert_eq!(
            listed,
            requirement_ids(&text),
            "fixtures/rule_ids.json vs {spec:?}"
        );
    }
}

#[test]
fn every_rule_the_server_or_the_worker_implements_is_cited_by_a_test() {
    let tests = all_tests();
    assert!(tests.len() > 300, "found only {} tests", tests.len());
    let uncited: Vec<String> = rules()
        .iter()
        .filter(|rule| rule.status == "server" || rule.status == "worker")
        .filter(|rule| !tests.iter().any(|test| cites(test, &rule.id)))
        .map(|rule| rule.id.clone())
        .collect();
    assert!(
        uncited.is_empty(),
        "server and Worker rules no test names or documents: {uncited:?}"
    );
}

#[test]
fn citations_are_read_as_whole_ids() {
    let test = |name: &str, doc: &str| Test {
        name: name.to_owned(),
        doc: doc.to_owned(),
    };
    let documented = test("x", "CON-1.9 and T6, (OFR-10).");
    assert!(cites(&documented, "CON-1.9") && cites(&documented, "SM-T6"));
    assert!(cites(&documented, "OFR-10"));
    assert!(!cites(&documented, "CON-1") && !cites(&documented, "OFR-1"));
    assert!(!cites(&documented, "SM-T1"));
    let named = test("ofr_9_sm_t6_a_test", "");
    assert!(cites(&named, "OFR-9") && cites(&named, "SM-T6"));
    assert!(!cites(&named, "OFR-1") && !cites(&named, "SM-T1"));
}
