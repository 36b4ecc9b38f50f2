//! How many SQL statements the writer runs for a publication under a lease and for a
//! `work.checkpoint` (issue #41: one load per row per transaction), counted by the store's
//! write meter (`Store::start_metering_writes`), not by wall time. The figures are printed
//! (`cargo test -p weft --lib statements -- --nocapture`) and held under a ceiling that may
//! only come down.

use super::harness::*;
use super::progress::{MISSION, checkpoint, ok_quoting, owned, setup, start};
use super::work_setup::contract;

/// The most writer statements a publication under a lease and a checkpoint ran on either
/// backend at stop 40 (the memory backend's publication also reads through the writer); a
/// ratchet: lower them as the unit of work loads each row once, never raise them.
const PUBLICATION_CEILING: u64 = 37;
const CHECKPOINT_CEILING: u64 = 23;

backends!(
    /// A publication under the owner's Execution Lease and then its `work.checkpoint`: the
    /// statements each runs in the writer.
    async fn statements_per_write(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        let lease = start(&h, &worker, "wi-1").await;
        let bytes = b"a result";
        let digests = h.upload(&worker, bytes).await;
        let mut manifest = manifest(&worker, "g1", digests, &[]);
        manifest.mission_id = weft_api::Id::parse("m", MISSION).expect("id");
        manifest.work_item_id = weft_api::Id::parse("w", "wi-1").expect("id");
        manifest.execution.lease_id = weft_api::Id::parse("l", &lease).expect("id");
        let envelope = sign(&worker.key, &manifest);

        h.store.start_metering_writes();
        let answer = h.publish(&worker, &envelope).await;
        let publication = h.store.stop_metering_writes();
        assert_eq!(answer.status, axum::http::StatusCode::CREATED, "{answer:?}");

        h.store.start_metering_writes();
        ok_quoting(&h, &worker, "work.checkpoint", checkpoint("wi-1"), &lease).await;
        let checkpointed = h.store.stop_metering_writes();

        println!("{kind:?}: publication under a lease {publication:?}");
        println!("{kind:?}: work.checkpoint {checkpointed:?}");
        assert!(
            publication.statements > 0 && checkpointed.statements > 0,
            "the meter counts"
        );
        assert!(
            publication.statements <= PUBLICATION_CEILING,
            "{kind:?}: a publication ran {} statements",
            publication.statements
        );
        assert!(
            checkpointed.statements <= CHECKPOINT_CEILING,
            "{kind:?}: a checkpoint ran {} statements",
            checkpointed.statements
        );
    }
);
