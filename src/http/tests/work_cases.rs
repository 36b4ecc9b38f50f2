//! The work engine at the `Store`, without HTTP: typed `weft_api::work::Command` values signed
//! and run through `Store::execute_command` from one case table (`(rule and name, setup,
//! command, expected answer)`), stamped per backend. Each case starts from a fresh store
//! brought to its setup by accepted Commands of the same kind; a refused Command must answer
//! its exact code and change nothing (every table's rows hash the same before and after), an
//! accepted one must append its transition's typed Event first. The harness (`harness.rs`) only
//! registers the Agents and opens their sessions.

use serde_json::{Value, json};
use weft_api::work::events::WorkEventKind;
use weft_api::work::views::CommandAccepted;
use weft_api::work::{COMMAND_TYPE, Command, CommandType};
use weft_api::{Envelope, ErrorCode, Id};

use super::harness::*;
use super::work::{basis, group};
use super::work_setup::contract;

/// How far the case's WorkItem `wi-1` (in Mission `m1` of g1) got before its Command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    /// Authorized by the coordinator (T2): `open`.
    Open,
    /// Offered to `w1` as `o-1` (T3): `offered`.
    Offered,
    /// `w1` accepted `o-1` (T4): `queued`, owned by `w1`.
    Queued,
    /// `w1` started (T7): `active` under its Execution Lease.
    Active,
    /// Cancelled by the coordinator (T14): `cancelled`.
    Cancelled,
}

/// Who sends the case's Command: the coordinator `c1`, the worker `w1` (the candidate, then
/// the owner) or the other worker `w2` (neither).
#[derive(Clone, Copy, Debug)]
enum Who {
    Coordinator,
    Owner,
    Other,
}

/// What the case expects.
#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Refused with this code, nothing changed.
    Refused(ErrorCode),
    /// Accepted, its first Event of this kind.
    Accepted(WorkEventKind),
}

/// One row: the rule it checks and what it shows, the setup, the sender, the Command type and
/// payload, the lease it quotes (the current one, or none), its `expectedRevision`, and the
/// answer.
struct Case {
    name: &'static str,
    setup: Setup,
    who: Who,
    kind: CommandType,
    payload: fn(&World) -> Value,
    quotes_lease: bool,
    expected_revision: Option<u64>,
    expect: Expect,
}

/// A store brought to a case's setup.
struct World {
    h: Harness,
    coordinator: Agent,
    w1: Agent,
    w2: Agent,
    /// The current Execution Lease, once `w1` started.
    lease: Option<Id>,
}

impl World {
    fn agent(&self, who: Who) -> &Agent {
        match who {
            Who::Coordinator => &self.coordinator,
            Who::Owner => &self.w1,
            Who::Other => &self.w2,
        }
    }

    /// An offer of `wi-1` as `offer_id` to `candidates`, live for `seconds` from now.
    fn offer(&self, offer_id: &str, candidates: &[&str], seconds: i64) -> Value {
        let expires = (weft_storage::Clock::now(&self.h.clock)
            + chrono::Duration::seconds(seconds))
        .to_rfc3339();
        json!({"workItemId": "wi-1", "offerId": offer_id, "candidates": candidates,
               "expiresAt": expires, "selectionBasis": basis()})
    }

    /// `kind` with `payload` as `who`, typed, for its current session.
    async fn command(
        &self,
        who: Who,
        kind: CommandType,
        payload: Value,
        lease_id: Option<Id>,
        expected_revision: Option<u64>,
    ) -> Command {
        let agent = self.agent(who);
        let session = self
            .h
            .store
            .sessions()
            .authenticate(&agent.token)
            .await
            .expect("live session");
        Command {
            command_id: id(&format!("cmd-{}", uuid::Uuid::now_v7())),
            kind,
            group_id: id("g1"),
            agent_id: agent.id.clone(),
            issued_at: weft_storage::Clock::now(&self.h.clock).fixed_offset(),
            session_epoch: session.session_epoch,
            membership_epoch: session.membership_epoch,
            lease_id,
            expected_revision,
            extensions: Vec::new(),
            payload,
        }
    }

