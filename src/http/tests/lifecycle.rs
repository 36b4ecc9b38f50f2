//! Issue #46, DESIGN §16: the lifecycle of what is stored. A retention policy lets a blob's
//! bytes go only after its Mission ended and the policy's duration (plus the clock margin)
//! passed; the manifest stays, an `artifact.disposed` Event names the policy, and a content
//! read answers 410 naming that Event. Holds keep what they hold and its lineage; an upload
//! during collection keeps its bytes; a quota refuses uploads past it (507); a collection
//! stopped between its commit and its file deletions is finished by the next one. Only the
//! operator may do any of it. Long because each case runs a Mission to its end and past its
//! policy on every backend.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::*;
use super::work::ok;

/// Ends the harness's Mission `mission` of `group` (cancelled, its WorkItems with it).
pub(super) async fn end_mission(h: &Harness, group: &str, mission: &str) {
    let coordinator = h.harness_coordinator(group).await;
    ok(
        h,
        &coordinator,
        group,
        "mission.cancel",
        json!({"missionId": mission}),
    )
    .await;
}

/// `POST /v1/admin/gc`, answered 200; its report.
pub(super) async fn gc(h: &Harness, dry_run: bool) -> Value {
    let answer = h
        .call(
            Method::POST,
            &format!("/v1/admin/gc?dryRun={dry_run}"),
            Some(ADMIN),
            Body::empty(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}: {answer:?}", h.kind);
    answer.json()
}

/// The artifacts a gc report names.
pub(super) fn disposed(report: &Value) -> Vec<String> {
    report["disposed"]
        .as_array()
        .expect("disposed")
        .iter()
        .map(|d| d["artifact"].as_str().expect("artifact").to_owned())
        .collect()
}

pub(super) async fn set_retention(
    h: &Harness,
    group: &str,
    body: Value,
) -> crate::http::tests::harness::Answer {
    h.admin_json(
        Method::PUT,
        &format!("/v1/admin/groups/{group}/retention"),
        body,
    )
    .await
}

/// `DELETE /v1/admin/holds/{hold_id}` as the operator; its answer.
pub(super) async fn lift_hold(h: &Harness, hold_id: &str) -> crate::http::tests::harness::Answer {
    h.call(
        Method::DELETE,
        &format!("/v1/admin/holds/{hold_id}"),
        Some(ADMIN),
        Body::empty(),
    )
    .await
}

/// `agent` with a fresh session in g1 (the clock moved past its old one).
async fn renewed(h: &Harness, agent: Agent) -> Agent {
    renewed_in(h, agent, "g1").await
}

/// `agent` with a fresh session in `group` (the clock moved past its old one).
pub(super) async fn renewed_in(h: &Harness, agent: Agent, group: &str) -> Agent {
    Agent {
        token: h.session(&agent.key, agent.id.as_str(), group).await,
        ..agent
    }
}

/// g1 keeps bytes a day after a Mission ends; the harness's `mission-1` ends and the clock
/// moves `days_on` days: what it published is due.
pub(super) async fn past_keep_bytes(h: &Harness, days_on: i64) {
    let set = set_retention(h, "g1", json!({"keepBytes": "1d"})).await;
    assert_eq!(set.status, StatusCode::OK, "{set:?}");
    end_mission(h, "g1", "mission-1").await;
    h.clock.advance(days(days_on));
}

fn days(n: i64) -> chrono::Duration {
    chrono::Duration::days(n)
}

backends!(
    /// A Group's `keepBytes` counts from the Mission's end: before it, and within the clock
    /// margin after it, nothing goes (clock skew never deletes early); then the bytes go, a
    /// dry run first changing nothing. The manifest stays (the artifact view, lineage), the
    /// `artifact.disposed` Event names the policy, a content read answers 410 `disposed` with
    /// that Event's sequence, fsck is clean, and uploading the bytes again brings them back.
    async fn keep_bytes_disposes_after_the_mission_ends(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let auditor = h.agent("aud", "g1", &["auditor"]).await;
        let bytes = vec![7u8; 40_000];
        let artifact = h.put(&worker, "g1", &bytes, &[]).await;
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d", "keepRecords": "30d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        assert_eq!(set.json()["keepBytes"], "1d");
        let shown = h
            .call(
                Method::GET,
                "/v1/admin/groups/g1/retention",
                Some(ADMIN),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(shown["policies"][0]["keepRecords"], "30d", "{shown}");
        assert_eq!(h.events_of(&auditor, "retention.set").await.len(), 1);
        // A live Mission keeps everything, however old.
        h.clock.advance(days(10));
        assert!(disposed(&gc(&h, false).await).is_empty(), "{kind:?}");
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(days(1) + chrono::Duration::minutes(4));
        assert!(
            disposed(&gc(&h, false).await).is_empty(),
            "{kind:?}: inside the clock margin"
        );
        h.clock.advance(chrono::Duration::minutes(2));
        let (worker, auditor) = (renewed(&h, worker).await, renewed(&h, auditor).await);
        let before = h.fingerprint().await;
        let dry = gc(&h, true).await;
        assert_eq!(
            disposed(&dry),
            vec![artifact.to_string()],
            "{kind:?}: {dry}"
        );
        assert_eq!(dry["dryRun"], true);
        assert_unchanged(&before, &h.fingerprint().await, "a dry run");
        let report = gc(&h, false).await;
        assert_eq!(
            disposed(&report),
            vec![artifact.to_string()],
            "{kind:?}: {report}"
        );
        assert_eq!(report["bytes"], 40_000);
        assert!(
            report["disposed"][0]["policy"]
                .as_str()
                .is_some_and(|p| p.contains("group g1 keep-bytes 1d")),
            "{report}"
        );
        let events = h.events_of(&auditor, "artifact.disposed").await;
        assert_eq!(events.len(), 1, "{kind:?}");
        let event = &events[0];
        assert_eq!(
            event["payload"]["artifacts"][0]["artifact"],
            artifact.to_string()
        );
        assert_eq!(event["payload"]["missions"], json!(["mission-1"]));
        // The bytes answer 410, naming the Event; the manifest and lineage stay.
        let uri = format!("/v1/artifacts/{artifact}/content");
        let answer = h
            .call(Method::GET, &uri, Some(&auditor.token), Body::empty())
            .await;
        assert_eq!(answer.status, StatusCode::GONE, "{kind:?}: {answer:?}");
        assert_eq!(answer.code(), "disposed");
        assert_eq!(answer.json()["sequence"], event["sequence"], "{answer:?}");
        let view = h
            .get_json(&auditor, &format!("/v1/artifacts/{artifact}"))
            .await;
        assert_eq!(
            view["manifests"].as_array().map(Vec::len),
            Some(1),
            "{view}"
        );
        let lineage = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{artifact}/provenance"),
                Some(&auditor.token),
                Body::empty(),
            )
            .await;
        assert_eq!(lineage.status, StatusCode::OK, "{kind:?}: {lineage:?}");
        if kind == Kind::Disk {
            assert!(!h.blob_file(&artifact).exists(), "the file is deleted");
        }
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.is_empty(),
            "{kind:?}: {:?}",
            report.problems
        );
        assert_eq!(h.stats().await.disposed, 1);
        // The log compacts over the tombstone; the bytes still answer 410, fsck stays clean.
        h.store
            .compaction()
            .compact(weft_storage::Retention::events(1))
            .await
            .expect("compaction");
        let answer = h
            .call(Method::GET, &uri, Some(&auditor.token), Body::empty())
            .await;
        assert_eq!(answer.code(), "disposed", "{kind:?}: after compaction");
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.is_empty(),
            "{kind:?}: {:?}",
            report.problems
        );
        // A second collection has nothing left to do.
        assert!(disposed(&gc(&h, false).await).is_empty());
        // The same bytes uploaded again are read again (the row is repaired).
        h.upload(&worker, &bytes).await;
        let answer = h
            .call(Method::GET, &uri, Some(&auditor.token), Body::empty())
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{kind:?}: {answer:?}");
        assert_eq!(answer.body.len(), 40_000);
        assert_eq!(h.stats().await.disposed, 0);
    }
);

