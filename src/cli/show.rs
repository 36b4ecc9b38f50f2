//! `weft show`: an artifact's digests and every manifest recorded for it, each with its
//! signature verified here, not taken on the server's word.
//!
//! A manifest is checked against a key this command can trust without asking the server for
//! it: this agent's own key (from `agent.key`) for what it produced, a producer key the caller
//! passes (`--producer-key`), or the authority key (pinned with `--authority-key`, else the
//! one the server serves) for server-signed records. Any other manifest is checked against the
//! key the Authority registered for its key id (`GET /v1/keys/{keyid}`, issue #50), and says
//! so: that key is the server's word, where the ones above are not; a key registered to
//! another Agent than the manifest's producer is `INVALID`, and a key id the server does not
//! know prints `not verified: <why>` rather than a false "ok".

use ed25519_dalek::VerifyingKey;
use weft_api::dsse::parse_public_key;
use weft_api::views::ManifestRecord;
use weft_api::{Digest, KeyId};

use super::args::ClientArgs;

/// The keys `show` may verify with, each with whose it is.
struct Trusted {
    keys: Vec<(KeyId, VerifyingKey, String)>,
    /// Keys the Authority registered, with the Agent it registered each for.
    registered: Vec<(KeyId, String)>,
}

impl Trusted {
    fn find(&self, keyid: &KeyId) -> Option<&(KeyId, VerifyingKey, String)> {
        self.keys.iter().find(|(id, _, _)| id == keyid)
    }
}

/// `weft show`.
pub(super) async fn show(
    client: &ClientArgs,
    digest: &str,
    producer_keys: &[String],
    authority_key: Option<&str>,
    json: bool,
) -> anyhow::Result<()> {
    let (session, api) = client.session()?;
    let view = api.artifact(&Digest::parse(digest)?).await?;
    let mut trusted = Trusted {
        keys: Vec::new(),
        registered: Vec::new(),
    };
    if let Ok(own) = client.key() {
        let own = own.verifying_key();
        let whose = format!("agent {} (this agent's key)", session.agent_id);
        trusted.keys.push((KeyId::of(&own), own, whose));
    }
    for text in producer_keys {
        let key = parse_public_key(text)
            .map_err(|error| anyhow::anyhow!("--producer-key {text:?}: {error}"))?;
        trusted.keys.push((
            KeyId::of(&key),
            key,
            "the key given with --producer-key".into(),
        ));
    }
    for key in super::events::authority_keys(&api, authority_key).await? {
        let whose = if authority_key.is_some() {
            "the pinned authority key"
        } else {
            "the authority key the server serves"
        };
        trusted.keys.push((KeyId::of(&key), key, whose.into()));
    }

    for record in &view.manifests {
        let Ok(keyid) = record.envelope.signer_keyid() else {
            continue;
        };
        if trusted.find(&keyid).is_some() {
            continue;
        }
        let Ok(text) = api.get_text(&format!("/v1/keys/{keyid}"), &[]).await else {
            continue; // unknown to the server: `not verified`
        };
        let found: serde_json::Value = serde_json::from_str(&text)?;
        let (Some(agent), Some(key)) = (found["agentId"].as_str(), found["publicKey"].as_str())
        else {
            continue;
        };
        let key = parse_public_key(key)?;
        if KeyId::of(&key) != keyid {
            anyhow::bail!("the server answered another key for {keyid}");
        }
        let whose = format!("the key the Authority registered for agent {agent}");
        trusted.keys.push((keyid.clone(), key, whose));
        trusted.registered.push((keyid, agent.to_owned()));
    }

    if json {
        // Each manifest with the same verdicts the text shows.
        let manifests: Vec<serde_json::Value> = view
            .manifests
            .iter()
            .map(|record| {
                serde_json::json!({
                    "manifestId": record.manifest_id.to_string(),
                    "sequence": record.sequence,
                    "payloadMatchesId": record.payload_matches(),
                    "signature": signature_verdict(record, &trusted),
                    "manifest": record.manifest,
                })
            })
            .collect();
        let out = serde_json::json!({
            "artifact": view.digests.blake3.to_string(),
            "sha256": view.digests.sha256.to_string(),
            "size": view.size,
            "quarantined": view.quarantined,
            "manifests": manifests,
        });
        println!("{out}");
        return Ok(());
    }
    println!("artifact  {}", view.digests.blake3);
    println!("sha256    {}", view.digests.sha256);
    println!("size      {} bytes", view.size);
    if view.quarantined {
        println!("status    QUARANTINED (stored bytes failed verification)");
    }
    for record in &view.manifests {
        print_manifest(record, &trusted);
    }
    Ok(())
}

