//! How an Event becomes the bytes its hash covers (README "How an Event is hashed", issue
//! #40), against the vector in `fixtures/event_hash.json`: Events as the server served them,
//! their canonical bytes and their hash. `weft_api::event` must rebuild both from the served
//! text, and `tests/python/event_hash.py`, written from the README's rules alone (its own
//! BLAKE3 included), must too.

use std::path::PathBuf;

use serde::Deserialize;
use weft_api::event::{Event, EventHash, Unhashed, verify_chain};

#[derive(Deserialize)]
struct Vector {
    events: Vec<Case>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Case {
    name: String,
    /// The Event object's text exactly as served.
    served: String,
    canonical_hex: String,
    hash: String,
}

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn vector() -> Vector {
    let path = repository().join("fixtures/event_hash.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("event_hash.json")
}

fn canonical_bytes(event: &Event) -> Vec<u8> {
    Unhashed {
        event_id: &event.event_id,
        group_id: &event.group_id,
        sequence: event.sequence,
        kind: &event.kind,
        causation_command_id: event.causation_command_id.as_deref(),
        payload_json: event.payload.get(),
        appended_at: &event.appended_at,
        prev_hash: &event.prev_hash,
    }
    .canonical_bytes()
}

#[test]
fn served_events_rebuild_their_canonical_bytes_and_hash() {
    let vector = vector();
    assert!(vector.events.len() >= 2, "a vector has several Events");
    let mut events = Vec::new();
    for case in &vector.events {
        let event: Event = serde_json::from_str(&case.served).expect(&case.name);
        assert_eq!(
            hex::encode(canonical_bytes(&event)),
            case.canonical_hex,
            "{}",
            case.name
        );
        let expected: EventHash = case.hash.parse().expect("blake3:<hex>");
        // hash = blake3(prevHash's 32 bytes ‖ canonical bytes)
        let mut hasher = blake3::Hasher::new();
        hasher.update(&event.prev_hash.0);
        hasher.update(&hex::decode(&case.canonical_hex).expect("hex"));
        assert_eq!(hasher.finalize().as_bytes(), &expected.0, "{}", case.name);
        assert_eq!(event.computed_hash(), expected, "{}", case.name);
        assert_eq!(event.hash, expected, "{}: as served", case.name);
        events.push(event);
    }
    // Sequence 1 chains from 32 zero bytes; 4 and 5 are consecutive and chain.
    assert_eq!(events[0].sequence, 1);
    assert_eq!(
        verify_chain(0, EventHash::GENESIS, &events[..1]),
        Ok((1, events[0].hash))
    );
    let consecutive = &events[1..];
    let first = &consecutive[0];
    let head = verify_chain(first.sequence - 1, first.prev_hash, consecutive);
    assert_eq!(head.map(|(sequence, _)| sequence), Ok(first.sequence + 1));
}

/// The natural RFC 8785 guess at a value: keys sorted (all keys here are ASCII, so code-unit
/// order is byte order), whole numbers without a fraction, strings escaped as JSON does.
fn rfc_8785_guess(value: &serde_json::Value) -> String {
    use serde_json::Value;
    match value {
        Value::Object(members) => {
            let mut names: Vec<&String> = members.keys().collect();
            names.sort();
            let inner: Vec<String> = names
                .into_iter()
                .map(|name| {
                    format!(
                        "{}:{}",
                        Value::from(name.as_str()),
                        rfc_8785_guess(&members[name])
                    )
                })
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(rfc_8785_guess).collect();
            format!("[{}]", inner.join(","))
        }
        Value::Number(number) => match number.as_f64() {
            Some(float) if number.is_f64() && float.fract() == 0.0 => format!("{float:.0}"),
            _ => number.to_string(),
        },
        other => other.to_string(),
    }
}

#[test]
fn the_natural_rfc_8785_guess_does_not_give_the_hash() {
    // The Event without `hash`, canonicalised as RFC 8785 would, hashed alone or after
    // prevHash: the README says where each step differs. Every vector Event shows it.
    for case in &vector().events {
        let mut value: serde_json::Value = serde_json::from_str(&case.served).expect("json");
        let prev_hash: EventHash = value["prevHash"]
            .as_str()
            .expect("prevHash")
            .parse()
            .expect("blake3:<hex>");
        value.as_object_mut().expect("object").remove("hash");
        let guess = rfc_8785_guess(&value);
        assert_ne!(hex::encode(&guess), case.canonical_hex, "{}", case.name);
        let alone = blake3::hash(guess.as_bytes());
        let mut chained = blake3::Hasher::new();
        chained.update(&prev_hash.0);
        chained.update(guess.as_bytes());
        for wrong in [alone, chained.finalize()] {
            assert_ne!(
                format!("blake3:{}", wrong.to_hex()),
                case.hash,
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn the_readme_rules_alone_recompute_the_vector_in_python() {
    let python = std::env::var("WEFT_PYTHON").unwrap_or_else(|_| "python3".to_owned());
    let root = repository();
    let output = std::process::Command::new(&python)
        .arg(root.join("tests/python/event_hash.py"))
        .arg(root.join("fixtures/event_hash.json"))
        .arg(root.join("fixtures/vectors/blake3/test_vectors.json"))
        .output()
        .unwrap_or_else(|e| panic!("{python} runs: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.starts_with("ok: "),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