    /// Signs `command` as `who` and runs it through the Store.
    async fn execute(
        &self,
        who: Who,
        command: &Command,
    ) -> Result<CommandAccepted, weft_storage::Error> {
        let agent = self.agent(who);
        let session = self
            .h
            .store
            .sessions()
            .authenticate(&agent.token)
            .await
            .expect("live session");
        let bytes = serde_json::to_vec(command).expect("a Command serialises");
        let envelope = Envelope::sign(&agent.key, COMMAND_TYPE, &bytes);
        self.h
            .store
            .work()
            .execute_command(id("g1"), envelope, &session)
            .await
            .map(weft_storage::Accepted::into_api)
    }

    /// Runs a setup Command, which must be accepted.
    async fn accepted(&self, who: Who, kind: CommandType, payload: Value) -> CommandAccepted {
        let command = self.command(who, kind, payload, None, None).await;
        self.execute(who, &command)
            .await
            .unwrap_or_else(|e| panic!("setup {}: {e}", kind.as_str()))
    }
}

fn id(text: &str) -> Id {
    Id::parse("id", text).expect("a test id")
}

/// A fresh store with `wi-1` brought to `setup`.
async fn world(kind: Kind, setup: Setup) -> World {
    let h = harness(kind).await;
    let (coordinator, w1, w2) = group(&h).await;
    let mut world = World {
        h,
        coordinator,
        w1,
        w2,
        lease: None,
    };
    world
        .accepted(
            Who::Coordinator,
            CommandType::WorkAuthorize,
            json!({"workItemId": "wi-1", "missionId": "m1", "contract": contract(&[])}),
        )
        .await;
    if setup == Setup::Cancelled {
        world
            .accepted(
                Who::Coordinator,
                CommandType::WorkCancel,
                json!({"workItemId": "wi-1", "reason": "no longer needed"}),
            )
            .await;
        return world;
    }
    if setup == Setup::Open {
        return world;
    }
    let offer = world.offer("o-1", &["w1"], 600);
    world
        .accepted(Who::Coordinator, CommandType::WorkOffer, offer)
        .await;
    if setup == Setup::Offered {
        return world;
    }
    world
        .accepted(
            Who::Owner,
            CommandType::WorkAcceptOffer,
            json!({"workItemId": "wi-1", "offerId": "o-1"}),
        )
        .await;
    if setup == Setup::Queued {
        return world;
    }
    let started = world
        .accepted(
            Who::Owner,
            CommandType::WorkStart,
            json!({"workItemId": "wi-1"}),
        )
        .await;
    let lease = started.state["lease"]["leaseId"]
        .as_str()
        .expect("a started WorkItem has its lease");
    world.lease = Some(id(lease));
    world
}

fn wi() -> Value {
    json!({"workItemId": "wi-1"})
}