backends!(
    /// A hold keeps what it holds and everything its lineage needs (the source of a held
    /// artifact); a policy that would let held things go now is refused `held`, naming the
    /// hold, with nothing changed; lifting the hold lets collection take both. Holds are
    /// Events, listed with `hold ls`.
    async fn holds_keep_what_they_hold_and_its_lineage(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let auditor = h.agent("aud", "g1", &["auditor"]).await;
        let source = h.put(&worker, "g1", b"the source, as a file", &[]).await;
        let derived = h
            .put(&worker, "g1", b"derived from the source", &[source])
            .await;
        let placed = h
            .admin_json(
                Method::POST,
                "/v1/admin/holds",
                json!({"artifact": derived.to_string(), "reason": "litigation 42"}),
            )
            .await;
        assert_eq!(placed.status, StatusCode::CREATED, "{kind:?}: {placed:?}");
        let hold_id = placed.json()["holdId"].as_str().expect("id").to_owned();
        assert_eq!(placed.json()["groups"], json!(["g1"]));
        assert_eq!(h.events_of(&auditor, "hold.placed").await.len(), 1);
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(days(2));
        let auditor = renewed(&h, auditor).await;
        // Keeping bytes 1d would let the held artifact go now: refused, naming the hold.
        let before = h.fingerprint().await;
        let refusal = set_retention(&h, "g1", json!({"keepBytes": "1d"})).await;
        assert_eq!(
            refusal.status,
            StatusCode::CONFLICT,
            "{kind:?}: {refusal:?}"
        );
        assert_eq!(refusal.code(), "held");
        assert!(
            refusal.json()["detail"]
                .as_str()
                .is_some_and(|d| d.contains(&hold_id))
        );
        assert_unchanged(&before, &h.fingerprint().await, "a refused policy");
        // A policy set before the hold stands; the hold still keeps what it holds.
        let lift_first = lift_hold(&h, &hold_id).await;
        assert_eq!(lift_first.status, StatusCode::OK);
        let set = set_retention(&h, "g1", json!({"keepBytes": "1d"})).await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        let again = h
            .admin_json(
                Method::POST,
                "/v1/admin/holds",
                json!({"artifact": derived.to_string(), "reason": "litigation 43"}),
            )
            .await;
        let hold_id = again.json()["holdId"].as_str().expect("id").to_owned();
        let report = gc(&h, false).await;
        assert!(disposed(&report).is_empty(), "{kind:?}: {report}");
        assert_eq!(
            report["kept"], 2,
            "{kind:?}: the held artifact and its source: {report}"
        );
        let listed = h
            .call(
                Method::GET,
                "/v1/admin/holds?group=g1",
                Some(ADMIN),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(
            listed["holds"].as_array().map(Vec::len),
            Some(2),
            "{listed}"
        );
        let lifted = lift_hold(&h, &hold_id).await;
        assert_eq!(lifted.status, StatusCode::OK);
        assert!(lifted.json()["liftedAt"].is_string());
        assert_eq!(h.events_of(&auditor, "hold.lifted").await.len(), 2);
        let mut gone = disposed(&gc(&h, false).await);
        gone.sort();
        let mut expected = vec![source.to_string(), derived.to_string()];
        expected.sort();
        assert_eq!(gone, expected, "{kind:?}");
        let absent = h
            .call(
                Method::DELETE,
                "/v1/admin/holds/hold-absent",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(absent.code(), "not_found");
    }
);

backends!(
    /// Only the operator: a session token gets `forbidden` on every lifecycle route, and
    /// nothing changes; bad input is refused with nothing changed.
    async fn only_the_operator_and_bad_input_changes_nothing(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator", "approver"]).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        h.put(&worker, "g1", b"x", &[]).await;
        let before = h.fingerprint().await;
        for (method, uri, body) in [
            (
                Method::PUT,
                "/v1/admin/groups/g1/retention",
                json!({"keepBytes": "1s"}),
            ),
            (
                Method::POST,
                "/v1/admin/holds",
                json!({"missionId": "mission-1", "reason": "r"}),
            ),
            (Method::POST, "/v1/admin/gc", json!({})),
            (
                Method::PUT,
                "/v1/admin/groups/g1/quota",
                json!({"bytes": 1, "artifacts": 1}),
            ),
            (Method::GET, "/v1/admin/groups/g1/usage", json!({})),
        ] {
            let answer = h
                .json_as(method.clone(), uri, &coordinator.token, body, &[])
                .await;
            assert_eq!(
                answer.code(),
                "forbidden",
                "{kind:?} {method} {uri}: {answer:?}"
            );
        }
        for body in [
            json!({"keepBytes": "30w"}),
            json!({"keepBytes": "2d", "keepRecords": "1d"}),
            json!({}),
            json!({"keepBytes": "1d", "missionId": "no-such-mission"}),
        ] {
            let answer = set_retention(&h, "g1", body.clone()).await;
            assert!(
                answer.status.is_client_error(),
                "{kind:?} {body}: {answer:?}"
            );
        }
        let unknown = set_retention(&h, "g-absent", json!({"keepBytes": "1d"})).await;
        assert_eq!(unknown.code(), "unknown_group");
        for body in [
            json!({"reason": "none named"}),
            json!({"missionId": "mission-1", "workItemId": "work-1", "reason": "two"}),
            json!({"missionId": "mission-1", "reason": ""}),
            json!({"missionId": "mission-absent", "reason": "r"}),
        ] {
            let answer = h
                .admin_json(Method::POST, "/v1/admin/holds", body.clone())
                .await;
            assert!(
                answer.status.is_client_error(),
                "{kind:?} {body}: {answer:?}"
            );
        }
        // A quota is an object of non-negative 64-bit integers, never null; gc's query is
        // strict.
        for body in [
            json!([null, null]),
            json!({"bytes": null}),
            json!({"bytes": 9_223_372_036_854_775_808u64}),
            json!({"bytes": 1, "extra": 1}),
        ] {
            let answer = h
                .admin_json(Method::PUT, "/v1/admin/groups/g1/quota", body.clone())
                .await;
            assert_eq!(answer.code(), "bad_request", "{kind:?} {body}: {answer:?}");
        }
        for query in ["dryRun=maybe", "limit=x", "other=1"] {
            let answer = h
                .call(
                    Method::POST,
                    &format!("/v1/admin/gc?{query}"),
                    Some(ADMIN),
                    Body::empty(),
                )
                .await;
            assert_eq!(answer.code(), "bad_request", "{kind:?} {query}: {answer:?}");
        }
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "refused lifecycle requests",
        );
    }
);

backends!(
    /// Upload-then-cite during collection: bytes of an expired Mission that another Worker
    /// uploads again are kept (a recent upload needs them) and its publication stands; bytes
    /// disposed of cannot be cited until uploaded again (410 `disposed`, nothing recorded).
    async fn an_upload_during_collection_keeps_the_bytes(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let kept = h
            .put(&worker, "g1", b"bytes someone wants again", &[])
            .await;
        let lost = h.put(&worker, "g1", b"bytes nobody wants", &[]).await;
        set_retention(&h, "g1", json!({"keepBytes": "0s"})).await;
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(days(1));
        let worker = renewed(&h, worker).await;
        // A Worker of another Mission uploads the same bytes: they are needed now.
        h.ensure_work_item("g1", "mission-2", "work-2").await;
        let digests = h.upload(&worker, b"bytes someone wants again").await;
        let report = gc(&h, false).await;
        assert_eq!(
            disposed(&report),
            vec![lost.to_string()],
            "{kind:?}: {report}"
        );
        assert_eq!(report["kept"], 1);
        let mut manifest = manifest(&worker, "g1", digests, &[]);
        manifest.mission_id = weft_api::Id::parse("m", "mission-2").expect("id");
        manifest.work_item_id = weft_api::Id::parse("w", "work-2").expect("id");
        let published = h.publish(&worker, &sign(&worker.key, &manifest)).await;
        assert_eq!(
            published.status,
            StatusCode::CREATED,
            "{kind:?}: {published:?}"
        );
        let content = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{kept}/content"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(content.status, StatusCode::OK, "{kind:?}");
        // Citing disposed bytes without sending them: refused, nothing recorded.
        let gone = digest_of(b"bytes nobody wants");
        let mut cite = crate::http::tests::harness::manifest(&worker, "g1", gone, &[]);
        cite.mission_id = weft_api::Id::parse("m", "mission-2").expect("id");
        cite.work_item_id = weft_api::Id::parse("w", "work-2").expect("id");
        let before = h.fingerprint().await;
        let refused_publication = h.publish(&worker, &sign(&worker.key, &cite)).await;
        assert_eq!(
            refused_publication.status,
            StatusCode::GONE,
            "{kind:?}: {refused_publication:?}"
        );
        assert_eq!(refused_publication.code(), "disposed");
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "a citation of disposed bytes",
        );
    }
);

