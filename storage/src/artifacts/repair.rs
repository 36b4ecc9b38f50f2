//! The repair of a quarantined blob by verified bytes (`upload.rs`): every Group that got its
//! `artifact.integrity_failure` hears of the repair. Such an upload holds every one of those
//! Groups' locks, taken in Group order (`Db::write_in_or_in_order`), before it appends.

use crate::error::Error;

/// Appends `artifact.repaired` to `groups`, every Group that published `blake3` (the Groups
/// that got its `artifact.integrity_failure`), as read just before their locks were taken: a
/// second read could name a Group whose lock this transaction does not hold. A Group that
/// publishes the blob in between is not told; none can: a quarantined blob is published only
/// with its bytes, and that publication is itself a repair, which waits for these locks.
pub(super) fn append_repaired(
    txn: &crate::unit::Tx<'_>,
    blake3: weft_api::ArtifactId,
    now: chrono::DateTime<chrono::Utc>,
    groups: &[String],
) -> Result<(), Error> {
    for group in groups {
        let group = weft_api::Id::parse("groupId", group)?;
        let repaired = weft_api::kinds::ArtifactRepaired { artifact: blake3 };
        crate::events::append(
            txn,
            &group,
            &weft_api::kinds::EventPayload::ArtifactRepaired(repaired),
            now,
        )?;
    }
    Ok(())
}
