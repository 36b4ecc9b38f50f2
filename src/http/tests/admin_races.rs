//! An Agent's rows changed through two servers at once over one PostgreSQL index (issue
//! #43): Memberships, deactivations and key rotations take their Groups' locks first, in
//! order, then the Agent's row, so they neither deadlock with each other or with the Agent's
//! own writes nor decide on a state another server is changing. Each test fails without its
//! fix (the commits that added them say how often). Two `Store`s in one test process, as in
//! `servers.rs`; on the other backends these tests say they skipped.

use axum::http::{Method, StatusCode};

use super::harness::*;

/// Where in `events` (a log page's) the first Event of type `kind` whose payload's `field` is
/// `value` stands.
fn position(events: &[serde_json::Value], kind: &str, field: &str, value: &str) -> Option<usize> {
    events
        .iter()
        .position(|e| e["type"] == kind && e["payload"][field] == value)
}

/// A Membership set through one server while another removes it: both succeed, each change
/// with an epoch of its own, in log order. A removal took the Membership's row before the
/// Group's lock, a set the other way round: the two deadlocked (PostgreSQL refused the set,
/// 40P01), and a removal that read the epoch before a set committed could have written the
/// epoch the set had just given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_membership_set_and_removed_through_two_servers_at_once_keeps_its_epochs_apart() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    a.agent("w1", "g1", &["worker"]).await;
    let reader = a.agent("c1", "g1", &["coordinator"]).await;
    let (group, agent) = (
        weft_api::Id::parse("g", "g1").expect("id"),
        weft_api::Id::parse("a", "w1").expect("id"),
    );
    let (directory_a, directory_b) = (a.store.directory(), b.store.directory());
    for _ in 0..24 {
        let set = directory_a.set_membership(
            group.clone(),
            agent.clone(),
            vec![weft_api::session::Role::Worker],
        );
        let removed = directory_b.remove_membership(group.clone(), agent.clone());
        let (set, _) = tokio::join!(set, removed);
        set.expect("set");
    }
    let events = a
        .get_json(&reader, "/v1/groups/g1/events?after=0&limit=500")
        .await;
    let epochs: Vec<u64> = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|event| {
            ["membership.set", "membership.removed"].contains(&event["type"].as_str().unwrap_or(""))
                && event["payload"]["agentId"] == "w1"
        })
        .map(|event| event["payload"]["membershipEpoch"].as_u64().expect("epoch"))
        .collect();
    assert!(epochs.len() > 24, "{epochs:?}");
    assert!(
        epochs.windows(2).all(|pair| pair[0] < pair[1]),
        "{epochs:?}"
    );
}

/// An Agent deactivated through one server while another removes one of its Memberships:
/// both succeed. The deactivation forgot the Agent's presence rows (every Group's) before it
/// took its Groups' locks, the removal takes its Group's lock and then forgets that Group's
/// row: they deadlocked (PostgreSQL, 40P01). It now takes its Groups' locks first, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_deactivated_while_another_server_removes_its_membership_does_not_deadlock() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let group = weft_api::Id::parse("g", "g1").expect("id");
    let (directory_a, directory_b) = (a.store.directory(), b.store.directory());
    for n in 0..24 {
        let name = format!("w{n}");
        let worker = a.agent(&name, "g1", &["worker"]).await;
        let card = super::cards::card(&worker, "1", 2, &a.clock_now());
        let answer = super::cards::put_card(
            &a,
            &worker.token,
            &name,
            super::cards::signed(&worker, &card),
        )
        .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let report = serde_json::json!({"freeSlots": 1, "capacityState": "available"});
        let answer = a
            .json_as(
                Method::PUT,
                "/v1/groups/g1/presence",
                &worker.token,
                report,
                &[],
            )
            .await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
        let agent = weft_api::Id::parse("a", &name).expect("id");
        let (deactivated, removed) = tokio::join!(
            directory_a.deactivate_agent(agent.clone()),
            directory_b.remove_membership(group.clone(), agent.clone())
        );
        deactivated.expect("deactivated");
        removed.expect("removed");
    }
}

