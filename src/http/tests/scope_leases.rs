//! Issue #40 with CTX-5: a Mission-scoped member asking for another Mission's lease is
//! answered exactly as for a lease that does not exist (no existence oracle by status).

use axum::http::Method;
use serde_json::json;

use super::harness::{Kind, backends, json_request, refused};
use super::scope::{World, world};

backends!(
    /// Issue #40, CTX-5: the tokens route of another Mission's lease answers `not_found`, the
    /// same body as an unknown lease's but for the id, and changes nothing.
    async fn another_missions_lease_answers_as_an_unknown_one(kind: Kind) {
        let World {
            h,
            producer,
            scoped,
            ..
        } = world(kind).await;
        let execution = h
            .execution_of(&producer, "work-2")
            .await
            .expect("the producer holds work-2's lease");
        let hidden = execution["leaseId"]
            .as_str()
            .expect("a lease id")
            .to_owned();
        let mut details = Vec::new();
        for lease in [hidden.as_str(), "lse-no-such-lease"] {
            let answer = refused(
                &h,
                json_request(
                    Method::POST,
                    &format!("/v1/leases/{lease}/tokens"),
                    &scoped.token,
                    json!({"scope": ["blob:write"], "ttlSeconds": 5}),
                    &[],
                ),
                "not_found",
            )
            .await;
            details.push(
                answer.json()["detail"]
                    .as_str()
                    .unwrap_or_default()
                    .replace(lease, "L"),
            );
        }
        assert_eq!(details[0], details[1]);
    }
);
