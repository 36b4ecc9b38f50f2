//! Context Packages (DESIGN §11): `weft context publish` (signed with the agent key, the next
//! version of the package unless told), `show`, `versions`, `forward`, and `verify`, which
//! re-checks a version without trusting the server's word: the payload hashes to its id, the
//! signature is the generator's, and the cited Event range lies within the Group's log,
//! chaining on to the head the server's authority key signed (CTX-1).

use anyhow::{Context as _, bail};
use base64::Engine as _;
use weft_api::client::Client;
use weft_api::context::{CONTEXT_TYPE, ContextPackage, ContextRecord, EventRange, ForwardRequest};
use weft_api::dsse::BASE64;
use weft_api::manifest::Producer;
use weft_api::{ArtifactId, Id, KeyId};

use super::args::{ClientArgs, ContextAction};

/// `weft context …`.
pub(super) async fn run(client: &ClientArgs, action: ContextAction) -> anyhow::Result<()> {
    let (session, api) = client.session()?;
    match action {
        ContextAction::Publish {
            package,
            mission,
            work_item,
            from,
            to,
            artifacts,
            decisions,
            constraints,
            questions,
            json,
        } => {
            let key = client.key()?;
            let package_id = Id::parse("package", &package)?;
            client.reconcile_first().await?;
            // The next version of the package, naming the latest as previous (CTX-4).
            let latest = match api.context(&package_id, None).await {
                Ok(record) => Some(record),
                Err(error) if error.code() == Some(weft_api::ErrorCode::NotFound) => None,
                Err(error) => return Err(error.into()),
            };
            let payload = ContextPackage {
                package_id,
                version: latest.as_ref().map_or(1, |r| r.package.version + 1),
                previous: latest.as_ref().map(|r| r.context_id),
                group_id: Id::parse("group", &session.group_id)?,
                mission_id: Id::parse("mission", &mission)?,
                work_item_id: work_item
                    .as_deref()
                    .map(|w| Id::parse("work item", w))
                    .transpose()?,
                source_events: EventRange { from, to },
                artifacts: artifacts
                    .iter()
                    .map(|a| ArtifactId::parse(a))
                    .collect::<Result<_, _>>()?,
                decisions,
                constraints,
                open_questions: questions,
                generator: Producer {
                    agent_id: Id::parse("agentId", &session.agent_id)?,
                    agent_card_version: session.agent_card_version.clone(),
                },
                created_at: chrono::Utc::now().fixed_offset(),
            };
            let answer = api.publish_context(&key, &payload).await?;
            if json {
                println!("{}", serde_json::to_string(&answer)?);
                return Ok(());
            }
            eprintln!("version {} at sequence {}", answer.version, answer.sequence);
            println!("{}", answer.context_id);
        }
        ContextAction::Show {
            package,
            version,
            json,
        } => {
            let record = api
                .context(&Id::parse("package", &package)?, version)
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&record)?);
            } else {
                print_record(&record);
            }
        }
        ContextAction::Versions { package } => {
            let versions = api
                .context_versions(&Id::parse("package", &package)?)
                .await?;
            for record in &versions.versions {
                let package = &record.package;
                println!(
                    "{:>4}  {}  events {}..={}  by {}  sequence {}",
                    package.version,
                    record.context_id,
                    package.source_events.from,
                    package.source_events.to,
                    package.generator.agent_id,
                    record.sequence
                );
            }
        }
        ContextAction::Forward {
            package,
            to_group,
            version,
            json,
        } => {
            let request = ForwardRequest {
                to_group_id: Id::parse("group", &to_group)?,
                version,
            };
            client.reconcile_first().await?;
            let answer = api
                .forward_context(&Id::parse("package", &package)?, &request)
                .await?;
            if json {
                println!("{}", serde_json::to_string(&answer)?);
                return Ok(());
            }
            println!(
                "forwarded {} from {} (sequence {}) to {} (sequence {})",
                answer.context_id,
                answer.from_group_id,
                answer.from_sequence,
                answer.to_group_id,
                answer.to_sequence
            );
        }
        ContextAction::Verify {
            package,
            version,
            generator_key,
            authority_key,
        } => {
            let own = client.key().ok().map(|key| key.verifying_key());
            verify(
                &api,
                &Id::parse("package", &package)?,
                version,
                generator_key.as_deref(),
                own,
                authority_key.as_deref(),
            )
            .await?;
        }
    }
    Ok(())
}

