//! Artifacts, the Worker's journey: `weft put` (upload, then publish a signed manifest),
//! `weft get` (a verified download), `weft show` (an artifact's manifests, signatures
//! re-checked here) and `weft ls`.
//!
//! Artifact bodies stream from and to disk through the typed client; nothing here holds a
//! whole artifact in memory.

use std::path::Path;

use anyhow::{Context as _, bail};
use base64::Engine as _;
use indicatif::{ProgressBar, ProgressStyle};
use weft_api::dsse::BASE64;
use weft_api::manifest::{Classification, Content, Execution, Producer, Tool, ToolKind};
use weft_api::{ArtifactId, Digest, Id, Manifest};

use super::pages::{each_page, given};
use super::{ClientArgs, LsArgs, PutArgs};

/// `weft put`: uploads the file, then signs and publishes its manifest; prints the digest.
pub(super) async fn put(args: PutArgs) -> anyhow::Result<()> {
    let PutArgs {
        client,
        file,
        group,
        mission,
        work_item,
        lease,
        ownership_epoch,
        media_type,
        schema,
        sources,
        tools,
        classification,
        annotations,
        quiet,
    } = args;
    let (session, api) = client.session()?;
    let key = client.key()?;
    let work_item_id = Id::parse("work-item", &work_item)?;
    let (lease_id, ownership_epoch) = match (lease, ownership_epoch) {
        (Some(lease), Some(epoch)) => (lease, epoch),
        (lease, epoch) => {
            // LSE-4: the lease `weft work start` remembered (or the WorkItem's current one).
            let home = client.home()?;
            let found =
                super::work::lease::current(&home, &api, &session.agent_id, &work_item_id).await?;
            match (lease, found) {
                (None, Some(found)) => (found.lease_id, epoch.unwrap_or(found.ownership_epoch)),
                (Some(lease), Some(found)) if found.lease_id == lease => {
                    (lease, found.ownership_epoch)
                }
                // A lease this agent is not known to hold: epoch 1 unless told, as before
                // leases were remembered; the server decides whether it is current.
                (Some(lease), _) => (lease, 1),
                (None, None) => bail!(
                    "this agent holds no Execution Lease of {work_item_id}: run `weft work start`, or pass --lease"
                ),
            }
        }
    };
    let bar = progress_bar(
        std::fs::metadata(&file)
            .with_context(|| format!("reading {}", file.display()))?
            .len(),
        quiet,
    );
    let progress = bar.clone();
    let receipt = api
        .upload_file(&file, move |sent| progress.set_position(sent))
        .await?;
    bar.finish_and_clear();
    let manifest = Manifest {
        content: Content {
            blake3: receipt.blake3,
            sha256: receipt.sha256,
            size: receipt.size,
            media_type,
            schema,
        },
        producer: Producer {
            agent_id: Id::parse("agentId", &session.agent_id)?,
            agent_card_version: session.agent_card_version.clone(),
        },
        mission_id: Id::parse("mission", &mission)?,
        group_id: Id::parse("group", &group)?,
        work_item_id,
        execution: Execution {
            lease_id: Id::parse("lease", &lease_id)?,
            ownership_epoch,
        },
        sources: sources
            .iter()
            .map(|s| ArtifactId::parse(s))
            .collect::<Result<_, _>>()?,
        tools: tools
            .iter()
            .map(|t| parse_tool(t))
            .collect::<Result<_, _>>()?,
        created_at: chrono::Utc::now().fixed_offset(),
        classification: serde_json::from_value::<Classification>(serde_json::Value::String(
            classification,
        ))
        .map_err(|_| {
            anyhow::anyhow!("classification must be public, internal, confidential or restricted")
        })?,
        retrieval_uri: format!("{}/v1/artifacts/{}/content", api.base(), receipt.blake3),
        annotations: annotations
            .iter()
            .map(|pair| {
                pair.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .context("--annotation wants key=value")
            })
            .collect::<Result<_, _>>()?,
    };
    let published = api.publish(&key, &manifest).await?;
    eprintln!(
        "published manifest {} at sequence {}",
        published.manifest_id, published.sequence
    );
    println!("{}", published.artifact);
    Ok(())
}

