//! Publication (ART-2, ART-3, ART-4, ART-6): signatures and signers, malformed manifests,
//! checks against the stored blob and the provenance graph, the published Event, listing.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use weft_api::dsse::{BASE64, MANIFEST_TYPE, SESSION_TYPE};
use weft_api::{Envelope, Id};

use super::harness::*;

backends!(
    async fn bad_signatures_and_wrong_signers_are_refused(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let colleague = h.agent("w2", "g1", &["worker"]).await;
        let outsider = h.agent("w3", "g2", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let digests = h.upload(&worker, b"payload").await;
        h.upload(&outsider, b"payload").await;
        h.upload(&reviewer, b"payload").await;
        let good = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
        let cases: Vec<(&str, &Agent, Envelope)> = vec![
            (
                "bad_signature",
                &worker,
                with_sig(&good, |s| s[..63].to_vec()),
            ),
            (
                "bad_signature",
                &worker,
                with_sig(&good, |s| [s, vec![0]].concat()),
            ),
            ("bad_signature", &worker, with_sig(&good, s_plus_l)),
            (
                "bad_signature",
                &worker,
                with_sig(&good, |mut s| {
                    s[5] ^= 1;
                    s
                }),
            ),
            (
                "unknown_key",
                &worker,
                sign(
                    &SigningKey::from_bytes(&[8u8; 32]),
                    &manifest(&worker, "g1", digests, &[]),
                ),
            ),
            // Signed by a registered key that is not the producer's.
            (
                "producer_mismatch",
                &colleague,
                sign(&colleague.key, &manifest(&worker, "g1", digests, &[])),
            ),
            // Someone else's envelope, published by a caller who did not sign it.
            ("producer_mismatch", &colleague, good.clone()),
            // The producer is a member of another Group only.
            (
                "not_a_member",
                &outsider,
                sign(&outsider.key, &manifest(&outsider, "g1", digests, &[])),
            ),
            // A member without the worker role.
            (
                "forbidden",
                &reviewer,
                sign(&reviewer.key, &manifest(&reviewer, "g1", digests, &[])),
            ),
        ];
        for (code, caller, envelope) in cases {
            refused(&h, publish_request(caller, &envelope), code).await;
        }
        // The manifest replayed as a session request (payloadType swapped): PAE binds the type.
        let mut replayed = good.clone();
        replayed.payload_type = SESSION_TYPE.into();
        refused(
            &h,
            publish_request(&worker, &replayed),
            "wrong_payload_type",
        )
        .await;
        let as_session = request(
            Method::POST,
            "/v1/sessions",
            None,
            serde_json::to_vec(&replayed).expect("json"),
        );
        refused(&h, as_session, "bad_signature").await;
        // Two signatures, or none.
        let mut doubled = good.clone();
        doubled.signatures.push(doubled.signatures[0].clone());
        refused(&h, publish_request(&worker, &doubled), "bad_signature").await;
        assert_eq!(h.publish(&worker, &good).await.status, StatusCode::CREATED);
    }
);

backends!(
    async fn malformed_manifest_json_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let digests = h.upload(&worker, b"payload").await;
        let good: Value =
            serde_json::to_value(manifest(&worker, "g1", digests, &[])).expect("json");
        let good_text = good.to_string();
        let inner = &good_text[1..good_text.len() - 1];
        let payloads = [
            format!("{{{inner},\"groupId\":\"g1\"}}"), // duplicate key
            format!("{{{inner},\"extra\":1}}"),        // unknown field
            format!("{good_text} trailing"),           // trailing garbage
            good_text.replace("\"work-1\"", "\"\\ud800\""), // lone surrogate
            format!(
                "{{{inner},\"annotations\":{}1{}}}",
                "[".repeat(4000),
                "]".repeat(4000)
            ), // depth bomb
            good_text.replace("\"schema\":null,", ""), // missing ART-3 field
            "not json at all".to_owned(),
        ];
        for payload in &payloads {
            let envelope = Envelope::sign(&worker.key, MANIFEST_TYPE, payload.as_bytes());
            let answer = refused(&h, publish_request(&worker, &envelope), "invalid_manifest").await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        }
        // The same defects in the envelope itself.
        let envelope =
            serde_json::to_string(&sign(&worker.key, &manifest(&worker, "g1", digests, &[])))
                .expect("json");
        let body = &envelope[1..envelope.len() - 1];
        for text in [
            format!("{{{body},\"payloadType\":\"x\"}}"),
            format!("{envelope}]"),
            format!("{}{envelope}{}", "[".repeat(5000), "]".repeat(5000)),
            envelope.replace("\"payloadType\"", "\"payloadType\\ud800\""),
        ] {
            let post = request(Method::POST, "/v1/artifacts", Some(&worker.token), text);
            refused(&h, post, "invalid_json").await;
        }
        let plain_text = Request::builder()
            .method(Method::POST)
            .uri("/v1/artifacts")
            .header("authorization", format!("Bearer {}", worker.token))
            .header("content-type", "text/plain")
            .body(Body::from(envelope.clone()))
            .expect("request");
        let answer = refused(&h, plain_text, "unsupported_media_type").await;
        assert_eq!(answer.status, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
);

backends!(
    /// ART-3 (the manifest's digests and size must be the stored bytes'), ART-4 (sources form an
    /// acyclic provenance graph with no dangling edge).
    async fn publication_checks_the_blob_sources_and_cycles(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let outsider = h.agent("w3", "g2", &["worker"]).await;
        let a = h.put(&worker, "g1", b"artifact A", &[]).await;
        let b = h.put(&worker, "g1", b"artifact B", &[a]).await;
        let hidden = h.put(&outsider, "g2", b"in another group", &[]).await;
        h.upload(&outsider, b"outsider only").await;
        // ART-4 / DESIGN §6: a second manifest for A's bytes citing B would close a cycle.
        let digests_a = digest_of(b"artifact A");
        let cycle = sign(&worker.key, &manifest(&worker, "g1", digests_a, &[b]));
        refused(&h, publish_request(&worker, &cycle), "cycle").await;
        let missing_source = digest_of(b"never published").blake3;
        let unknown = sign(
            &worker.key,
            &manifest(&worker, "g1", digests_a, &[missing_source]),
        );
        refused(&h, publish_request(&worker, &unknown), "unknown_source").await;
        let unreadable = sign(&worker.key, &manifest(&worker, "g1", digests_a, &[hidden]));
        refused(&h, publish_request(&worker, &unreadable), "unknown_source").await;
        // Bytes that were never uploaded, or were uploaded only by someone else.
        let never = sign(
            &worker.key,
            &manifest(&worker, "g1", digest_of(b"not uploaded"), &[]),
        );
        refused(&h, publish_request(&worker, &never), "blob_not_found").await;
        let theirs = sign(
            &worker.key,
            &manifest(&worker, "g1", digest_of(b"outsider only"), &[]),
        );
        refused(&h, publish_request(&worker, &theirs), "blob_not_found").await;
        // Digests or size that disagree with the stored bytes.
        let mut wrong_size = digest_of(b"artifact A");
        wrong_size.size += 1;
        let lying = sign(&worker.key, &manifest(&worker, "g1", wrong_size, &[]));
        refused(&h, publish_request(&worker, &lying), "digest_mismatch").await;
        let mut wrong_sha = digest_of(b"artifact A");
        wrong_sha.sha256 = digest_of(b"artifact B").sha256;
        let lying = sign(&worker.key, &manifest(&worker, "g1", wrong_sha, &[]));
        refused(&h, publish_request(&worker, &lying), "digest_mismatch").await;
        // A session acts in its own Group only: elsewhere, existing or not, it is not a member.
        let mut unknown_group = manifest(&worker, "g1", digests_a, &[]);
        unknown_group.group_id = Id::parse("g", "nowhere").expect("id");
        refused(
            &h,
            publish_request(&worker, &sign(&worker.key, &unknown_group)),
            // Another Group, existing or not, answers as to a non-member (no existence oracle).
            "not_a_member",
        )
        .await;
        let mut self_source = manifest(&worker, "g1", digests_a, &[]);
        self_source.sources = vec![a];
        refused(
            &h,
            publish_request(&worker, &sign(&worker.key, &self_source)),
            "cycle",
        )
        .await;
        let mut wrong_card = manifest(&worker, "g1", digests_a, &[]);
        wrong_card.producer.agent_card_version = "2".into();
        refused(
            &h,
            publish_request(&worker, &sign(&worker.key, &wrong_card)),
            "producer_mismatch",
        )
        .await;
        // The key was just looked up (and is kept in memory, `storage/src/keys.rs`); a new
        // card version registered now is what the next signature is checked against.
        let answer = h
            .admin_json(
                Method::POST,
                "/v1/admin/agents",
                json!({"agentId": "w1", "publicKey": BASE64.encode(worker.key.verifying_key().as_bytes()), "agentCardVersion": "2"}),
            )
            .await;
        assert!(answer.status.is_success(), "{answer:?}");
        refused(
            &h,
            publish_request(
                &worker,
                &sign(&worker.key, &manifest(&worker, "g1", digests_a, &[])),
            ),
            "producer_mismatch",
        )
        .await;
        let answer = h.publish(&worker, &sign(&worker.key, &wrong_card)).await;
        assert!(answer.status.is_success(), "{answer:?}");
    }
);

backends!(
    /// ART-2 (bytes stay out of the log), LSE-4 (the published Event carries the lease),
    /// DLV-7 (reading the log never trims it).
    async fn publishing_appends_a_hash_chained_event_and_is_idempotent(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let digests = h.upload(&worker, b"bytes").await;
        let envelope = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
        let first = h.publish(&worker, &envelope).await;
        assert_eq!(first.status, StatusCode::CREATED);
        let again = h.publish(&worker, &envelope).await;
        assert_eq!(again.status, StatusCode::OK);
        assert_eq!(first.json(), again.json());
        let answer = h
            .call(
                Method::GET,
                "/v1/groups/g1/events",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        let page: weft_api::views::EventPage =
            serde_json::from_slice(&answer.body).expect("events");
        let kinds: Vec<&str> = page
            .events
            .iter()
            .map(|e| {
                e.event()
                    .expect("a whole-Group member sees every Event")
                    .kind
                    .as_str()
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "group.created",
                "membership.set",
                "session.opened",
                // The harness's coordinator makes the WorkItem the manifest names (issue #11).
                "membership.set",
                "session.opened",
                "mission.created",
                "work.authorized",
                // ... and gives the worker its Execution Lease (issue #12, LSE-4).
                "work.offered",
                "work.offer_accepted",
                "work.started",
                "artifact.published"
            ]
        );
        weft_api::event::verify_chain(0, weft_api::EventHash::GENESIS, &page.events)
            .expect("chain verifies");
        assert_eq!(first.json()["sequence"], json!(11));
        // ART-2: the log carries digests, never the bytes.
        assert!(!String::from_utf8_lossy(&answer.body).contains("Ynl0ZXM="));
        // LSE-4: the publication references the execution lease it was made under.
        let published = serde_json::to_value(&page.events[10].event().expect("whole").payload)
            .expect("payload");
        let work_item = h.get_json(&worker, "/v1/workitems/work-1").await;
        assert_eq!(
            (
                published["leaseId"].as_str(),
                published["ownershipEpoch"].as_u64()
            ),
            (work_item["lease"]["leaseId"].as_str(), Some(1))
        );
        // DLV-7: replaying (the only consumer so far) leaves the whole history in place.
        let again = h
            .call(
                Method::GET,
                "/v1/groups/g1/events",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(again.body, answer.body);
        for bad in ["after=-1", "after=abc", "after=1&limit=x", "bogus=1"] {
            let get = request(
                Method::GET,
                &format!("/v1/groups/g1/events?{bad}"),
                Some(&worker.token),
                Body::empty(),
            );
            refused(&h, get, "bad_request").await;
        }
    }
);

backends!(
    async fn listing_filters_and_pages(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        for n in 0..5 {
            h.put(&worker, "g1", format!("item {n}").as_bytes(), &[])
                .await;
        }
        let page = h
            .call(
                Method::GET,
                "/v1/artifacts?missionId=mission-1&limit=2",
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(page["items"].as_array().map(Vec::len), Some(2));
        let next = page["next"].as_u64().expect("more pages");
        let rest = h
            .call(
                Method::GET,
                &format!("/v1/artifacts?after={next}&limit=10"),
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(rest["items"].as_array().map(Vec::len), Some(3));
        assert!(rest.get("next").is_none());
        let none = h
            .call(
                Method::GET,
                "/v1/artifacts?missionId=other",
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(none["items"], json!([]));
        let get = request(
            Method::GET,
            "/v1/artifacts?missionId=..",
            Some(&worker.token),
            Body::empty(),
        );
        refused(&h, get, "invalid_id").await;
    }
);

backends!(
    /// ART-6: a retrieval URI is a location, never an identity. A manifest whose URI points at
    /// other bytes changes nothing about what its digest names.
    async fn retrieval_uris_are_never_identities(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let other = h.put(&worker, "g1", b"the other artifact", &[]).await;
        let digests = h.upload(&worker, b"this artifact").await;
        let mut misleading = manifest(&worker, "g1", digests, &[]);
        misleading.retrieval_uri = format!("https://weft.example/v1/artifacts/{other}/content");
        assert_eq!(
            h.publish(&worker, &sign(&worker.key, &misleading))
                .await
                .status,
            StatusCode::CREATED
        );
        let answer = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{}/content", digests.blake3),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.body.as_ref(), b"this artifact", "{kind:?}");
    }
);

backends!(
    /// Issue #10 finding 5 (DESIGN §6, CTX-5): an Agent that is a member of two Groups cannot,
    /// from its g1 session, publish a manifest citing a source only g2 may read. So nothing
    /// g1 can read (its `artifact.published` Events, the manifest view, the in-toto export)
    /// ever names a source hidden from g1.
    async fn a_publication_never_names_a_source_its_group_cannot_read(kind: Kind) {
        let h = harness(kind).await;
        let reader = h.agent("r1", "g1", &["reviewer"]).await;
        let bridge = h.agent("bridge", "g2", &["worker"]).await;
        let answer = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/members/bridge",
                json!({"roles": ["worker"]}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let in_g1 = Agent {
            id: bridge.id.clone(),
            key: bridge.key.clone(),
            token: h.session(&bridge.key, "bridge", "g1").await,
        };
        let hidden = h.put(&bridge, "g2", b"secret source", &[]).await;
        let visible = h.put(&in_g1, "g1", b"public source", &[]).await;
        let digests = h.upload(&in_g1, b"public child").await;
        let citing = sign(
            &in_g1.key,
            &manifest(&in_g1, "g1", digests, &[visible, hidden]),
        );
        refused(&h, publish_request(&in_g1, &citing), "unknown_source").await;
        let honest = sign(&in_g1.key, &manifest(&in_g1, "g1", digests, &[visible]));
        assert_eq!(h.publish(&in_g1, &honest).await.status, StatusCode::CREATED);
        let child = digests.blake3;
        for uri in [
            "/v1/groups/g1/events".to_owned(),
            format!("/v1/artifacts/{child}"),
            format!("/v1/artifacts/{child}/provenance?format=intoto"),
        ] {
            let answer = h
                .call(Method::GET, &uri, Some(&reader.token), Body::empty())
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{uri}: {answer:?}");
            let text = String::from_utf8_lossy(&answer.body);
            let payload = serde_json::from_slice::<weft_api::Envelope>(&answer.body)
                .ok()
                .and_then(|envelope| {
                    base64::Engine::decode(&weft_api::dsse::BASE64, &envelope.payload).ok()
                })
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .unwrap_or_default();
            assert!(
                !text.contains(&hidden.hex()) && !payload.contains(&hidden.hex()),
                "{uri} names the hidden source"
            );
        }
    }
);
