//! A capability token revoked while a write under it is on its way (LSE-7: revocation takes
//! effect at once): the write checks the token again first in its own transaction, so one
//! let in at the door before the revocation commits nothing after it. The hold between the
//! checks before the writer and the transaction is `Faults::publications`.

use axum::body::Body;
use axum::http::{Method, StatusCode};

use super::harness::*;
use super::tokens::{
    evidence_as, issue, lease_id, manifest_for, publish_as, secret, setup, upload_request,
};

/// Once a write waits at the hold, `owner` revokes token `token_id` of `lease`; then the hold
/// is released. Answers every table's fingerprint as the revocation left it.
async fn revoke_while_held(
    h: &Harness,
    owner: &Agent,
    lease: &str,
    token_id: &str,
) -> weft_storage::Fingerprint {
    h.faults.publications().waiting(1).await;
    let revoke = request(
        Method::DELETE,
        &format!("/v1/leases/{lease}/tokens/{token_id}"),
        Some(&owner.token),
        Body::empty(),
    );
    let revoked = h.send(revoke).await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT, "{revoked:?}");
    let before = h.fingerprint().await;
    h.faults.publications().set(false);
    before
}

backends!(
    /// A publication under a token waits after its checks before the writer while the owner
    /// revokes the token: it is refused `unauthorized` and changes nothing. The token was
    /// checked only before the transaction, and the manifest was published after the
    /// revocation had answered.
    async fn a_token_revoked_while_its_publication_waits_publishes_nothing(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, _, lease) = setup(&h).await;
        let lease = lease_id(&lease).to_owned();
        let issued = issue(&h, &w1, &lease, &["blob:write", "artifact:publish"], 60).await;
        let bytes = b"published while its token is revoked";
        let uploaded = h.send(upload_request(secret(&issued), bytes)).await;
        assert_eq!(uploaded.status, StatusCode::CREATED, "{uploaded:?}");
        let envelope = manifest_for(&w1, bytes, "wi-1", &lease);
        let token_id = issued["tokenId"].as_str().expect("id").to_owned();
        h.faults.publications().set(true);
        let revoke_meanwhile = revoke_while_held(&h, &w1, &lease, &token_id);
        let (published, before) = tokio::join!(
            h.send(publish_as(secret(&issued), &envelope)),
            revoke_meanwhile
        );
        assert_eq!(published.status, StatusCode::UNAUTHORIZED, "{published:?}");
        assert_eq!(published.json()["code"], "unauthorized", "{published:?}");
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "a publication under a revoked token",
        );
    }
);

backends!(
    /// As for a publication: an Evidence record under a token waits after its checks before
    /// the writer while the owner revokes the token, and is refused `unauthorized` with
    /// nothing changed.
    async fn a_token_revoked_while_its_evidence_waits_records_nothing(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, _, lease) = setup(&h).await;
        let lease = lease_id(&lease).to_owned();
        let issued = issue(&h, &w1, &lease, &["evidence:record"], 60).await;
        let token_id = issued["tokenId"].as_str().expect("id").to_owned();
        let execution = h.execution_of(&w1, "wi-1").await;
        h.faults.publications().set(true);
        let revoke_meanwhile = revoke_while_held(&h, &w1, &lease, &token_id);
        let (recorded, before) = tokio::join!(
            h.send(evidence_as(secret(&issued), &w1, "wi-1", execution)),
            revoke_meanwhile
        );
        assert_eq!(recorded.status, StatusCode::UNAUTHORIZED, "{recorded:?}");
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "Evidence under a revoked token",
        );
    }
);