backends!(
    /// An upload held between placing its bytes and its row while collection runs: the batch
    /// waits for it (the sweep lock), sees its fresh upload, and keeps the bytes, which the
    /// upload's answer then names as stored.
    async fn a_held_upload_and_a_collection_interleave_safely(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = vec![3u8; 20_000];
        let artifact = h.put(&worker, "g1", &bytes, &[]).await;
        set_retention(&h, "g1", json!({"keepBytes": "0s"})).await;
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(days(1));
        let other = h.agent("w2", "g1", &["worker"]).await;
        let _ = worker;
        h.faults.promoted().set(true);
        let upload = {
            let request = request(
                Method::PUT,
                &format!("/v1/blobs/{artifact}"),
                Some(&other.token),
                bytes.clone(),
            );
            let app = h.app.clone();
            tokio::spawn(async move { tower::ServiceExt::oneshot(app, request).await })
        };
        h.faults.promoted().waiting(1).await;
        let collection = {
            let store = h.store.clone();
            tokio::spawn(async move { store.artifacts().collect(false, 100).await })
        };
        tokio::task::yield_now().await;
        h.faults.promoted().set(false);
        let answer = upload.await.expect("task").expect("answer");
        assert!(
            answer.status().is_success(),
            "{kind:?}: {}",
            answer.status()
        );
        let report = collection.await.expect("task").expect("collection");
        assert!(report.disposed.is_empty(), "{kind:?}: {report:?}");
        let content = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{artifact}/content"),
                Some(&other.token),
                Body::empty(),
            )
            .await;
        assert_eq!(content.status, StatusCode::OK, "{kind:?}");
    }
);