/// One manifest: its signature verdict, then what it says.
fn print_manifest(record: &ManifestRecord, trusted: &Trusted) {
    let manifest = &record.manifest;
    let payload_ok = record.payload_matches();
    println!();
    println!(
        "manifest  {} (sequence {}, payload {})",
        record.manifest_id,
        record.sequence,
        if payload_ok {
            "matches its id"
        } else {
            "DOES NOT MATCH"
        }
    );
    println!("  signature   {}", signature_verdict(record, trusted));
    println!(
        "  producer    {} (card {})",
        manifest.producer.agent_id, manifest.producer.agent_card_version
    );
    println!(
        "  group       {}  mission {}  work item {}",
        manifest.group_id, manifest.mission_id, manifest.work_item_id
    );
    println!(
        "  lease       {} (epoch {})",
        manifest.execution.lease_id, manifest.execution.ownership_epoch
    );
    println!(
        "  media type  {}  schema {}",
        manifest.content.media_type,
        manifest.content.schema.as_deref().unwrap_or("-")
    );
    println!(
        "  created     {}  classification {}",
        super::table::when(&manifest.created_at),
        manifest.classification.as_str()
    );
    for source in &manifest.sources {
        println!("  source      {source}");
    }
    for tool in &manifest.tools {
        let kind = serde_json::to_value(tool.kind)
            .ok()
            .and_then(|value| value.as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{:?}", tool.kind));
        println!("  tool        {kind} {} {}", tool.id, tool.version);
    }
    for (key, value) in &manifest.annotations {
        println!("  annotation  {key}={value}");
    }
}

/// `valid (key …, agent …)`, `INVALID: …` or `not verified: <why>`.
fn signature_verdict(record: &ManifestRecord, trusted: &Trusted) -> String {
    let producer = &record.manifest.producer.agent_id;
    let keyid = match record.envelope.signer_keyid() {
        Ok(keyid) => keyid,
        Err(error) => return format!("INVALID: {}", error.message),
    };
    let Some((_, key, whose)) = trusted.find(&keyid) else {
        return format!(
            "not verified: signed with key {keyid}, which the server has not registered for any Agent; pass --producer-key with {producer}'s key to check it"
        );
    };
    if let Some((_, agent)) = trusted.registered.iter().find(|(id, _)| *id == keyid)
        && agent != producer.as_str()
    {
        return format!("INVALID: key {keyid} is registered to agent {agent}, not {producer}");
    }
    match record.check_signature(key) {
        Ok(_) => format!("valid (key {keyid}, agent {producer}; checked against {whose})"),
        Err(error) => format!("INVALID: {} (key {keyid}, {whose})", error.message),
    }
}

#[cfg(test)]
mod tests {
    use weft_api::digest::Hasher;
    use weft_api::dsse::Envelope;
    use weft_api::dsse::MANIFEST_TYPE;
    use weft_api::manifest::{Classification, Content, Execution, Producer};
    use weft_api::{ArtifactId, Manifest};

    use super::*;

    fn record(key: &ed25519_dalek::SigningKey) -> ManifestRecord {
        let mut hasher = Hasher::default();
        hasher.update(b"bytes");
        let digests = hasher.finish();
        let manifest = Manifest {
            content: Content {
                blake3: digests.blake3,
                sha256: digests.sha256,
                size: digests.size,
                media_type: "text/plain".into(),
                schema: None,
            },
            producer: Producer {
                agent_id: weft_api::Id::parse("agent", "agent-1").expect("id"),
                agent_card_version: "1".into(),
            },
            mission_id: weft_api::Id::parse("mission", "m1").expect("id"),
            group_id: weft_api::Id::parse("group", "g1").expect("id"),
            work_item_id: weft_api::Id::parse("work item", "w1").expect("id"),
            execution: Execution {
                lease_id: weft_api::Id::parse("lease", "lease-1").expect("id"),
                ownership_epoch: 1,
            },
            sources: Vec::new(),
            tools: Vec::new(),
            created_at: chrono::Utc::now().fixed_offset(),
            classification: Classification::Internal,
            retrieval_uri: "https://weft.example/x".into(),
            annotations: Default::default(),
        };
        let payload = serde_json::to_vec(&manifest).expect("JSON");
        ManifestRecord {
            manifest_id: ArtifactId::of(&payload),
            envelope: Envelope::sign(key, MANIFEST_TYPE, &payload),
            manifest,
            sequence: 1,
        }
    }

    fn trusting(key: &ed25519_dalek::SigningKey) -> Trusted {
        let public = key.verifying_key();
        Trusted {
            keys: vec![(KeyId::of(&public), public, "a test key".into())],
            registered: Vec::new(),
        }
    }

    #[test]
    fn a_manifest_is_valid_only_under_the_key_that_signed_it() {
        let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]);
        let signed = record(&key);
        assert!(signature_verdict(&signed, &trusting(&key)).starts_with("valid (key ed25519:"));
        let other = ed25519_dalek::SigningKey::from_bytes(&[8; 32]);
        assert!(signature_verdict(&signed, &trusting(&other)).starts_with("not verified:"));
        // A signature over other bytes under the trusted keyid: INVALID, never "valid".
        let mut forged = signed.clone();
        forged.envelope.signatures[0].sig = Envelope::sign(&key, MANIFEST_TYPE, b"other")
            .signatures[0]
            .sig
            .clone();
        assert!(signature_verdict(&forged, &trusting(&key)).starts_with("INVALID:"));
        // A key the Authority registered to another Agent than the producer: INVALID.
        let mut elsewhere = trusting(&key);
        elsewhere
            .registered
            .push((KeyId::of(&key.verifying_key()), "someone-else".into()));
        assert!(signature_verdict(&signed, &elsewhere).starts_with("INVALID: key"));
    }
}