/// The case table. Each name leads with the rule it checks.
fn cases() -> Vec<Case> {
    use CommandType as C;
    use Expect::{Accepted, Refused};
    use Setup as S;
    let case = |name, setup, who, kind, payload: fn(&World) -> Value, expect| Case {
        name,
        setup,
        who,
        kind,
        payload,
        quotes_lease: false,
        expected_revision: None,
        expect,
    };
    vec![
        // The role comes before the state (GAP-5).
        case(
            "GAP-5: a worker does not offer",
            S::Open,
            Who::Other,
            C::WorkOffer,
            |w| w.offer("o-2", &["w2"], 600),
            Refused(ErrorCode::Forbidden),
        ),
        case(
            "GAP-5: a worker does not unblock",
            S::Open,
            Who::Owner,
            C::WorkUnblock,
            |_| wi(),
            Refused(ErrorCode::Forbidden),
        ),
        // The aggregate: another id answers as unknown (DESIGN §10).
        case(
            "SM-3: an unknown WorkItem",
            S::Open,
            Who::Coordinator,
            C::WorkOffer,
            |w| {
                let mut offer = w.offer("o-2", &["w1"], 600);
                offer["workItemId"] = json!("wi-none");
                offer
            },
            Refused(ErrorCode::UnknownWorkItem),
        ),
        Case {
            expected_revision: Some(7),
            ..case(
                "SM-3: a stale expectedRevision",
                S::Open,
                Who::Coordinator,
                C::WorkOffer,
                |w| w.offer("o-2", &["w1"], 600),
                Refused(ErrorCode::StaleRevision),
            )
        },
        // The table (SM-2): what is not a transition from the state.
        case(
            "SM-2: no start from open",
            S::Open,
            Who::Owner,
            C::WorkStart,
            |_| wi(),
            Refused(ErrorCode::IllegalTransition),
        ),
        case(
            "SM-2: no unblock of an open WorkItem",
            S::Open,
            Who::Coordinator,
            C::WorkUnblock,
            |_| wi(),
            Refused(ErrorCode::IllegalTransition),
        ),
        case(
            "SM-4: nothing moves a cancelled WorkItem",
            S::Cancelled,
            Who::Coordinator,
            C::WorkOffer,
            |w| w.offer("o-2", &["w1"], 600),
            Refused(ErrorCode::IllegalTransition),
        ),
        case(
            "SM-2, T12: no accept_result before a submission",
            S::Active,
            Who::Coordinator,
            C::WorkAcceptResult,
            |_| wi(),
            Refused(ErrorCode::IllegalTransition),
        ),
        case(
            "SM-2, T8: no checkpoint while queued",
            S::Queued,
            Who::Owner,
            C::WorkCheckpoint,
            |_| json!({"workItemId": "wi-1", "checkpoint": {}}),
            Refused(ErrorCode::IllegalTransition),
        ),
        case(
            "SM-2, T2: an existing WorkItem is not authorized again",
            S::Open,
            Who::Coordinator,
            C::WorkAuthorize,
            |_| json!({"workItemId": "wi-1", "missionId": "m1", "contract": contract(&[])}),
            Refused(ErrorCode::IllegalTransition),
        ),
        // Offers (OFR): the candidate's standing.
        case(
            "OFR-5: only a candidate accepts",
            S::Offered,
            Who::Other,
            C::WorkAcceptOffer,
            |_| json!({"workItemId": "wi-1", "offerId": "o-1"}),
            Refused(ErrorCode::Forbidden),
        ),
        case(
            "OFR-5, T4: an unknown offer",
            S::Offered,
            Who::Owner,
            C::WorkAcceptOffer,
            |_| json!({"workItemId": "wi-1", "offerId": "o-none"}),
            Refused(ErrorCode::NotFound),
        ),
        case(
            "OFR-8: a decline of an unknown offer",
            S::Offered,
            Who::Owner,
            C::WorkDeclineOffer,
            |_| json!({"workItemId": "wi-1", "offerId": "o-none", "reason": "capacity"}),
            Refused(ErrorCode::NotFound),
        ),
        // `work.offer`'s own checks (commands/offer.rs).
        case(
            "T3: an offer that already expired",
            S::Open,
            Who::Coordinator,
            C::WorkOffer,
            |w| w.offer("o-2", &["w1"], -1),
            Refused(ErrorCode::InvalidCommand),
        ),
        case(
            "CTX-5: a candidate that is not a member",
            S::Open,
            Who::Coordinator,
            C::WorkOffer,
            |w| w.offer("o-2", &["nobody"], 600),
            Refused(ErrorCode::NotAMember),
        ),
        case(
            "T3: an offer id is used once",
            S::Offered,
            Who::Coordinator,
            C::WorkOffer,
            |w| w.offer("o-1", &["w1"], 600),
            Refused(ErrorCode::Conflict),
        ),
        // The owner's Commands (LSE-4).
        case(
            "LSE-3: only the owner renews",
            S::Active,
            Who::Other,
            C::LeaseRenew,
            |_| wi(),
            Refused(ErrorCode::Forbidden),
        ),
        case(
            "LSE-4: a renewal quotes the current lease",
            S::Active,
            Who::Owner,
            C::LeaseRenew,
            |_| wi(),
            Refused(ErrorCode::StaleLease),
        ),
        Case {
            quotes_lease: true,
            ..case(
                "LSE-3: the owner renews its current lease",
                S::Active,
                Who::Owner,
                C::LeaseRenew,
                |_| wi(),
                Accepted(WorkEventKind::LeaseRenewed),
            )
        },
        // Child Missions (commands/create_child.rs).
        case(
            "T15: a child Mission's id is new",
            S::Active,
            Who::Coordinator,
            C::MissionCreateChild,
            |_| {
                json!({"workItemId": "wi-1", "childMissionId": "m1", "title": "child",
                       "childFailurePolicy": "block"})
            },
            Refused(ErrorCode::Conflict),
        ),
        // Accepted transitions append their typed Event (the transition's `event`).
        case(
            "T4: the candidate accepts",
            S::Offered,
            Who::Owner,
            C::WorkAcceptOffer,
            |_| json!({"workItemId": "wi-1", "offerId": "o-1"}),
            Accepted(WorkEventKind::WorkOfferAccepted),
        ),
        case(
            "T7: the owner starts",
            S::Queued,
            Who::Owner,
            C::WorkStart,
            |_| wi(),
            Accepted(WorkEventKind::WorkStarted),
        ),
        case(
            "T14: the coordinator cancels live work",
            S::Active,
            Who::Coordinator,
            C::WorkCancel,
            |_| json!({"workItemId": "wi-1", "reason": "no longer needed"}),
            Accepted(WorkEventKind::WorkCancelled),
        ),
    ]
}