fn print_record(record: &ContextRecord) {
    let package = &record.package;
    println!(
        "context   {} (package {} version {})",
        record.context_id, package.package_id, package.version
    );
    println!(
        "previous  {}",
        package
            .previous
            .map_or("none".to_owned(), |p| p.to_string())
    );
    println!(
        "group     {}  mission {}  work item {}",
        package.group_id,
        package.mission_id,
        package.work_item_id.as_ref().map_or("-", |w| w.as_str())
    );
    if let Some(from) = &record.forwarded_from {
        println!("forwarded from {from} into {}", record.group_id);
    }
    println!(
        "events    {}..={}",
        package.source_events.from, package.source_events.to
    );
    println!(
        "generator {} (card {}) at {}",
        package.generator.agent_id,
        package.generator.agent_card_version,
        super::table::when(&package.created_at)
    );
    for artifact in &package.artifacts {
        println!("cites     {artifact}");
    }
    for (label, items) in [
        ("decision", &package.decisions),
        ("constraint", &package.constraints),
        ("question", &package.open_questions),
    ] {
        for item in items {
            println!("{label:<10}{item}");
        }
    }
}

/// `weft context verify`.
async fn verify(
    api: &Client,
    package_id: &Id,
    version: Option<u64>,
    generator_key: Option<&str>,
    own_key: Option<ed25519_dalek::VerifyingKey>,
    authority_key: Option<&str>,
) -> anyhow::Result<()> {
    let record = api.context(package_id, version).await?;
    // 1. The payload is what the id names, and parses as a package.
    let payload = BASE64
        .decode(&record.envelope.payload)
        .context("payload is not base64")?;
    if ArtifactId::of(&payload) != record.context_id {
        bail!(
            "the payload does not hash to the context id {}",
            record.context_id
        );
    }
    let package = ContextPackage::parse(&payload)?;
    if package != record.package {
        bail!("the served package differs from its signed payload");
    }
    println!("ok: payload hashes to {}", record.context_id);
    // 2. The signature: against the generator key given, or this agent's own key.
    let keyid = record.envelope.signer_keyid()?;
    let key = match generator_key {
        Some(text) => Some(
            weft_api::dsse::parse_public_key(text.trim())
                .context("--generator-key is not a base64 Ed25519 key")?,
        ),
        None => own_key.filter(|key| KeyId::of(key) == keyid),
    };
    match key {
        Some(key) => {
            if KeyId::of(&key) != keyid {
                bail!("signed with {keyid}, not the generator key given");
            }
            record
                .envelope
                .verify(CONTEXT_TYPE, &key)
                .map_err(|e| anyhow::anyhow!("bad signature: {e}"))?;
            println!("ok: signed by {keyid} ({})", package.generator.agent_id);
        }
        None => println!(
            "signature: keyid {keyid}, not checked (pass --generator-key with {}'s public key)",
            package.generator.agent_id
        ),
    }
    // 3. The range lies within the log (CTX-1): its Events chain, and chain on to the head
    // the authority signed.
    let range = package.source_events;
    let cited = match api.context_events(package_id, version).await {
        Ok(cited) => cited,
        // Compacted into signed snapshots: the whole chain, archives included, is checked
        // against the signed snapshot references and checkpoint, which must reach the range.
        Err(error) if error.code() == Some(weft_api::ErrorCode::CursorTooOld) => {
            let group = package.group_id.as_str();
            let verified = super::events::verify(api, group, authority_key, None, None).await?;
            verified.say();
            let checkpoint = verified.checkpoint;
            if checkpoint < range.to {
                bail!(
                    "the signed log of {group} ends at {checkpoint}, before the cited {}",
                    range.to
                );
            }
            println!(
                "ok: events {}..={} of {group} lie in history verified through its signed snapshots",
                range.from, range.to
            );
            return Ok(());
        }
        Err(error) => return Err(error.into()),
    };
    let Some(first) = cited.events.first() else {
        bail!(
            "the server returned none of the cited Events {}..={}",
            range.from,
            range.to
        );
    };
    let (sequence, head) =
        weft_api::event::verify_chain(range.from - 1, first.prev_hash(), &cited.events)
            .map_err(|problem| anyhow::anyhow!("cited range broken: {problem}"))?;
    if sequence != range.to {
        bail!("the cited range ends at {sequence}, not {}", range.to);
    }
    let authority = super::events::authority_keys(api, authority_key).await?;
    let signed = super::events::trusted_checkpoint(api, &cited.group_id, &authority).await?;
    let at = cited
        .events
        .iter()
        .find(|e| e.sequence() == signed.checkpoint.sequence)
        .map(|e| e.hash());
    let (_, _, at_checkpoint) = super::events::chain_onwards(
        api,
        &cited.group_id,
        (sequence, head),
        (&signed.checkpoint, true),
        at,
        "chain broken after the range",
        (None, None),
    )
    .await?;
    match at_checkpoint {
        Some(hash) if hash == signed.checkpoint.hash => {
            println!(
                "ok: events {}..={} of {} chain to the signed checkpoint at sequence {}",
                range.from, range.to, cited.group_id, signed.checkpoint.sequence
            );
            Ok(())
        }
        _ => bail!(
            "the cited range does not chain to the signed checkpoint at {}",
            signed.checkpoint.sequence
        ),
    }
}