backends!(
    /// A Group's quota: uploads of new bytes past it answer 507 `quota_exceeded` with
    /// nothing stored; bytes the Group holds already cost nothing; usage shows it all.
    async fn a_quota_refuses_uploads_past_it(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let set = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/quota",
                json!({"bytes": 100, "artifacts": 2}),
            )
            .await;
        assert_eq!(set.status, StatusCode::OK, "{kind:?}: {set:?}");
        h.upload(&worker, &[1u8; 60]).await;
        let before = h.fingerprint().await;
        let over = h
            .send(request(
                Method::POST,
                "/v1/blobs",
                Some(&worker.token),
                vec![2u8; 50],
            ))
            .await;
        assert_eq!(
            over.status,
            StatusCode::INSUFFICIENT_STORAGE,
            "{kind:?}: {over:?}"
        );
        assert_eq!(over.code(), "quota_exceeded");
        assert_unchanged(&before, &h.fingerprint().await, "an upload past the quota");
        h.upload(&worker, &[1u8; 60]).await;
        h.upload(&worker, &[3u8; 40]).await;
        let third = h
            .send(request(
                Method::POST,
                "/v1/blobs",
                Some(&worker.token),
                vec![4u8; 1],
            ))
            .await;
        assert_eq!(
            third.code(),
            "quota_exceeded",
            "{kind:?}: the artifact count"
        );
        let usage = h
            .call(
                Method::GET,
                "/v1/admin/groups/g1/usage",
                Some(ADMIN),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(
            usage,
            json!({"bytes": 100, "artifacts": 2, "quota": {"bytes": 100, "artifacts": 2}})
        );
    }
);

