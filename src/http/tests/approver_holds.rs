//! Issue #46: a Group's approver places and lifts legal holds through its session, on what
//! that session sees. The hold keeps the bytes from collection as the operator's does; its
//! Events go to the approver's Group only and name the approver (their actor). Every refusal
//! (no approver role, another Group's route, the admin token, what the session does not see,
//! the operator's hold) changes nothing, and what another Group holds answers as what does
//! not exist.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::*;
use super::lifecycle::{gc, past_keep_bytes, renewed_in};
use super::work::mission;

/// `agent`'s call on Group `group`'s holds.
async fn holds_call(
    h: &Harness,
    agent: &Agent,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Answer {
    match body {
        Some(body) => h.json_as(method, path, &agent.token, body, &[]).await,
        None => {
            h.call(method, path, Some(&agent.token), Body::empty())
                .await
        }
    }
}

/// Group `group`'s holds as `agent` lists them.
async fn listed(h: &Harness, agent: &Agent, group: &str) -> Value {
    let path = format!("/v1/groups/{group}/holds");
    holds_call(h, agent, Method::GET, &path, None).await.json()
}

backends!(
    /// An approver's hold keeps an artifact's bytes past its policy; `hold.placed` and
    /// `hold.lifted` name the approver, who finds them among its own Events; once lifted,
    /// collection takes the bytes.
    async fn an_approvers_hold_keeps_bytes_and_names_the_approver(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let approver = h.agent("a1", "g1", &["approver"]).await;
        let auditor = h.agent("aud", "g1", &["auditor"]).await;
        let artifact = h.put(&worker, "g1", b"kept for the review", &[]).await;
        let placed = holds_call(
            &h,
            &approver,
            Method::POST,
            "/v1/groups/g1/holds",
            Some(json!({"artifact": artifact.to_string(), "reason": "review 7"})),
        )
        .await;
        assert_eq!(placed.status, StatusCode::CREATED, "{kind:?}: {placed:?}");
        let placed = placed.json();
        assert_eq!(placed["placedBy"], "a1", "{placed}");
        assert_eq!(placed["groups"], json!(["g1"]));
        let hold_id = placed["holdId"].as_str().expect("id").to_owned();
        let events = h.events_of(&auditor, "hold.placed").await;
        assert_eq!(events.len(), 1, "{kind:?}");
        assert_eq!(events[0]["payload"]["placedBy"], "a1", "{}", events[0]);
        let own = h.get_json(&auditor, "/v1/groups/g1/agents/a1/events").await;
        assert_eq!(own["events"][0]["type"], "hold.placed", "{kind:?}: {own}");

        past_keep_bytes(&h, 2).await;
        let report = gc(&h, false).await;
        assert_eq!(report["disposed"], json!([]), "{kind:?}: {report}");
        assert_eq!(report["kept"], 1, "{kind:?}: {report}");

        let (approver, auditor) = (
            renewed_in(&h, approver, "g1").await,
            renewed_in(&h, auditor, "g1").await,
        );
        let listed = holds_call(&h, &approver, Method::GET, "/v1/groups/g1/holds", None).await;
        assert_eq!(
            listed.json()["holds"][0]["holdId"],
            hold_id.as_str(),
            "{listed:?}"
        );
        let lifted = holds_call(
            &h,
            &approver,
            Method::DELETE,
            &format!("/v1/groups/g1/holds/{hold_id}"),
            None,
        )
        .await;
        assert_eq!(lifted.status, StatusCode::OK, "{kind:?}: {lifted:?}");
        assert!(lifted.json()["liftedAt"].is_string());
        let events = h.events_of(&auditor, "hold.lifted").await;
        assert_eq!(events[0]["payload"]["liftedBy"], "a1", "{kind:?}");
        let report = gc(&h, false).await;
        assert_eq!(
            report["disposed"][0]["artifact"],
            artifact.to_string(),
            "{kind:?}: {report}"
        );
    }
);

backends!(
    /// Who may not: a member without the approver role, an approver on another Group's route,
    /// the admin token on a Group's route, an approver lifting the operator's hold; and what
    /// the session does not see (another Group's Mission or artifact, a Mission outside a
    /// scoped Membership) answers `not_found`, as an unknown one does. Nothing changes.
    async fn approvers_hold_only_what_they_see_and_refusals_change_nothing(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let approver = h.agent("a1", "g1", &["approver"]).await;
        let other = h.agent("a2", "g2", &["approver", "coordinator"]).await;
        let outsider = h.agent("w2", "g2", &["worker"]).await;
        mission(&h, &coordinator, "g1", "m-g1").await;
        mission(&h, &other, "g2", "m-g2").await;
        let hidden = h.put(&outsider, "g2", b"g2's own bytes", &[]).await;
        let shared = h
            .put(&worker, "g1", b"bytes both Groups published", &[])
            .await;
        h.put(&outsider, "g2", b"bytes both Groups published", &[])
            .await;
        let scoped = h.agent("a3", "g1", &["approver"]).await;
        let narrowed = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/members/a3",
                json!({"roles": ["approver"], "missions": ["m-elsewhere"]}),
            )
            .await;
        assert_eq!(narrowed.status, StatusCode::OK, "{narrowed:?}");
        let scoped = Agent {
            token: h.session(&scoped.key, "a3", "g1").await,
            ..scoped
        };
        let operators = h
            .admin_json(
                Method::POST,
                "/v1/admin/holds",
                json!({"missionId": "m-g1", "reason": "the operator's"}),
            )
            .await;
        assert_eq!(operators.status, StatusCode::CREATED, "{operators:?}");
        let operators = operators.json()["holdId"].as_str().expect("id").to_owned();
        let on_shared = h
            .admin_json(
                Method::POST,
                "/v1/admin/holds",
                json!({"artifact": shared.to_string(), "reason": "the operator's, on shared bytes"}),
            )
            .await;
        assert_eq!(
            on_shared.json()["groups"],
            json!(["g1", "g2"]),
            "{on_shared:?}"
        );

        let before = h.fingerprint().await;
        let hold = |target: Value| {
            let mut body = target;
            body["reason"] = json!("r");
            Some(body)
        };
        let cases: Vec<(&Agent, Method, String, Option<Value>, &str)> = vec![
            (
                &coordinator,
                Method::POST,
                "/v1/groups/g1/holds".into(),
                hold(json!({"missionId": "m-g1"})),
                "forbidden",
            ),
            (
                &approver,
                Method::POST,
                "/v1/groups/g2/holds".into(),
                hold(json!({"missionId": "m-g2"})),
                "forbidden",
            ),
            (
                &approver,
                Method::GET,
                "/v1/groups/g2/holds".into(),
                None,
                "forbidden",
            ),
            (
                &approver,
                Method::POST,
                "/v1/groups/g1/holds".into(),
                hold(json!({"missionId": "m-g2"})),
                "not_found",
            ),
            (
                &approver,
                Method::POST,
                "/v1/groups/g1/holds".into(),
                hold(json!({"missionId": "m-none"})),
                "not_found",
            ),
            (
                &approver,
                Method::POST,
                "/v1/groups/g1/holds".into(),
                hold(json!({"artifact": hidden.to_string()})),
                "not_found",
            ),
            (
                &approver,
                Method::POST,
                "/v1/groups/g1/holds".into(),
                hold(json!({"workItemId": "wi-none"})),
                "not_found",
            ),
            (
                &scoped,
                Method::POST,
                "/v1/groups/g1/holds".into(),
                hold(json!({"missionId": "m-g1"})),
                "not_found",
            ),
            (
                &approver,
                Method::DELETE,
                format!("/v1/groups/g1/holds/{operators}"),
                None,
                "forbidden",
            ),
            (
                &other,
                Method::DELETE,
                format!("/v1/groups/g2/holds/{operators}"),
                None,
                "not_found",
            ),
            (
                &approver,
                Method::DELETE,
                "/v1/groups/g1/holds/hold-none".into(),
                None,
                "not_found",
            ),
        ];
        for (agent, method, path, body, code) in cases {
            let answer = holds_call(&h, agent, method.clone(), &path, body.clone()).await;
            assert_eq!(
                answer.code(),
                code,
                "{kind:?}: {method} {path} {body:?}: {answer:?}"
            );
        }
        let admin = h
            .admin_json(
                Method::POST,
                "/v1/groups/g1/holds",
                json!({"missionId": "m-g1", "reason": "r"}),
            )
            .await;
        assert_eq!(admin.code(), "forbidden", "{kind:?}: {admin:?}");
        assert_unchanged(&before, &h.fingerprint().await, "refused holds");

        // Each Group's list shows its own: g1's approver sees the operator's holds on m-g1 and
        // on the shared bytes, g2's only the latter, each as its own Group's; a scoped approver
        // sees no hold on what it does not see.
        let shown = listed(&h, &approver, "g1").await;
        let ids: Vec<&str> = shown["holds"]
            .as_array()
            .expect("holds")
            .iter()
            .map(|hold| hold["holdId"].as_str().expect("id"))
            .collect();
        assert_eq!(ids.len(), 2, "{kind:?}: {shown}");
        assert!(ids.contains(&operators.as_str()), "{kind:?}: {shown}");
        // Which other Group published the same bytes is that Group's to know.
        for hold in shown["holds"].as_array().expect("holds") {
            assert_eq!(hold["groups"], json!(["g1"]), "{kind:?}: {hold}");
        }
        assert_eq!(
            listed(&h, &other, "g2").await["holds"][0]["groups"],
            json!(["g2"]),
            "{kind:?}"
        );
        assert_eq!(
            listed(&h, &scoped, "g1").await["holds"],
            json!([]),
            "{kind:?}"
        );
    }
);

