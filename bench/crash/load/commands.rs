//! The Command writer of a burst and what happens to its charges across a kill: `lease.renew`
//! or a signed `work.progress` charging one token, each charge recorded before it is sent;
//! after the restart every charge whose answer a kill cut is sent again with the same bytes,
//! so the oracle can require each to be charged exactly once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng as _;
use rand::rngs::StdRng;
use weft_api::client::{Client, Error};
use weft_api::work::views::CommandAccepted;
use weft_api::work::{COMMAND_TYPE, Command, CommandType};
use weft_api::{Envelope, Id};

use super::super::record::{Answer, Charge, CommandAck, Record};
use super::super::server::World;
use super::Burst;

/// The Command writer: `lease.renew` or, half of the time at random, a `work.progress`
/// charging one token (a [`Charge`], recorded before it is sent so a kill cannot hide it).
pub(super) async fn commands(burst: Arc<Burst>, mut rng: StdRng) {
    let world = burst.world.clone();
    let renew = serde_json::json!({"workItemId": world.work_item});
    while !burst.stopped() {
        // Half of the Commands, at random, are charges.
        let answer = if rng.random_bool(0.5) {
            burst
                .client
                .command(
                    &world.signer(),
                    CommandType::LeaseRenew,
                    renew.clone(),
                    Some(&world.lease),
                    None,
                )
                .await
        } else {
            let envelope = charge(&world, &mut rng);
            let index = burst.note(|r| {
                r.charges.push(Charge {
                    envelope: envelope.clone(),
                    answer: Answer::Pending,
                    kill: burst.kill,
                });
                r.charges.len() - 1
            });
            let answer = burst.client.command_envelope(&world.group, &envelope).await;
            match &answer {
                Ok(_) => burst.note(|r| r.charges[index].answer = Answer::Acked),
                Err(Error::Api { .. }) => burst.note(|r| r.charges[index].answer = Answer::Refused),
                Err(_) => {}
            }
            answer
        };
        match answer {
            Ok(accepted) => {
                let ack = command_ack(accepted, burst.kill);
                burst.note(|r| r.commands.push(ack));
            }
            Err(error) => burst.failed("a Command", &error),
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..10))).await;
    }
}

/// After a restart: every charge whose answer a kill cut is sent again, the same bytes, so
/// that each is applied exactly once (the server replays the stored answer of one that
/// committed). A refusal is a loss (the charge was valid when it was first sent); a
/// transport error is tried again a few times, then left for the next restart.
pub(in super::super) async fn resend_charges(
    url: &str,
    world: &World,
    record: &Arc<Mutex<Record>>,
    kill: usize,
) -> Vec<String> {
    let client = Client::new(url, Some(world.token.clone()));
    let pending: Vec<(usize, usize, Envelope)> = {
        let record = record.lock().unwrap_or_else(|e| e.into_inner());
        let unacked = record.charges.iter().enumerate();
        unacked
            .filter(|(_, charge)| charge.answer == Answer::Pending)
            .map(|(index, charge)| (index, charge.kill, charge.envelope.clone()))
            .collect()
    };
    let mut losses = Vec::new();
    for (index, sent_in, envelope) in pending {
        for attempt in 0..5 {
            match client.command_envelope(&world.group, &envelope).await {
                Ok(accepted) => {
                    let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
                    record.charges[index].answer = Answer::Acked;
                    record.charges_resent += 1;
                    record.commands.push(command_ack(accepted, kill));
                }
                Err(Error::Api { status, body }) => {
                    let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
                    record.charges[index].answer = Answer::Refused;
                    losses.push(format!(
                        "after kill {kill}: charge {index} (sent in burst {sent_in}) re-sent: {status} {} ({})",
                        body.code, body.detail
                    ));
                }
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50 << attempt)).await;
                    continue;
                }
            }
            break;
        }
    }
    losses
}

/// What the oracle checks of an answered Command: its id and the Events it named.
pub(super) fn command_ack(accepted: CommandAccepted, kill: usize) -> CommandAck {
    CommandAck {
        command_id: accepted.command_id,
        events: accepted
            .events
            .into_iter()
            .map(|event| (event.sequence, event.kind))
            .collect(),
        kill,
    }
}

/// A signed `work.progress` of the campaign's WorkItem under its lease, charging one token.
fn charge(world: &World, rng: &mut StdRng) -> Envelope {
    let command = Command {
        command_id: Id::parse(
            "commandId",
            &format!("charge-{:032x}", rng.random::<u128>()),
        )
        .expect("hex is in the id alphabet"),
        kind: CommandType::WorkProgress,
        group_id: world.group.clone(),
        agent_id: world.agent.clone(),
        issued_at: chrono::Utc::now().fixed_offset(),
        session_epoch: world.session_epoch,
        membership_epoch: world.membership_epoch,
        lease_id: Some(world.lease.clone()),
        expected_revision: None,
        extensions: Vec::new(),
        payload: serde_json::json!({"workItemId": world.work_item, "phase": "crash campaign",
            "milestonesDone": [], "nextCheckpoint": null, "blockers": [],
            "estimate": {"completionAt": null, "confidence": 0.5}, "evidence": [],
            "usage": {"financial": 0.0, "tokens": 1, "toolCalls": 0, "computeSeconds": 0,
                      "wallClockSeconds": 0, "sideEffects": 0}}),
    };
    let bytes = serde_json::to_vec(&command).expect("a Command serializes");
    Envelope::sign(&world.key, COMMAND_TYPE, &bytes)
}
