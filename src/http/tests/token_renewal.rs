//! LSE-6/7 with a renewed lease: a token lives to its own end or its lease's, whichever comes
//! first, however often the lease is renewed. Before, a token was clamped for good to the
//! expiry its lease had when it was issued, so every run longer than one lease period lost
//! its token (the Worker renews the lease, not the token).

use axum::http::StatusCode;
use serde_json::json;

use super::harness::*;
use super::tokens::{issue, lease_id, secret, setup, upload_request};
use super::work_setup::{command_doc, command_request};

backends!(
    async fn a_token_lives_on_while_its_lease_is_renewed(kind: Kind) {
        let h = harness(kind).await;
        let (_coordinator, w1, _w2, lease) = setup(&h).await;
        // Asked for an hour: the answer names the lease's end as it stands (300 s).
        let token = issue(&h, &w1, lease_id(&lease), &["blob:write"], 3600).await;
        assert_eq!(token["expiresAt"], lease["expiresAt"], "{token} vs {lease}");
        h.clock.advance(chrono::Duration::seconds(200));
        let mut renew =
            command_doc(&h, &w1, "g1", "lease.renew", json!({"workItemId": "wi-1"})).await;
        renew["leaseId"] = lease["leaseId"].clone();
        let renewed = h.send(command_request(&w1, "g1", &renew)).await;
        assert_eq!(renewed.status, StatusCode::CREATED, "{renewed:?}");
        // Past the lease's first end, inside its renewed one: the token acts.
        h.clock.advance(chrono::Duration::seconds(150));
        let uploaded = h
            .send(upload_request(
                secret(&token),
                b"after the first lease period",
            ))
            .await;
        assert_eq!(uploaded.status, StatusCode::CREATED, "{uploaded:?}");
        // Past the renewed end: dead with its lease (LSE-7), its own hour notwithstanding.
        h.clock.advance(chrono::Duration::seconds(200));
        let refused = h
            .send(upload_request(secret(&token), b"past the renewed lease"))
            .await;
        assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{refused:?}");
    }
);
