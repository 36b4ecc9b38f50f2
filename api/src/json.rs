//! Strict JSON for everything that is signed or stored.
//!
//! serde_json alone silently keeps the last of two duplicate keys inside maps, which would let
//! a signed payload say two things at once. [`parse_strict`] first walks the document and
//! refuses any object with a repeated key (at every depth), then deserialises into the typed
//! struct, whose `deny_unknown_fields` refuses anything unexpected. serde_json itself refuses
//! trailing garbage, lone surrogates and nesting deeper than 128 levels.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::error::{ErrorCode, Rejection};

/// Parses `bytes` into `T`, refusing duplicate keys anywhere. Errors carry `code` and name
/// the problem (and, from serde, the field).
pub fn parse_strict<T: DeserializeOwned>(bytes: &[u8], code: ErrorCode) -> Result<T, Rejection> {
    serde_json::from_slice::<NoDuplicateKeys>(bytes)
        .map_err(|e| Rejection::new(code, format!("malformed JSON: {e}")))?;
    serde_json::from_slice::<T>(bytes).map_err(|e| Rejection::new(code, e.to_string()))
}

/// Accepts any JSON value and fails on an object with a repeated key.
struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NoDuplicateKeysVisitor)
    }
}

struct NoDuplicateKeysVisitor;

impl<'de> Visitor<'de> for NoDuplicateKeysVisitor {
    type Value = NoDuplicateKeys;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(NoDuplicateKeys)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("duplicate key `{key}`")));
            }
            map.next_value::<NoDuplicateKeys>()?;
        }
        Ok(NoDuplicateKeys)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)] // fields exist to be parsed, not read
    struct Sample {
        name: String,
        tags: BTreeMap<String, String>,
    }

    fn check(input: &str, accepted: bool) {
        let outcome = parse_strict::<Sample>(input.as_bytes(), ErrorCode::InvalidJson);
        assert_eq!(outcome.is_ok(), accepted, "{input}: {outcome:?}");
    }

    #[test]
    fn refuses_duplicates_garbage_surrogates_and_depth_bombs() {
        check(r#"{"name":"a","tags":{}}"#, true);
        check(r#"{"name":"a","name":"b","tags":{}}"#, false);
        check(r#"{"name":"a","tags":{"k":"1","k":"2"}}"#, false);
        check(r#"{"name":"a","tags":{},"extra":1}"#, false);
        check(r#"{"name":"a","tags":{}} x"#, false);
        check(r#"{"name":"a","tags":{}}{}"#, false);
        check(r#"{"name":"\ud800","tags":{}}"#, false);
        let bomb = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        check(&bomb, false);
        let object_bomb = format!(
            r#"{{"name":"a","tags":{{}},"x":{}1{}}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        check(&object_bomb, false);
    }
}
