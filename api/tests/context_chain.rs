//! CTX-4: the version chain rule `weft_api::context::check_chain` against the table in
//! `fixtures/context_chain.json`, one case per way a `previous` can be right or wrong.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;
use weft_api::context::{Link, check_chain};
use weft_api::{ArtifactId, Id};

#[derive(Deserialize)]
struct Table {
    versions: BTreeMap<String, Link>,
    cases: Vec<Case>,
}

#[derive(Deserialize)]
struct Case {
    name: String,
    package: String,
    version: u64,
    mission: String,
    previous: Option<String>,
    latest: Option<String>,
    expected: Option<String>,
}

#[test]
fn ctx4_version_chain_table() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/context_chain.json");
    let text = std::fs::read_to_string(&path).expect("fixtures/context_chain.json");
    let table: Table = serde_json::from_str(&text).expect("table parses");
    let unknown: ArtifactId =
        "blake3:ff00000000000000000000000000000000000000000000000000000000000000"
            .parse()
            .expect("digest");
    assert!(table.cases.len() >= 10, "every branch has a row");
    for case in &table.cases {
        let new = Link {
            id: "blake3:ee00000000000000000000000000000000000000000000000000000000000000"
                .parse()
                .expect("digest"),
            package_id: Id::parse("packageId", &case.package).expect("id"),
            version: case.version,
            mission_id: Id::parse("missionId", &case.mission).expect("id"),
        };
        let previous = case
            .previous
            .as_deref()
            .map(|name| table.versions.get(name).map_or(unknown, |link| link.id));
        let named = case
            .previous
            .as_deref()
            .and_then(|name| table.versions.get(name));
        let latest = case.latest.as_deref().map(|name| &table.versions[name]);
        let outcome = check_chain(&new, previous.as_ref(), named, latest)
            .err()
            .map(|rejection| rejection.code.as_str().to_owned());
        assert_eq!(outcome, case.expected, "CTX-4: {}", case.name);
    }
}