/// An Agent's key rotated through one server while it publishes through another: the
/// rotation succeeds, and the publication is either recorded or refused for its key or
/// session, never failed by a deadlock. The rotation updated the Agent's key (a unique column, locking the
/// Agent's row for update) before its Groups' locks, while a publication holds its Group's
/// lock and then checks its producer's foreign key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotated_while_its_agent_publishes_through_another_server_does_not_deadlock() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let directory_b = b.store.directory();
    for n in 0..24u8 {
        let name = format!("w{n}");
        let worker = a.agent(&name, "g1", &["worker"]).await;
        let bytes = format!("published while {name}'s key turns").into_bytes();
        // A WorkItem of its own, started under its own lease.
        let mut manifest = manifest(&worker, "g1", digest_of(&bytes), &[]);
        manifest.work_item_id = weft_api::Id::parse("w", &format!("wi-{n}")).expect("id");
        let envelope = a
            .bind_to_lease(&worker, &sign(&worker.key, &manifest))
            .await;
        let request = super::with_content::publication(&worker, &envelope, &bytes);
        let key = ed25519_dalek::SigningKey::from_bytes(&[n.wrapping_add(100); 32]);
        let agent = weft_api::Id::parse("a", &name).expect("id");
        let (published, rotated) = tokio::join!(
            a.send(request),
            directory_b.rotate_key(agent, key.verifying_key())
        );
        rotated.expect("rotated");
        // Recorded, or refused for the key or the session the rotation ended: never a 5xx.
        assert!(
            published.status == StatusCode::CREATED || published.status.is_client_error(),
            "{published:?}"
        );
    }
}

/// An Agent's key rotated through two servers at once: one rotation follows the other, and
/// the Agent ends with one current key, the other retired. Each rotation read the current
/// key before anything held the Agent's row (an Agent in no Group takes no Group's lock):
/// both retired the registered key, and the first one's new key stayed current in the
/// Agent's record beside the second's. Deactivations and rotations take the row now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotated_through_two_servers_at_once_leaves_one_current_key() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let (directory_a, directory_b) = (a.store.directory(), b.store.directory());
    for n in 0..24u8 {
        let agent = weft_api::Id::parse("a", &format!("lone{n}")).expect("id");
        let key = |seed: u8| ed25519_dalek::SigningKey::from_bytes(&[seed; 32]).verifying_key();
        directory_a
            .register_agent(agent.clone(), key(n.wrapping_add(1)), "1".into())
            .await
            .expect("registered");
        let (first, second) = tokio::join!(
            directory_a.rotate_key(agent.clone(), key(n.wrapping_add(101))),
            directory_b.rotate_key(agent.clone(), key(n.wrapping_add(201)))
        );
        first.expect("first rotation");
        second.expect("second rotation");
        let record = directory_a.agent_record(agent).await.expect("record");
        let current = record.keys.iter().filter(|key| key.retired_at.is_none());
        assert_eq!(current.count(), 1, "{:?}", record.keys);
        assert_eq!(record.keys.len(), 3, "{:?}", record.keys);
    }
}

/// An Agent deactivated through one server while another rotates its key: the rotation
/// either comes first or is refused, and no `agent.key_rotated` follows the
/// `agent.deactivated` in the Group's log. The rotation read the Agent's state before the
/// Group's lock and went on, after the deactivation's commit, to give a deactivated Agent a
/// new key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rotated_while_another_server_deactivates_its_agent_never_follows_the_deactivation() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let reader = a.agent("c1", "g1", &["coordinator"]).await;
    let (directory_a, directory_b) = (a.store.directory(), b.store.directory());
    for n in 0..24u8 {
        let name = format!("w{n}");
        a.agent(&name, "g1", &["worker"]).await;
        let agent = weft_api::Id::parse("a", &name).expect("id");
        let key = ed25519_dalek::SigningKey::from_bytes(&[n.wrapping_add(100); 32]);
        let (deactivated, rotated) = tokio::join!(
            directory_a.deactivate_agent(agent.clone()),
            directory_b.rotate_key(agent, key.verifying_key())
        );
        deactivated.expect("deactivated");
        if let Err(error) = rotated {
            assert!(
                matches!(&error, weft_storage::Error::Rejected(rejection)
                    if rejection.code == weft_api::ErrorCode::AgentDeactivated),
                "{error}"
            );
        }
    }
    let events = a
        .get_json(&reader, "/v1/groups/g1/events?after=0&limit=1000")
        .await;
    let mut deactivated = std::collections::HashSet::new();
    for event in events["events"].as_array().expect("events") {
        let agent = event["payload"]["agentId"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        match event["type"].as_str() {
            Some("agent.deactivated") => {
                deactivated.insert(agent);
            }
            Some("agent.key_rotated") => {
                assert!(
                    !deactivated.contains(&agent),
                    "{agent}: rotated after deactivation"
                );
            }
            _ => {}
        }
    }
    assert_eq!(deactivated.len(), 24);
}