/// Every page of the holds listing at `base` (which has a query) read with `token`, `limit`
/// per page: the ids in order and the number of pages.
async fn pages(h: &Harness, token: &str, base: &str, limit: usize) -> (Vec<String>, usize) {
    let (mut ids, mut pages, mut after) = (Vec::new(), 0, None::<String>);
    loop {
        let path = match &after {
            Some(after) => format!("{base}&limit={limit}&after={after}"),
            None => format!("{base}&limit={limit}"),
        };
        let page = h.call(Method::GET, &path, Some(token), Body::empty()).await;
        assert_eq!(page.status, StatusCode::OK, "{path}: {page:?}");
        let page = page.json();
        pages += 1;
        let holds = page["holds"].as_array().expect("holds");
        assert!(holds.len() <= limit, "{page}");
        ids.extend(
            holds
                .iter()
                .map(|hold| hold["holdId"].as_str().expect("id").to_owned()),
        );
        match page["next"].as_str() {
            Some(next) => after = Some(next.to_owned()),
            None => return (ids, pages),
        }
    }
}

backends!(
    /// Both listings are paged by hold id (`limit`, `next`): five holds in pages of two are
    /// read in three, each once, in order; an approver's pages hold only its Group's.
    async fn hold_listings_are_paged(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let approver = h.agent("a1", "g1", &["approver"]).await;
        let mut placed = Vec::new();
        for n in 0..5 {
            let artifact = h
                .put(&worker, "g1", format!("held {n}").as_bytes(), &[])
                .await;
            let (path, token) = if n % 2 == 0 {
                ("/v1/admin/holds", ADMIN)
            } else {
                ("/v1/groups/g1/holds", approver.token.as_str())
            };
            let answer = h
                .json_as(
                    Method::POST,
                    path,
                    token,
                    json!({"artifact": artifact.to_string(), "reason": format!("r{n}")}),
                    &[],
                )
                .await;
            assert_eq!(answer.status, StatusCode::CREATED, "{kind:?}: {answer:?}");
            placed.push(answer.json()["holdId"].as_str().expect("id").to_owned());
        }
        placed.sort();
        let (ids, count) = pages(&h, ADMIN, "/v1/admin/holds?group=g1", 2).await;
        assert_eq!((ids, count), (placed.clone(), 3), "{kind:?}");
        let (ids, _) = pages(&h, &approver.token, "/v1/groups/g1/holds?", 2).await;
        assert_eq!(
            ids, placed,
            "{kind:?}: the approver sees the operator's holds too"
        );
        let bad = h
            .call(
                Method::GET,
                "/v1/groups/g1/holds?limit=2&page=3",
                Some(&approver.token),
                Body::empty(),
            )
            .await;
        assert_eq!(bad.code(), "bad_request", "{kind:?}: {bad:?}");
        let twice = h
            .call(
                Method::GET,
                "/v1/admin/holds?after=hold-a&after=hold-b",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(
            twice.code(),
            "bad_request",
            "{kind:?}: a parameter given twice"
        );
    }
);

backends!(
    /// A Group's approvers have at most 1,000 holds in force (`409 conflict`) and place at
    /// most 1,000 a day, each at most 100, lifted ones counted (`429 rate_limited`); each
    /// refusal changes nothing. The holds are placed through the store for speed; the
    /// refusals go over HTTP.
    async fn approvers_holds_are_bounded_in_number_and_rate(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let approver = h.agent("a1", "g1", &["approver"]).await;
        mission(&h, &coordinator, "g1", "m-held").await;
        let group = weft_api::Id::parse("groupId", "g1").expect("id");
        let target = || {
            weft_api::lifecycle::HoldTarget::MissionId(
                weft_api::Id::parse("missionId", "m-held").expect("id"),
            )
        };
        let per_approver = weft_storage::APPROVER_HOLDS;
        let approvers = weft_storage::GROUP_HOLDS / per_approver;
        let mut first = None;
        for n in 0..approvers {
            let placing = if n == 0 {
                approver.token.clone()
            } else {
                h.agent(&format!("a{}", n + 1), "g1", &["approver"])
                    .await
                    .token
            };
            let session = h
                .store
                .sessions()
                .authenticate(&placing)
                .await
                .expect("session");
            let by = weft_storage::HoldBy::Approver {
                group: &group,
                session: &session,
            };
            for _ in 0..per_approver {
                let hold = h
                    .store
                    .lifespan()
                    .place_hold(target(), "r".to_owned(), by)
                    .await
                    .expect("a hold");
                first.get_or_insert(hold.hold_id);
            }
            if n == 0 {
                // One approver's day is spent while its Group's is not.
                let more = h
                    .store
                    .lifespan()
                    .place_hold(target(), "r".to_owned(), by)
                    .await
                    .expect_err("past one approver's day");
                assert_eq!(more.code(), weft_api::ErrorCode::RateLimited, "{kind:?}");
            }
        }
        let place = || async {
            holds_call(
                &h,
                &approver,
                Method::POST,
                "/v1/groups/g1/holds",
                Some(json!({"missionId": "m-held", "reason": "one more"})),
            )
            .await
        };
        let before = h.fingerprint().await;
        assert_eq!(place().await.code(), "conflict", "{kind:?}");
        assert_unchanged(&before, &h.fingerprint().await, "a hold past the bound");
        let first = first.expect("placed");
        let lifted = holds_call(
            &h,
            &approver,
            Method::DELETE,
            &format!("/v1/groups/g1/holds/{first}"),
            None,
        )
        .await;
        assert_eq!(lifted.status, StatusCode::OK, "{kind:?}: {lifted:?}");
        // An approver who placed none today meets the Group's day.
        let fresh = h.agent("a-fresh", "g1", &["approver"]).await;
        let before = h.fingerprint().await;
        let by_fresh = holds_call(
            &h,
            &fresh,
            Method::POST,
            "/v1/groups/g1/holds",
            Some(json!({"missionId": "m-held", "reason": "one more"})),
        )
        .await;
        assert_eq!(by_fresh.code(), "rate_limited", "{kind:?}: {by_fresh:?}");
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "a hold past the Group's day",
        );
        assert_eq!(place().await.code(), "rate_limited", "{kind:?}");
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "a hold past the day's rate",
        );
        h.clock.advance(chrono::Duration::hours(25));
        let approver = renewed_in(&h, approver, "g1").await;
        let again = holds_call(
            &h,
            &approver,
            Method::POST,
            "/v1/groups/g1/holds",
            Some(json!({"missionId": "m-held", "reason": "the next day"})),
        )
        .await;
        assert_eq!(again.status, StatusCode::CREATED, "{kind:?}: {again:?}");
    }
);
