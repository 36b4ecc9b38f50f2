//! Building and signing Commands for tests, and the harness's own coordinator that makes the
//! Missions and WorkItems other tests publish under exist (issue #11: a manifest or Evidence
//! names an existing WorkItem of its Group and Mission) and gives the publishing Agent the
//! WorkItem's current Execution Lease (issue #12: a manifest names it, LSE-4).

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use base64::Engine as _;
use serde_json::{Value, json};
use weft_api::dsse::{BASE64, MANIFEST_TYPE};
use weft_api::manifest::Execution;
use weft_api::work::COMMAND_TYPE;
use weft_api::{Envelope, Id, Manifest};

use super::harness::{ADMIN, Agent, Harness, request, sign};

/// A complete v1 contract (every CON-1 item) depending on `depends_on`.
pub(super) fn contract(depends_on: &[&str]) -> Value {
    json!({
        "objective": "summarise the corpus",
        "deliverables": [{"name": "report", "mediaType": "application/json", "schema": null}],
        "acceptanceCriteria": [{"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]}],
        "inputs": [], "dependsOn": depends_on, "dependencyPolicy": "all_verified",
        "permissions": {"tools": ["search"], "data": ["corpus"], "operations": ["read"]},
        "requiredCapabilities": [{"id": "cap.summarize", "version": "1"}],
        "deadline": "2026-12-31T00:00:00Z", "urgency": "normal", "businessImpact": "medium",
        "budgets": {"financial": 10.0, "tokens": 200000, "toolCalls": 500, "computeSeconds": 3600,
                    "wallClockSeconds": 7200, "sideEffects": 5},
        "retryPolicy": {"maxAttempts": 3, "backoffSeconds": 30, "deadline": null, "maxCost": 2.0},
        "risk": "low", "approvalRequired": false,
        "leases": {"offerSeconds": 600, "ownershipSeconds": 3600, "executionSeconds": 300,
                   "blockedSeconds": 3600, "graceSeconds": 120},
        "childFailurePolicy": "block"
    })
}

/// The contract of the WorkItems the harness makes for publications: [`contract`] with leases
/// of ten years (so clock advances in other tests never end them) and a retry policy that
/// never refuses a restart (a test's new session revokes the lease; the harness starts again).
pub(super) fn harness_contract() -> Value {
    const TEN_YEARS: u64 = 10 * 365 * 86_400;
    let mut contract = contract(&[]);
    contract["leases"] = json!({"offerSeconds": TEN_YEARS, "ownershipSeconds": TEN_YEARS,
        "executionSeconds": TEN_YEARS, "blockedSeconds": TEN_YEARS, "graceSeconds": 120});
    contract["retryPolicy"] =
        json!({"maxAttempts": 1_000_000, "backoffSeconds": 0, "deadline": null, "maxCost": 2.0});
    contract
}

/// A budget for `mission.create`.
pub(super) fn budget() -> Value {
    json!({"financial": 100.0, "tokens": 1000, "toolCalls": 10, "computeSeconds": 60, "wallClockSeconds": 60, "sideEffects": 1})
}

/// A Command document for `agent`'s current session in `group` (its epochs looked up).
pub(super) async fn command_doc(
    h: &Harness,
    agent: &Agent,
    group: &str,
    kind: &str,
    payload: Value,
) -> Value {
    let session = h
        .store
        .sessions()
        .authenticate(&agent.token)
        .await
        .expect("live session");
    json!({
        "commandId": format!("cmd-{}", uuid::Uuid::now_v7()),
        "type": kind, "groupId": group, "agentId": agent.id,
        "issuedAt": h.clock_now(), "sessionEpoch": session.session_epoch,
        "membershipEpoch": session.membership_epoch, "leaseId": null, "expectedRevision": null,
        "extensions": [], "payload": payload
    })
}

/// Like [`command_doc`], or `None` when `agent`'s session is not live.
async fn command_doc_checked(
    h: &Harness,
    agent: &Agent,
    group: &str,
    kind: &str,
    payload: Value,
) -> Option<Value> {
    h.store.sessions().authenticate(&agent.token).await.ok()?;
    Some(command_doc(h, agent, group, kind, payload).await)
}

/// `document` signed by `agent`, sent with its session to `group`'s Command route.
pub(super) fn command_request(agent: &Agent, group: &str, document: &Value) -> Request<Body> {
    let envelope = Envelope::sign(&agent.key, COMMAND_TYPE, document.to_string().as_bytes());
    request(
        Method::POST,
        &format!("/v1/groups/{group}/commands"),
        Some(&agent.token),
        serde_json::to_vec(&envelope).expect("json"),
    )
}

impl Harness {
    /// Makes sure Mission `mission` and WorkItem `work_item` exist in `group`, created by the
    /// harness's coordinator of that Group (registered once per Group).
    pub(super) async fn ensure_work_item(&self, group: &str, mission: &str, work_item: &str) {
        let exists = self
            .call(
                Method::GET,
                &format!("/v1/workitems/{work_item}"),
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        if exists.status == StatusCode::OK {
            return;
        }
        let coordinator = self.harness_coordinator(group).await;
        let mission_exists = self
            .call(
                Method::GET,
                &format!("/v1/missions/{mission}"),
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        if mission_exists.status != StatusCode::OK {
            let payload = json!({"missionId": mission, "title": "harness", "priorityClass": "normal", "budget": budget()});
            let document = command_doc(self, &coordinator, group, "mission.create", payload).await;
            let answer = self
                .send(command_request(&coordinator, group, &document))
                .await;
            assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        }
        let payload =
            json!({"workItemId": work_item, "missionId": mission, "contract": harness_contract()});
        let document = command_doc(self, &coordinator, group, "work.authorize", payload).await;
        let answer = self
            .send(command_request(&coordinator, group, &document))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }

    /// Makes `agent` hold the current Execution Lease of `work_item` (made by
    /// [`Harness::ensure_work_item`] if missing): the harness's coordinator offers it to
    /// `agent`, which accepts and starts it; a WorkItem `agent` already owns is only started
    /// again if its lease ended (a new session revokes it). Answers the lease id and the
    /// ownership epoch, or `None` when `agent` cannot get it (another Agent owns it, it is
    /// terminal, `agent` is no worker or its session is stale): the publication then goes as
    /// it was built and meets the refusal it is testing.
    pub(super) async fn ensure_lease(
        &self,
        agent: &Agent,
        group: &str,
        mission: &str,
        work_item: &str,
    ) -> Option<(String, u64)> {
        self.ensure_work_item(group, mission, work_item).await;
        // At most offer, accept, start: one step per round.
        for _ in 0..4 {
            let view = self
                .call(
                    Method::GET,
                    &format!("/v1/workitems/{work_item}"),
                    Some(ADMIN),
                    Body::empty(),
                )
                .await;
            if view.status != StatusCode::OK {
                return None;
            }
            let view = view.json();
            let lease = &view["lease"];
            let live = lease["expiresAt"]
                .as_str()
                .and_then(|at| chrono::DateTime::parse_from_rfc3339(at).ok())
                .is_some_and(|at| at.to_utc() > weft_storage::Clock::now(&self.clock));
            if lease["kind"] == "execution" && lease["agentId"] == agent.id.as_str() && live {
                let lease_id = lease["leaseId"].as_str()?.to_owned();
                return Some((lease_id, lease["ownershipEpoch"].as_u64()?));
            }
            let owned = view["owner"]["agentId"] == agent.id.as_str();
            let (kind, payload, issuer) = match view["state"].as_str()? {
                "open" => {
                    let expires = (weft_storage::Clock::now(&self.clock)
                        + chrono::Duration::days(3650))
                    .to_rfc3339();
                    let offer = json!({"workItemId": work_item,
                        "offerId": format!("harness-offer-{}", uuid::Uuid::now_v7()),
                        "candidates": [agent.id], "expiresAt": expires,
                        "selectionBasis": {"capabilityMatches": [{"id": "cap.summarize", "version": "1"}],
                            "authorizationEligible": true, "availabilityEstimate": "2026-11-30T12:00:00Z",
                            "expectedCost": 1.0, "reliabilityEvidence": [], "policyRules": ["harness"]}});
                    ("work.offer", offer, None)
                }
                "offered" => {
                    let offers = view["offers"].as_array()?;
                    let offer = offers.iter().find(|offer| {
                        offer["status"] == "live"
                            && offer["candidates"]
                                .as_array()
                                .is_some_and(|c| c.iter().any(|c| c == agent.id.as_str()))
                    })?;
                    let payload = json!({"workItemId": work_item, "offerId": offer["offerId"]});
                    ("work.accept_offer", payload, Some(agent))
                }
                "queued" if owned => ("work.start", json!({"workItemId": work_item}), Some(agent)),
                _ => return None,
            };
            let answer = match issuer {
                Some(agent) => {
                    let document = command_doc_checked(self, agent, group, kind, payload).await?;
                    self.send(command_request(agent, group, &document)).await
                }
                None => {
                    let coordinator = self.harness_coordinator(group).await;
                    let document = command_doc(self, &coordinator, group, kind, payload).await;
                    self.send(command_request(&coordinator, group, &document))
                        .await
                }
            };
            if answer.status != StatusCode::CREATED {
                return None;
            }
        }
        None
    }

    /// `envelope` rewritten to `agent`'s current Execution Lease, as [`Harness::publish`] says.
    pub(super) async fn bind_to_lease(&self, agent: &Agent, envelope: &Envelope) -> Envelope {
        let Ok(payload) = BASE64.decode(&envelope.payload) else {
            return envelope.clone();
        };
        let Ok(manifest) = serde_json::from_slice::<Value>(&payload) else {
            return envelope.clone();
        };
        let (Some(group), Some(mission), Some(work_item)) = (
            manifest["groupId"].as_str(),
            manifest["missionId"].as_str(),
            manifest["workItemId"].as_str(),
        ) else {
            return envelope.clone();
        };
        let Some((lease_id, epoch)) = self.ensure_lease(agent, group, mission, work_item).await
        else {
            return envelope.clone();
        };
        let Ok(mut typed) = serde_json::from_slice::<Manifest>(&payload) else {
            return envelope.clone();
        };
        let canonical = serde_json::to_vec(&typed).is_ok_and(|bytes| bytes == payload);
        let signed_by_agent = typed.producer.agent_id == agent.id
            && Envelope::sign(&agent.key, MANIFEST_TYPE, &payload) == *envelope;
        if !canonical || !signed_by_agent {
            return envelope.clone();
        }
        let execution = Execution {
            lease_id: Id::parse("leaseId", &lease_id).expect("a stored lease id"),
            ownership_epoch: epoch,
        };
        if typed.execution == execution {
            return envelope.clone();
        }
        typed.execution = execution;
        sign(&agent.key, &typed)
    }

    /// The harness's coordinator in `group`, with a live session.
    pub(super) async fn harness_coordinator(&self, group: &str) -> Agent {
        let cached = self
            .coordinators
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(group)
            .cloned();
        if let Some(token) = cached
            && self.store.sessions().authenticate(&token).await.is_ok()
        {
            let key = ed25519_dalek::SigningKey::from_bytes(
                blake3::hash(b"harness-coordinator").as_bytes(),
            );
            return Agent {
                id: weft_api::Id::parse("agentId", "harness-coordinator").expect("id"),
                key,
                token,
            };
        }
        let agent = self
            .agent("harness-coordinator", group, &["coordinator"])
            .await;
        self.coordinators
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(group.to_owned(), agent.token.clone());
        agent
    }
}

impl Harness {
    /// `{leaseId, ownershipEpoch}` of `work_item`'s current Execution Lease when `agent` owns
    /// it (what the owner's Evidence names, DESIGN §5.1), else `None`.
    pub(super) async fn execution_of(&self, agent: &Agent, work_item: &str) -> Option<Value> {
        let view = self
            .call(
                Method::GET,
                &format!("/v1/workitems/{work_item}"),
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        if view.status != StatusCode::OK {
            return None;
        }
        let view = view.json();
        let lease = &view["lease"];
        (view["owner"]["agentId"] == json!(agent.id.as_str())
            && lease["kind"] == "execution"
            && lease["agentId"] == json!(agent.id.as_str()))
        .then(|| json!({"leaseId": lease["leaseId"], "ownershipEpoch": lease["ownershipEpoch"]}))
    }

    /// An Evidence envelope signed by `agent`, re-signed with the `execution` of its current
    /// lease when `agent` owns the WorkItem and the payload names none (as `weft evidence add`
    /// does); any other envelope is returned as it is.
    pub(super) async fn bind_evidence(&self, agent: &Agent, envelope: &Envelope) -> Envelope {
        let Ok(payload) = BASE64.decode(&envelope.payload) else {
            return envelope.clone();
        };
        let Ok(mut evidence) = serde_json::from_slice::<Value>(&payload) else {
            return envelope.clone();
        };
        let signed_by_agent =
            Envelope::sign(&agent.key, weft_api::evidence::EVIDENCE_TYPE, &payload) == *envelope;
        if !signed_by_agent || evidence.get("execution").is_some() {
            return envelope.clone();
        }
        let Some(work_item) = evidence["workItemId"].as_str().map(str::to_owned) else {
            return envelope.clone();
        };
        match self.execution_of(agent, &work_item).await {
            Some(execution) => {
                evidence["execution"] = execution;
                Envelope::sign(
                    &agent.key,
                    weft_api::evidence::EVIDENCE_TYPE,
                    evidence.to_string().as_bytes(),
                )
            }
            None => envelope.clone(),
        }
    }
}

/// Passing Evidence by `agent` for criterion `ac-1` of `work_item` (in `group`, Mission
/// `mission`), of method `method`, citing `artifacts`: the one Evidence shape the work,
/// binding, token and revocation tests record.
pub(super) fn evidence_payload(
    agent: &Agent,
    group: &str,
    mission: &str,
    work_item: &str,
    method: &str,
    artifacts: &[&str],
) -> Value {
    json!({
        "subject": {"kind": "workItem", "id": work_item},
        "missionId": mission, "groupId": group, "workItemId": work_item, "criterion": "ac-1",
        "method": {"kind": method, "name": "unit", "version": "1"},
        "result": {"outcome": "pass", "summary": "ok", "metrics": {}},
        "producer": {"agentId": agent.id, "agentCardVersion": "1"},
        "timestamp": "2026-11-30T12:05:00Z", "artifacts": artifacts,
    })
}

/// `payload` signed by `agent` as Evidence, as a request body.
pub(super) fn signed_evidence(agent: &Agent, payload: &Value) -> Vec<u8> {
    let envelope = Envelope::sign(
        &agent.key,
        weft_api::evidence::EVIDENCE_TYPE,
        payload.to_string().as_bytes(),
    );
    serde_json::to_vec(&envelope).expect("json")
}

/// `coordinator` authorizes `work_item` in `mission` of g1 under `contract` (T2).
pub(super) async fn authorized(
    h: &Harness,
    coordinator: &Agent,
    mission: &str,
    work_item: &str,
    contract: Value,
) -> Value {
    super::work::ok(
        h,
        coordinator,
        "g1",
        "work.authorize",
        json!({"workItemId": work_item, "missionId": mission, "contract": contract}),
    )
    .await
}

/// `coordinator` offers `work_item` to `candidates` as `offer_id`, live for 600 s (T3).
pub(super) async fn offered(
    h: &Harness,
    coordinator: &Agent,
    work_item: &str,
    offer_id: &str,
    candidates: &[&str],
) -> Value {
    let offer = super::work::offer(work_item, offer_id, candidates, h, 600);
    super::work::ok(h, coordinator, "g1", "work.offer", offer).await
}

/// `agent` accepts `offer_id` of `work_item` (T4, or CON-5's re-acceptance); answers the body.
pub(super) async fn accepted(h: &Harness, agent: &Agent, work_item: &str, offer_id: &str) -> Value {
    let payload = json!({"workItemId": work_item, "offerId": offer_id});
    super::work::ok(h, agent, "g1", "work.accept_offer", payload).await
}