/// A Membership set through one server while another deactivates its Agent: the set is
/// refused (`agent_deactivated`), or it came first and the deactivation saw it (its Group's
/// log has `agent.deactivated` after the `membership.set`). The set read the Agent's state
/// under its Group's lock only, and the deactivation never locked that Group (not one of
/// the Agent's when it read them): a deactivated Agent kept a Membership its Group's log
/// never said was deactivated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_membership_set_while_another_server_deactivates_its_agent_is_refused_or_seen() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let reader = a.agent("c2", "g2", &["coordinator"]).await;
    let (directory_a, directory_b) = (a.store.directory(), b.store.directory());
    let g2 = weft_api::Id::parse("g", "g2").expect("id");
    let mut joined = Vec::new();
    for n in 0..24u8 {
        let name = format!("w{n}");
        a.agent(&name, "g1", &["worker"]).await;
        let agent = weft_api::Id::parse("a", &name).expect("id");
        let (set, deactivated) = tokio::join!(
            directory_a.set_membership(
                g2.clone(),
                agent.clone(),
                vec![weft_api::session::Role::Worker]
            ),
            directory_b.deactivate_agent(agent)
        );
        deactivated.expect("deactivated");
        match set {
            Ok(_) => joined.push(name),
            Err(error) => assert!(
                matches!(&error, weft_storage::Error::Rejected(rejection)
                    if rejection.code == weft_api::ErrorCode::AgentDeactivated),
                "{error}"
            ),
        }
    }
    let events = a
        .get_json(&reader, "/v1/groups/g2/events?after=0&limit=1000")
        .await;
    let events = events["events"].as_array().expect("events");
    for name in &joined {
        let at = |kind: &str| position(events, kind, "agentId", name);
        let (set, deactivated) = (at("membership.set"), at("agent.deactivated"));
        assert!(
            set.is_some() && deactivated > set,
            "{name}: set at {set:?}, deactivated at {deactivated:?}"
        );
    }
}

/// A session opened with an Agent's key through one server while another rotates that key:
/// the session is refused (`key_retired`), or it came first and the rotation ended it. The
/// key was checked only before the session's transaction: a session the old key opened
/// after the rotation had ended the Agent's sessions stayed live.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_opened_while_another_server_rotates_its_key_does_not_outlive_the_rotation() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let directory_b = b.store.directory();
    for n in 0..24u8 {
        let name = format!("w{n}");
        let worker = a.agent(&name, "g1", &["worker"]).await;
        let agent = weft_api::Id::parse("a", &name).expect("id");
        let key = ed25519_dalek::SigningKey::from_bytes(&[n.wrapping_add(100); 32]);
        let nonce = format!("{n:016x}");
        let (opened, rotated) = tokio::join!(
            a.open_session(&worker.key, &name, "g1", a.clock_now(), &nonce),
            directory_b.rotate_key(agent, key.verifying_key())
        );
        rotated.expect("rotated");
        if opened.status != StatusCode::CREATED {
            // At the door or in the transaction, alike: a retired key.
            assert_eq!(opened.json()["code"], "key_retired", "{opened:?}");
            continue;
        }
        let token = opened.json()["token"].as_str().expect("token").to_owned();
        let after = a
            .call(
                Method::GET,
                "/v1/groups/g1/events",
                Some(&token),
                Vec::new(),
            )
            .await;
        assert_eq!(
            after.status,
            StatusCode::UNAUTHORIZED,
            "{name}: a session its old key opened outlived the rotation"
        );
    }
}

