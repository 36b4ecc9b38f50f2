//! Admission control (OFR-7/8/9): each reason in its order, and the commitment's arithmetic.

use chrono::TimeZone;

use super::*;

fn contract() -> WorkContract {
    serde_json::from_value(serde_json::json!({
        "objective": "summarise", "deliverables": [{"name": "report", "mediaType": "application/json", "schema": null}],
        "acceptanceCriteria": [{"id": "ac-1", "description": "exits 0", "requiredEvidence": ["automated_test"]}],
        "inputs": [], "dependsOn": [], "dependencyPolicy": "all_verified",
        "permissions": {"tools": ["python"], "data": [], "operations": []},
        "requiredCapabilities": [{"id": "cap.summarize", "version": "1"}],
        "deadline": "2026-12-01T01:00:00Z", "urgency": "normal", "businessImpact": "medium",
        "budgets": {"financial": 10.0, "tokens": 200000, "toolCalls": 500, "computeSeconds": 3600,
                    "wallClockSeconds": 7200, "sideEffects": 5},
        "retryPolicy": {"maxAttempts": 3, "backoffSeconds": 30, "deadline": null, "maxCost": 2.0},
        "risk": "low", "approvalRequired": false,
        "leases": {"offerSeconds": 600, "ownershipSeconds": 3600, "executionSeconds": 300, "blockedSeconds": 3600, "graceSeconds": 120},
        "childFailurePolicy": "block"
    }))
    .expect("the example contract")
}

fn capacity() -> Capacity {
    Capacity {
        slots: 2,
        running: 0,
        queued: 0,
        max_queued: 4,
        executors: vec![(
            Capability {
                id: "cap.summarize".into(),
                version: "1".into(),
            },
            600,
        )],
        allowed: Permissions {
            tools: vec!["python".into()],
            data: vec!["*".into()],
            operations: vec![],
        },
    }
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0)
        .single()
        .expect("an instant")
}

fn reason(a: Admission) -> DeclineReason {
    match a {
        Admission::Decline { reason, .. } => reason,
        Admission::Accept(c) => panic!("accepted: {c:?}"),
    }
}

fn spent() -> Budgets {
    Budgets::default()
}

#[test]
fn an_idle_worker_accepts_and_starts_now_ofr_7() {
    let c = contract();
    let offer = OfferFacts {
        contract: &c,
        dependency_lost: false,
        spent: &spent(),
    };
    let Admission::Accept(commitment) = admit(&offer, &capacity(), now()) else {
        panic!("declined")
    };
    assert_eq!(commitment.start_from, now());
    assert_eq!(commitment.start_to, now());
    assert_eq!(commitment.completion_at, now() + Duration::seconds(600));
    assert!(commitment.confidence > 0.85);
}

#[test]
fn work_ahead_moves_the_start_window_and_lowers_confidence() {
    let c = contract();
    let offer = OfferFacts {
        contract: &c,
        dependency_lost: false,
        spent: &spent(),
    };
    let mut cap = capacity();
    cap.running = 2;
    cap.queued = 1;
    // Two finishes are needed: one wave of 600 s.
    let Admission::Accept(commitment) = admit(&offer, &cap, now()) else {
        panic!("declined")
    };
    assert_eq!(commitment.start_from, now());
    assert_eq!(commitment.start_to, now() + Duration::seconds(600));
    assert_eq!(commitment.completion_at, now() + Duration::seconds(1200));
    assert!(commitment.confidence < 0.85);
}

#[test]
fn each_decline_carries_its_structured_reason_ofr_8_ofr_9() {
    let base = contract();
    let admit_with = |c: &WorkContract, cap: &Capacity, lost: bool, s: &Budgets| {
        admit(
            &OfferFacts {
                contract: c,
                dependency_lost: lost,
                spent: s,
            },
            cap,
            now(),
        )
    };
    let mut c = base.clone();
    c.required_capabilities[0].version = "2".into();
    assert_eq!(
        reason(admit_with(&c, &capacity(), false, &spent())),
        DeclineReason::Capability
    );
    let mut c = base.clone();
    c.permissions.tools.push("shell".into());
    assert_eq!(
        reason(admit_with(&c, &capacity(), false, &spent())),
        DeclineReason::Authorization
    );
    assert_eq!(
        reason(admit_with(&base, &capacity(), true, &spent())),
        DeclineReason::Dependency
    );
    let mut full = capacity();
    full.running = 2;
    full.queued = 2;
    assert_eq!(
        reason(admit_with(&base, &full, false, &spent())),
        DeclineReason::Capacity
    );
    let mut late = capacity();
    late.running = 2;
    late.queued = 1;
    late.executors[0].1 = 1800;
    // Starts after 1800 s, ends at 3600 s: exactly the deadline is fine; one more second is not.
    assert!(matches!(
        admit_with(&base, &late, false, &spent()),
        Admission::Accept(_)
    ));
    late.executors[0].1 = 1801;
    assert_eq!(
        reason(admit_with(&base, &late, false, &spent())),
        DeclineReason::Deadline
    );
    let mut c = base.clone();
    c.budgets.compute_seconds = 599;
    assert_eq!(
        reason(admit_with(&c, &capacity(), false, &spent())),
        DeclineReason::Budget
    );
    let mut used = spent();
    used.financial = 10.0;
    assert_eq!(
        reason(admit_with(&base, &capacity(), false, &used)),
        DeclineReason::Budget
    );
}
