//! Agent Cards and Presence (issue #47, SCH-11).
//!
//! **Cards.** [`Directory::register_card`] takes the card's DSSE envelope, checks it through
//! the one signature path (`verify_signed`: the signer is a registered, active Agent and the
//! payload names it), then requires that `publicKey` is the signing key (so the card says
//! which key it binds), that `issuedAt` is at most [`FUTURE_SKEW`] ahead of the clock and
//! later than the stored card's (a replayed old card cannot roll capabilities back; the same
//! envelope again is answered as before; a new one within 2 s of the last is `rate_limited`),
//! and stores it with its version, which signed
//! payloads must claim from then on. A card is read by its Agent, by the operator, and by a
//! coordinator of a Group the Agent is a member of; anyone else is told it does not exist.
//!
//! **Presence.** [`Directory::report_presence`] records a member's `{freeSlots,
//! capacityState}` in its session's Group, at most once per
//! [`PRESENCE_INTERVAL_SECONDS`] (else `rate_limited`, nothing changed), with `freeSlots` no
//! more than its card's `maxConcurrency` (or [`MAX_CONCURRENCY`] without a card). A
//! coordinator (or the operator) reads the Group's reports with each member's card summary.
//! Presence appends no Event: it is a hint, never authoritative.

use base64::Engine as _;
use chrono::Duration;
use weft_api::session::Role;
use weft_api::worker::card::{
    AgentCard, CapacityState, CardSummary, CardView, MAX_CONCURRENCY, PRESENCE_INTERVAL_SECONDS,
    Presence, PresenceReport, PresenceView,
};
use weft_api::{Envelope, ErrorCode, Id};

use crate::access::Session;
use crate::access::{Reader, membership};
use crate::acting::Acting;
use crate::clock::format_instant;
use crate::directory::handle::Directory;
use crate::error::{Error, reject};
use crate::rows;
use crate::signatures::AuthorityMay;

/// How far ahead of the clock a card's `issuedAt` may be.
const FUTURE_SKEW: Duration = Duration::minutes(5);

fn capacity_word(state: CapacityState) -> &'static str {
    match state {
        CapacityState::Available => "available",
        CapacityState::Busy => "busy",
        CapacityState::Saturated => "saturated",
        CapacityState::Offline => "offline",
    }
}

fn capacity_state(word: &str) -> Result<CapacityState, Error> {
    serde_json::from_value(serde_json::Value::String(word.to_owned())).map_err(Error::backend)
}

fn view(agent_id: &str, envelope: &str, registered_at: String) -> Result<CardView, Error> {
    let envelope: Envelope = serde_json::from_str(envelope).map_err(Error::backend)?;
    let card = card_of(&envelope)?;
    Ok(CardView {
        agent_id: agent_id.to_owned(),
        version: card.version,
        registered_at,
        envelope,
    })
}

/// The payload of a stored (already verified) card.
fn card_of(envelope: &Envelope) -> Result<AgentCard, Error> {
    let payload = weft_api::dsse::BASE64
        .decode(&envelope.payload)
        .map_err(Error::backend)?;
    serde_json::from_slice(&payload).map_err(Error::backend)
}