/// An Agent's card sent through one server while another rotates the Agent's key: the
/// rotation ends the card (a card names the key that signed it), so afterwards the Agent has
/// no card, whichever came first. The card's write read the key before anything held the
/// Agent's row, and put back, after the rotation, a card the retired key had signed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_sent_while_another_server_rotates_its_key_does_not_outlive_the_rotation() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let directory_b = b.store.directory();
    for n in 0..24u8 {
        let name = format!("w{n}");
        let worker = a.agent(&name, "g1", &["worker"]).await;
        let card = super::cards::card(&worker, "1", 2, &a.clock_now());
        let body = super::cards::signed(&worker, &card);
        let key = ed25519_dalek::SigningKey::from_bytes(&[n.wrapping_add(100); 32]);
        let agent = weft_api::Id::parse("a", &name).expect("id");
        let (_, rotated) = tokio::join!(
            super::cards::put_card(&a, &worker.token, &name, body),
            directory_b.rotate_key(agent, key.verifying_key())
        );
        rotated.expect("rotated");
        let path = format!("/v1/agents/{name}/card");
        let after = a.call(Method::GET, &path, Some(ADMIN), Vec::new()).await;
        assert_eq!(
            after.status,
            StatusCode::NOT_FOUND,
            "{name}: a card its retired key signed outlived the rotation"
        );
    }
}

/// A Command signed by an Agent through one server while another rotates that Agent's key:
/// the Command is refused (`key_retired`), or it committed before the rotation (its Event
/// comes first in the Group's log). Its session was checked at the door, and in its
/// transaction only the session's epoch, which a rotation leaves as it was: a Command signed
/// with the retired key committed after the rotation had ended the Agent's sessions. The
/// transaction now checks the signing key is still the Agent's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_signed_while_another_server_rotates_its_key_never_follows_the_rotation() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let reader = a.agent("r1", "g1", &["auditor"]).await;
    let directory_b = b.store.directory();
    let budget = serde_json::json!({"financial": 1.0, "tokens": 1, "toolCalls": 1,
        "computeSeconds": 1, "wallClockSeconds": 1, "sideEffects": 1});
    let mut accepted = Vec::new();
    for n in 0..24u8 {
        let name = format!("c{n}");
        let coordinator = a.agent(&name, "g1", &["coordinator"]).await;
        let create = serde_json::json!({"missionId": format!("m{n}"), "title": "t",
            "priorityClass": "normal", "budget": budget});
        let key = ed25519_dalek::SigningKey::from_bytes(&[n.wrapping_add(100); 32]);
        let agent = weft_api::Id::parse("a", &name).expect("id");
        // Signed before the race (the document names the session's epochs).
        let document =
            super::work_setup::command_doc(&a, &coordinator, "g1", "mission.create", create).await;
        let request = super::work_setup::command_request(&coordinator, "g1", &document);
        let (created, rotated) = tokio::join!(
            a.send(request),
            directory_b.rotate_key(agent, key.verifying_key())
        );
        rotated.expect("rotated");
        if created.status == StatusCode::CREATED {
            accepted.push(n);
        } else {
            // In its transaction, the retired key; at the door, the session the rotation ended.
            let code = created.json()["code"].as_str().unwrap_or("").to_owned();
            assert!(
                ["key_retired", "unauthorized"].contains(&&*code),
                "{created:?}"
            );
        }
    }
    let events = a
        .get_json(&reader, "/v1/groups/g1/events?after=0&limit=1000")
        .await;
    let events = events["events"].as_array().expect("events");
    for n in accepted {
        let created = position(events, "mission.created", "missionId", &format!("m{n}"));
        let rotated = position(events, "agent.key_rotated", "agentId", &format!("c{n}"));
        assert!(
            created.is_some() && created < rotated,
            "c{n}: its Command at {created:?} came after its key's rotation at {rotated:?}"
        );
    }
}