/// Runs one case on a fresh store of `kind`; answers what went wrong, if anything.
async fn run_case(kind: Kind, case: &Case) -> Option<String> {
    let world = world(kind, case.setup).await;
    let lease = case.quotes_lease.then(|| world.lease.clone()).flatten();
    let command = world
        .command(
            case.who,
            case.kind,
            (case.payload)(&world),
            lease,
            case.expected_revision,
        )
        .await;
    let before = world.h.fingerprint().await;
    let answer = world.execute(case.who, &command).await;
    match (case.expect, answer) {
        (Expect::Refused(code), Err(error)) if error.code() == code => {
            let after = world.h.fingerprint().await;
            (before != after).then(|| format!("{}: refused, but something changed", case.name))
        }
        (Expect::Accepted(event), Ok(accepted))
            if accepted.events.first().map(|e| e.kind.as_str()) == Some(event.as_str()) =>
        {
            None
        }
        (expect, answer) => Some(format!(
            "{}: expected {expect:?}, got {:?}",
            case.name,
            answer
                .map(|a| a.events.into_iter().map(|e| e.kind).collect::<Vec<_>>())
                .map_err(|e| (e.code(), e.to_string()))
        )),
    }
}

backends!(
    /// Every row of the case table (SM-2, SM-3, SM-4, GAP-5, OFR-5, OFR-8, T2–T15, LSE-3,
    /// LSE-4, CTX-5) through `Store::execute_command`: each refusal answers its exact code and
    /// changes nothing, each acceptance appends its transition's Event. Every disagreeing row
    /// is listed, not only the first.
    async fn work_commands_follow_the_case_table(kind: Kind) {
        let mut wrong = Vec::new();
        for case in cases() {
            if let Some(why) = run_case(kind, &case).await {
                wrong.push(why);
            }
        }
        assert!(wrong.is_empty(), "\n{}", wrong.join("\n"));
    }
);