backends!(
    /// A collection stopped between its commit and its file deletions (the blob store failing
    /// them, as a kill there would): the bytes are never served (410) nor reported as damage,
    /// and the next collection deletes the files and clears the mark.
    async fn an_interrupted_collection_is_finished_by_the_next(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let artifact = h.put(&worker, "g1", &[9u8; 30_000], &[]).await;
        set_retention(&h, "g1", json!({"keepBytes": "0s"})).await;
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(days(1));
        h.faults.fail_writes(
            weft_storage::FaultSite::BlobWrite,
            weft_storage::FaultKind::Io,
        );
        let failed = h
            .call(Method::POST, "/v1/admin/gc", Some(ADMIN), Body::empty())
            .await;
        assert!(failed.status.is_server_error(), "{kind:?}: {failed:?}");
        h.faults.clear();
        let worker = renewed(&h, worker).await;
        let content = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{artifact}/content"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(content.status, StatusCode::GONE, "{kind:?}: {content:?}");
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.is_empty(),
            "{kind:?}: {:?}",
            report.problems
        );
        assert!(disposed(&gc(&h, false).await).is_empty());
        if kind == Kind::Disk {
            assert!(
                !h.blob_file(&artifact).exists(),
                "finished by the next collection"
            );
        }
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.is_empty() && report.leftovers.is_empty(),
            "{kind:?}: {report:?}"
        );
    }
);

