//! Idempotency keys (DLV-11, DLV-12).
//!
//! External tool operations MUST use a stable key derived from the Mission ID, WorkItem ID,
//! ownership epoch and logical operation ID (DLV-11). The same four values always give the
//! same key, on any machine; any change in one of them gives another key. Network delivery
//! alone cannot make an external side effect happen exactly once (DLV-12): the key is what the
//! receiving system deduplicates on.

use crate::id::Id;

/// `mwp1:` + hex of BLAKE3 over the four values, each length-prefixed so that no two tuples
/// share an encoding.
pub fn operation_key(
    mission_id: &Id,
    work_item_id: &Id,
    ownership_epoch: u64,
    logical_operation_id: &str,
) -> String {
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"mwp.idempotency.v1");
    for part in [
        mission_id.as_str().as_bytes(),
        work_item_id.as_str().as_bytes(),
        &ownership_epoch.to_be_bytes(),
        logical_operation_id.as_bytes(),
    ] {
        hasher.update(&(part.len() as u64).to_be_bytes());
        hasher.update(part);
    }
    format!("mwp1:{}", hasher.finalize().to_hex())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Id {
        Id::parse("id", text).expect("valid id")
    }

    /// DLV-11: stable, and different when any of the four inputs differs.
    #[test]
    fn the_key_is_stable_and_separates_every_input() {
        let base = operation_key(&id("m1"), &id("w1"), 2, "send-invoice");
        assert_eq!(base, operation_key(&id("m1"), &id("w1"), 2, "send-invoice"));
        assert!(base.starts_with("mwp1:") && base.len() == 5 + 64);
        for other in [
            operation_key(&id("m2"), &id("w1"), 2, "send-invoice"),
            operation_key(&id("m1"), &id("w2"), 2, "send-invoice"),
            operation_key(&id("m1"), &id("w1"), 3, "send-invoice"),
            operation_key(&id("m1"), &id("w1"), 2, "send-invoice-2"),
            // Shifting characters between fields must not collide.
            operation_key(&id("m1w"), &id("1"), 2, "send-invoice"),
        ] {
            assert_ne!(base, other);
        }
    }
}