/// `weft get`: downloads into `<output>.weft-partial`, renamed to `output` only once the
/// digests check out, so a failed download leaves nothing behind.
pub(super) async fn get(
    client: &ClientArgs,
    digest: &str,
    output: &Path,
    quiet: bool,
) -> anyhow::Result<()> {
    let (_, api) = client.session()?;
    let digest = Digest::parse(digest)?;
    let partial = output.with_extension("weft-partial");
    let mut file = tokio::fs::File::create(&partial)
        .await
        .with_context(|| format!("creating {}", partial.display()))?;
    let bar = progress_bar(0, quiet);
    let outcome = api
        .download(&digest, &mut file, |received, total| {
            if let Some(total) = total {
                bar.set_length(total);
            }
            bar.set_position(received);
        })
        .await;
    bar.finish_and_clear();
    match outcome {
        Ok(digests) => {
            file.sync_all().await?;
            tokio::fs::rename(&partial, output).await?;
            eprintln!("verified {} ({} bytes)", digests.blake3, digests.size);
            Ok(())
        }
        Err(error) => {
            let _ = tokio::fs::remove_file(&partial).await;
            Err(error).context("download failed; nothing was written")
        }
    }
}

/// `weft show`: the artifact's digests and every manifest recorded for it.
pub(super) async fn show(client: &ClientArgs, digest: &str) -> anyhow::Result<()> {
    let (_, api) = client.session()?;
    let view = api.artifact(&Digest::parse(digest)?).await?;
    println!("artifact  {}", view.digests.blake3);
    println!("sha256    {}", view.digests.sha256);
    println!("size      {}", view.size);
    if view.quarantined {
        println!("status    QUARANTINED (stored bytes failed verification)");
    }
    for record in &view.manifests {
        let manifest = &record.manifest;
        // Re-check the signature locally: the keyid must be the producer's key
        // fingerprint as the envelope states it, and the payload must match.
        let signed = record
            .envelope
            .signer_keyid()
            .map(|k| k.to_string())
            .unwrap_or_else(|e| format!("invalid ({e})"));
        let payload_ok = BASE64
            .decode(&record.envelope.payload)
            .ok()
            .is_some_and(|payload| {
                ArtifactId::of(&payload) == record.manifest_id
                    && Manifest::parse(&payload).ok().as_ref() == Some(manifest)
            });
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
        println!("  signed by   {signed}");
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
            manifest.created_at,
            manifest.classification.as_str()
        );
        for source in &manifest.sources {
            println!("  source      {source}");
        }
        for tool in &manifest.tools {
            println!("  tool        {:?} {} {}", tool.kind, tool.id, tool.version);
        }
    }
    Ok(())
}

/// `weft ls`: every page of the artifact listing, as a table or JSON lines.
pub(super) async fn ls(args: LsArgs) -> anyhow::Result<()> {
    let LsArgs {
        client,
        mission,
        work_item,
        producer,
        media_type,
        json,
    } = args;
    let (_, api) = client.session()?;
    let filters = given([
        ("missionId", mission),
        ("workItemId", work_item),
        ("producer", producer),
        ("mediaType", media_type),
    ]);
    let api = &api;
    each_page(
        &filters,
        |page_filters| async move {
            let page = api.list(&page_filters).await?;
            Ok((page.items, page.next))
        },
        |item| {
            if json {
                println!("{}", serde_json::to_string(item)?);
            } else {
                println!(
                    "{}  {:>12}  {:<24}  {}  {}",
                    item.artifact, item.size, item.media_type, item.work_item_id, item.producer
                );
            }
            Ok(())
        },
    )
    .await
}

fn progress_bar(total: u64, quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {binary_bytes_per_sec} {eta}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

fn parse_tool(text: &str) -> anyhow::Result<Tool> {
    let mut parts = text.splitn(3, ':');
    let (Some(kind), Some(id), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        bail!("--tool wants kind:id:version, got {text:?}");
    };
    let kind = match kind {
        "tool" => ToolKind::Tool,
        "model" => ToolKind::Model,
        "capability" => ToolKind::Capability,
        other => bail!("tool kind must be tool, model or capability, not {other:?}"),
    };
    Ok(Tool {
        kind,
        id: id.to_owned(),
        version: version.to_owned(),
    })
}
