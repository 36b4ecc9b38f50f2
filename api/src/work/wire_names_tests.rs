//! Pins that every [`CommandType`] and every [`WorkEventKind`] agrees across the places it is
//! named: its variant, `ALL`, `as_str`, `parse` and its serde name (the wire name Commands are
//! sent with and Events are hashed with; `fixtures/event_hash.json` pins the hashes). A new
//! variant missing from `ALL` fails here: serde lists every variant's name, `ALL` must list
//! the same set.

use std::collections::BTreeSet;

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::command::CommandType;
use super::events::WorkEventKind;

/// The serde names of every variant of `T`, read from serde's own refusal of an unknown
/// variant ("unknown variant `…`, expected one of `a`, `b`, …"): the derive lists them all,
/// whatever `ALL` says.
fn serde_names<T: DeserializeOwned + std::fmt::Debug>() -> BTreeSet<String> {
    let refusal = serde_json::from_str::<T>("\"no such variant\"")
        .expect_err("an unknown name is refused")
        .to_string();
    let (_, expected) = refusal
        .split_once("expected")
        .unwrap_or_else(|| panic!("serde names the expected variants: {refusal}"));
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// One type's names agree: every entry of `all` is distinct, its `as_str` is its serde name
/// and parses back to it, and `all` names exactly the variants serde knows.
fn agree<T>(all: &[T], as_str: fn(T) -> &'static str, parse: fn(&str) -> Option<T>)
where
    T: Copy + Ord + std::fmt::Debug + Serialize + DeserializeOwned,
{
    let distinct: BTreeSet<T> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len(), "ALL names a variant twice");
    for &kind in all {
        let name = as_str(kind);
        assert_eq!(
            serde_json::to_value(kind).expect("serialises"),
            serde_json::Value::String(name.to_owned()),
            "{kind:?}: as_str and the serde name differ"
        );
        let back: T = serde_json::from_value(serde_json::Value::String(name.to_owned()))
            .unwrap_or_else(|e| panic!("{kind:?}: {name} does not deserialise: {e}"));
        assert_eq!(back, kind, "{name} deserialises to another variant");
        assert_eq!(parse(name), Some(kind), "{name} parses to another variant");
    }
    let listed: BTreeSet<String> = all.iter().map(|k| as_str(*k).to_owned()).collect();
    assert_eq!(
        listed,
        serde_names::<T>(),
        "ALL and the enum's variants differ"
    );
}

#[test]
fn every_command_type_agrees_across_its_names() {
    agree(&CommandType::ALL, CommandType::as_str, CommandType::parse);
    assert_eq!(CommandType::parse("work.nothing"), None);
}

#[test]
fn every_work_event_kind_agrees_across_its_names() {
    agree(
        &WorkEventKind::ALL,
        WorkEventKind::as_str,
        WorkEventKind::parse,
    );
    assert_eq!(WorkEventKind::parse("work.nothing"), None);
}