backends!(
    /// Nothing kept for retries grows forever: past the answer horizon a collection trims the
    /// answers of Commands and idempotent requests; a retry then answers 409
    /// `command_expired` and is never done again (nothing changes).
    async fn answers_past_the_horizon_are_trimmed_never_redone(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let document = crate::http::tests::work_setup::command_doc(
            &h,
            &coordinator,
            "g1",
            "mission.create",
            json!({"missionId": "m-old", "title": "t", "priorityClass": "normal",
                   "budget": crate::http::tests::work_setup::budget()}),
        )
        .await;
        let first = h
            .send(crate::http::tests::work_setup::command_request(
                &coordinator,
                "g1",
                &document,
            ))
            .await;
        assert_eq!(first.status, StatusCode::CREATED, "{kind:?}: {first:?}");
        let key = [("idempotency-key", "hold-once")];
        let hold = json!({"missionId": "m-old", "reason": "kept for review"});
        let placed = h
            .json_as(Method::POST, "/v1/admin/holds", ADMIN, hold.clone(), &key)
            .await;
        assert_eq!(placed.status, StatusCode::CREATED, "{kind:?}: {placed:?}");
        let replayed = h
            .json_as(Method::POST, "/v1/admin/holds", ADMIN, hold.clone(), &key)
            .await;
        assert_eq!(
            replayed.json(),
            placed.json(),
            "{kind:?}: a retry inside the horizon replays"
        );
        h.clock.advance(days(31));
        let report = gc(&h, false).await;
        assert!(
            report["answersTrimmed"].as_u64() >= Some(2),
            "{kind:?}: {report}"
        );
        let coordinator = renewed(&h, coordinator).await;
        let before = h.fingerprint().await;
        let again = h
            .send(crate::http::tests::work_setup::command_request(
                &coordinator,
                "g1",
                &document,
            ))
            .await;
        assert_eq!(again.status, StatusCode::CONFLICT, "{kind:?}: {again:?}");
        assert_eq!(again.code(), "command_expired");
        let again = h
            .json_as(Method::POST, "/v1/admin/holds", ADMIN, hold, &key)
            .await;
        assert_eq!(again.code(), "command_expired", "{kind:?}: {again:?}");
        assert_unchanged(&before, &h.fingerprint().await, "retries past the horizon");
    }
);

backends!(
    /// A policy for one classification of a Group's artifacts wins over the Group's (and a
    /// Mission's over both): internal bytes kept one day go, confidential ones kept by the
    /// Group's thirty days stay.
    async fn a_classification_policy_wins_over_the_groups(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let internal = h.put(&worker, "g1", b"an internal artifact", &[]).await;
        let digests = h.upload(&worker, b"a confidential artifact").await;
        let mut confidential = manifest(&worker, "g1", digests, &[]);
        confidential.classification = weft_api::manifest::Classification::Confidential;
        let published = h.publish(&worker, &sign(&worker.key, &confidential)).await;
        assert_eq!(
            published.status,
            StatusCode::CREATED,
            "{kind:?}: {published:?}"
        );
        let group = set_retention(&h, "g1", json!({"keepBytes": "30d"})).await;
        assert_eq!(group.status, StatusCode::OK, "{kind:?}: {group:?}");
        let class = set_retention(
            &h,
            "g1",
            json!({"classification": "internal", "keepBytes": "1d"}),
        )
        .await;
        assert_eq!(class.status, StatusCode::OK, "{kind:?}: {class:?}");
        assert_eq!(class.json()["classification"], "internal");
        let both = set_retention(
            &h,
            "g1",
            json!({"classification": "internal", "missionId": "mission-1", "keepBytes": "1d"}),
        )
        .await;
        assert_eq!(both.code(), "bad_request", "{kind:?}: one scope per policy");
        end_mission(&h, "g1", "mission-1").await;
        h.clock.advance(days(2));
        let report = gc(&h, false).await;
        assert_eq!(
            disposed(&report),
            vec![internal.to_string()],
            "{kind:?}: {report}"
        );
        assert!(
            report["disposed"][0]["policy"]
                .as_str()
                .is_some_and(|p| p.contains("internal artifacts of group g1 keep-bytes 1d")),
            "{report}"
        );
        let shown = h
            .call(
                Method::GET,
                "/v1/admin/groups/g1/retention",
                Some(ADMIN),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(
            shown["policies"].as_array().map(Vec::len),
            Some(2),
            "{shown}"
        );
    }
);