impl Directory<'_> {
    /// Registers or updates `agent_id`'s card: `(view, true)` when it changed something.
    pub async fn register_card(
        &self,
        agent_id: Id,
        envelope: Envelope,
    ) -> Result<(CardView, bool), Error> {
        let signed = self
            .0
            .verify_signed::<AgentCard>(&envelope, AuthorityMay::NotSign)
            .await?;
        if signed.signer != agent_id {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                format!("the card is signed by {}, not {agent_id}", signed.signer),
            ));
        }
        let card = signed.value.value().clone();
        let signed_by = signed.keyid.to_string();
        let now = self.0.clock.now();
        let issued = card.issued_at.to_utc();
        if issued > now + FUTURE_SKEW {
            return Err(reject(
                ErrorCode::BadRequest,
                "issuedAt is more than 5 minutes ahead of the server's clock",
            ));
        }
        let text = serde_json::to_string(&envelope).map_err(Error::backend)?;
        // The same card again is answered from a read: no write for a repeat.
        let (probe_agent, probe_text) = (agent_id.clone(), text.clone());
        let same = self
            .0
            .db
            .read(move |conn| {
                Ok(match rows::agents::card(conn, probe_agent.as_str())? {
                    Some((stored, _, at)) if stored == probe_text => {
                        Some(view(probe_agent.as_str(), &stored, at)?)
                    }
                    _ => None,
                })
            })
            .await?;
        if let Some(view) = same {
            return Ok((view, false));
        }
        let changed = self
            .0
            .db
            .write(move |txn| {
                // The card names the key that signed it, and that key is the Agent's current one
                // now, at the commit (a rotation or deactivation since the check refuses it):
                // read under the Agent's row, which a rotation or deactivation through another
                // server takes too (PostgreSQL; read before it, a card the retired key signed
                // was written back after the rotation had ended it). Two cards take turns here.
                rows::agents::lock(txn, agent_id.as_str())?;
                let key = rows::agents::public_key(txn, agent_id.as_str())?.unwrap_or_default();
                let active = rows::agents::deactivated_at(txn, agent_id.as_str())?
                    .is_some_and(|at| at.is_none());
                let current = rows::agents::keyid(txn, agent_id.as_str())?;
                if !active
                    || current != signed_by
                    || card.public_key != weft_api::dsse::BASE64.encode(&key)
                {
                    return Err(reject(
                        ErrorCode::ProducerMismatch,
                        "publicKey is not the Agent's current key that signed the card",
                    ));
                }
                if let Some((stored, stored_ms, registered_at)) =
                    rows::agents::card(txn, agent_id.as_str())?
                {
                    if stored == text {
                        return Ok((
                            view(agent_id.as_str(), &stored, registered_at)?,
                            false,
                            false,
                        ));
                    }
                    if issued.timestamp_millis() <= stored_ms {
                        return Err(reject(
                            ErrorCode::Conflict,
                            "a card issued at the same time or later is registered",
                        ));
                    }
                    // One new card per Agent per interval: a card is a row written, not a feed.
                    let last = chrono::DateTime::parse_from_rfc3339(&registered_at)
                        .map_err(Error::backend)?;
                    if now - last.to_utc() < Duration::seconds(PRESENCE_INTERVAL_SECONDS) {
                        return Err(reject(
                            ErrorCode::RateLimited,
                            format!("a new card at most once per {PRESENCE_INTERVAL_SECONDS} s"),
                        ));
                    }
                }
                let before = rows::agents::record(txn, agent_id.as_str())?.map(|r| r.0);
                let at = format_instant(now);
                rows::agents::set_card(
                    txn,
                    agent_id.as_str(),
                    &text,
                    issued.timestamp_millis(),
                    &at,
                    &card.version,
                    card.max_concurrency,
                )?;
                let moved = before.as_deref() != Some(card.version.as_str());
                Ok((view(agent_id.as_str(), &text, at)?, true, moved))
            })
            .await?;
        let (view, created, version_moved) = changed;
        if version_moved {
            // The new version is what signed payloads must claim from now on (`keys.rs`); a
            // card that keeps its version leaves every cache alone.
            self.0.auth_changed();
        }
        Ok((view, created))
    }

    /// `agent_id`'s card, for `reader`: its Agent, the operator, or a coordinator of a Group
    /// it is a member of; `not_found` for anyone else and for an Agent without a card.
    pub async fn card(
        &self,
        agent_id: Id,
        reader: Reader,
        roles: Vec<Role>,
    ) -> Result<CardView, Error> {
        self.0
            .db
            .read(move |conn| {
                let allowed = match &reader {
                    Reader::Admin => true,
                    Reader::Agent {
                        agent_id: caller,
                        group_id,
                        ..
                    } => {
                        caller == &agent_id
                            || roles.contains(&Role::Coordinator)
                                && membership(conn, group_id.as_str(), agent_id.as_str())?.is_some()
                    }
                };
                let found = rows::agents::card(conn, agent_id.as_str())?;
                match found.filter(|_| allowed) {
                    Some((text, _, registered_at)) => view(agent_id.as_str(), &text, registered_at),
                    None => Err(reject(
                        ErrorCode::NotFound,
                        format!("no card for {agent_id}"),
                    )),
                }
            })
            .await
    }

    /// Records `session`'s Presence in its Group.
    pub async fn report_presence(
        &self,
        group_id: Id,
        session: &Session,
        report: PresenceReport,
    ) -> Result<(), Error> {
        if session.group_id != group_id {
            return Err(reject(
                ErrorCode::Forbidden,
                "a session reports Presence in its own Group only",
            ));
        }
        report.validate()?;
        let agent_id = session.agent_id.clone();
        let now = self.0.clock.now();
        let schedules = serde_json::to_string(&report.schedules).map_err(Error::backend)?;
        let ms = now.timestamp_millis();
        let too_soon = move |last: Option<i64>| {
            if last.is_some_and(|last| ms - last < PRESENCE_INTERVAL_SECONDS * 1000) {
                return Err(reject(
                    ErrorCode::RateLimited,
                    format!("Presence at most once per {PRESENCE_INTERVAL_SECONDS} s"),
                ));
            }
            Ok(())
        };
        // The rate first, from a read: a flood of early reports never reaches the writer.
        let (g, a) = (group_id.clone(), agent_id.clone());
        too_soon(
            self.0
                .db
                .read(move |conn| rows::presence::reported_ms(conn, g.as_str(), a.as_str()))
                .await?,
        )?;
        let acting = Acting::session(session);
        let clock = std::sync::Arc::clone(&self.0.clock);
        self.0
            .db
            .write(move |txn| {
                // The session is still live when the job runs (a Membership removed meanwhile).
                acting.check(txn, &format_instant(clock.now()))?;
                too_soon(rows::presence::reported_ms(
                    txn,
                    group_id.as_str(),
                    agent_id.as_str(),
                )?)?;
                // DIS-2: a report discloses only the reporter's own WorkItems of this Group.
                for schedule in &report.schedules {
                    let owned = rows::work_items::owner_in(
                        txn,
                        schedule.work_item_id.as_str(),
                        group_id.as_str(),
                    )?;
                    if owned.as_deref() != Some(agent_id.as_str()) {
                        return Err(reject(
                            ErrorCode::Forbidden,
                            format!(
                                "{} is not a WorkItem of {group_id} that {agent_id} owns",
                                schedule.work_item_id
                            ),
                        ));
                    }
                }
                let most = rows::agents::max_concurrency(txn, agent_id.as_str())?
                    .unwrap_or(MAX_CONCURRENCY);
                if report.free_slots > most {
                    return Err(reject(
                        ErrorCode::BadRequest,
                        format!("freeSlots is more than the card's maxConcurrency ({most})"),
                    ));
                }
                let stored = rows::presence::set(
                    txn,
                    group_id.as_str(),
                    agent_id.as_str(),
                    &rows::presence::Stored {
                        free_slots: report.free_slots,
                        capacity_state: capacity_word(report.capacity_state),
                        reported_ms: ms,
                        reported_at: &format_instant(now),
                        schedules: &schedules,
                    },
                    ms - PRESENCE_INTERVAL_SECONDS * 1000,
                )?;
                // Another server stored a report since the read above (several servers).
                if stored { Ok(()) } else { too_soon(Some(ms)) }
            })
            .await
    }

    /// Group `group_id`'s Presence reports with each reporter's card summary: coordinators of
    /// the Group and the operator only.
    pub async fn presence(
        &self,
        group_id: Id,
        reader: Reader,
        roles: Vec<Role>,
    ) -> Result<Presence, Error> {
        if !reader.in_group(group_id.as_str())
            || reader.agent().is_some() && !roles.contains(&Role::Coordinator)
        {
            return Err(reject(
                ErrorCode::Forbidden,
                "Presence is read by the Group's coordinators",
            ));
        }
        self.0
            .db
            .read(move |conn| {
                let mut agents = Vec::new();
                for (agent_id, free_slots, state, reported_at, schedules) in
                    rows::presence::of_group(conn, group_id.as_str())?
                {
                    // Only current members of the Group who are still active.
                    let active = rows::agents::deactivated_at(conn, &agent_id)?
                        .is_some_and(|at| at.is_none());
                    if !active || membership(conn, group_id.as_str(), &agent_id)?.is_none() {
                        continue;
                    }
                    let card = match rows::agents::card(conn, &agent_id)? {
                        Some((text, _, _)) => {
                            let envelope: Envelope =
                                serde_json::from_str(&text).map_err(Error::backend)?;
                            let card = card_of(&envelope)?;
                            Some(CardSummary {
                                version: card.version,
                                capabilities: card.capabilities,
                                max_concurrency: card.max_concurrency,
                            })
                        }
                        None => None,
                    };
                    agents.push(PresenceView {
                        agent_id,
                        free_slots,
                        capacity_state: capacity_state(&state)?,
                        reported_at,
                        card,
                        schedules: serde_json::from_str(&schedules).map_err(Error::backend)?,
                    });
                }
                Ok(Presence { agents })
            })
            .await
    }
}
