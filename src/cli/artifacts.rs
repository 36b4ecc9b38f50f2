//! Artifacts, the Worker's journey: `weft put` (upload, then publish a signed manifest),
//! `weft get` (a verified download, to a file or stdout) and `weft ls`; `weft show` lives in
//! `show`.
//!
//! Artifact bodies stream from and to disk through the typed client; nothing here holds a
//! whole artifact in memory.

use std::path::Path;

use anyhow::{Context as _, bail};
use indicatif::{ProgressBar, ProgressStyle};
use weft_api::manifest::{Classification, Content, Execution, Producer, Tool, ToolKind};
use weft_api::{ArtifactId, Digest, Id, Manifest};

use super::args::{ClientArgs, LsArgs, PutArgs};
use super::pages::{each_page, given};

/// `weft put`: checks what it can, uploads the file (in resumable chunks above
/// `--chunk-size`), then signs and publishes its manifest; prints the digest.
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
        chunk_size,
        quiet,
        json,
    } = args;
    let (session, api) = client.session()?;
    let key = client.key()?;
    if chunk_size == 0 {
        bail!("--chunk-size must be at least 1 byte");
    }
    // Every manifest field is checked before a byte is sent, so a typo fails in a second
    // rather than after a long upload.
    let work_item_id = Id::parse("work-item", &work_item)?;
    let mission_id = Id::parse("mission", &mission)?;
    let group_id = Id::parse("group", &group)?;
    let lease_given = lease
        .as_deref()
        .map(|l| Id::parse("lease", l))
        .transpose()?;
    let mut manifest = Manifest {
        // Placeholder content until the upload answers; checked with the rest below.
        content: Content {
            blake3: ArtifactId([0; 32]),
            sha256: weft_api::Sha256Digest([0; 32]),
            size: 0,
            media_type,
            schema,
        },
        producer: Producer {
            agent_id: Id::parse("agentId", &session.agent_id)?,
            agent_card_version: session.agent_card_version.clone(),
        },
        mission_id,
        group_id,
        work_item_id: work_item_id.clone(),
        execution: Execution {
            lease_id: lease_given.unwrap_or_else(|| work_item_id.clone()),
            ownership_epoch: ownership_epoch.unwrap_or(1),
        },
        sources: sources
            .iter()
            .map(|s| ArtifactId::parse(s).with_context(|| format!("--source {s:?}")))
            .collect::<Result<_, _>>()?,
        tools: tools
            .iter()
            .map(|t| parse_tool(t))
            .collect::<Result<_, _>>()?,
        created_at: chrono::Utc::now().fixed_offset(),
        classification: super::errors::wire_word::<Classification>(
            "classification",
            &classification,
        )?,
        retrieval_uri: format!(
            "{}/v1/artifacts/{}/content",
            api.base(),
            ArtifactId([0; 32])
        ),
        annotations: annotations
            .iter()
            .map(|pair| {
                pair.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .context("--annotation wants key=value")
            })
            .collect::<Result<_, _>>()?,
    };
    // The file's name goes with it (issue #50: the console shows it, `weft get` writes it),
    // unless the caller named it or the bytes come from stdin.
    if file != Path::new("-")
        && !manifest.annotations.contains_key("name")
        && let Some(name) = file.file_name().and_then(|name| name.to_str())
    {
        manifest
            .annotations
            .insert("name".to_owned(), name.to_owned());
    }
    super::preflight::check_manifest(&manifest)?;
    // OFL-5: the journal goes first; what it sends may also move the lease found below.
    client.reconcile_first().await?;
    super::preflight::check_session(&api, &session, &manifest).await?;
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
    manifest.execution = Execution {
        lease_id: Id::parse("lease", &lease_id)?,
        ownership_epoch,
    };
    // `put -`: the upload declares its length, so stdin is spooled to a file in the weft
    // home first (streamed, never held in memory) and removed once sent.
    let spooled = if file == Path::new("-") {
        Some(spool_stdin(&client.home()?).await?)
    } else {
        None
    };
    let upload_path = spooled.as_deref().unwrap_or(&file);
    let size = std::fs::metadata(upload_path)
        .with_context(|| format!("reading {}", upload_path.display()))?
        .len();
    if size <= ONE_REQUEST_BYTES {
        // Small: hashed here, then bytes and manifest in one request and one transaction.
        let bytes = std::fs::read(upload_path)
            .with_context(|| format!("reading {}", upload_path.display()))?;
        let digests = weft_api::digest::Hasher::digest(&bytes);
        let mut whole = manifest.clone();
        whole.content.blake3 = digests.blake3;
        whole.content.sha256 = digests.sha256;
        whole.content.size = digests.size;
        whole.retrieval_uri = format!("{}/v1/artifacts/{}/content", api.base(), digests.blake3);
        match api.publish_with_content(&key, &whole, &bytes).await {
            // A server without the route (an older weft answers 405): the two requests below.
            Err(weft_api::client::Error::Api { status: 405, .. }) => {}
            outcome => {
                if let Some(spooled) = &spooled {
                    let _ = std::fs::remove_file(spooled);
                }
                report(&outcome?, json)?;
                return Ok(());
            }
        }
    }
    let bar = progress_bar(size, quiet);
    let receipt = if size > chunk_size && spooled.is_none() {
        let home = client.home()?;
        super::resume::upload(&api, &home, &session, upload_path, chunk_size, &bar).await
    } else {
        let progress = bar.clone();
        api.upload_file(upload_path, move |sent| progress.set_position(sent))
            .await
            .map_err(anyhow::Error::from)
    };
    bar.finish_and_clear();
    if let Some(spooled) = &spooled {
        let _ = std::fs::remove_file(spooled);
    }
    let receipt = receipt?;
    manifest.content.blake3 = receipt.blake3;
    manifest.content.sha256 = receipt.sha256;
    manifest.content.size = receipt.size;
    manifest.retrieval_uri = format!("{}/v1/artifacts/{}/content", api.base(), receipt.blake3);
    let published = api.publish(&key, &manifest).await?;
    report(&published, json)?;
    Ok(())
}

/// Files up to this size go up with their manifest in one request
/// (`PUT /v1/artifacts/{digest}`), held in memory; larger ones stream to `/v1/blobs` (or
/// `/v1/uploads` in chunks) and are published after.
const ONE_REQUEST_BYTES: u64 = 64 * 1024;

fn report(published: &weft_api::views::Published, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(published)?);
        return Ok(());
    }
    eprintln!(
        "published manifest {} at sequence {}",
        published.manifest_id, published.sequence
    );
    println!("{}", published.artifact);
    Ok(())
}

/// `weft get`: downloads into `<output>.weft-partial`, renamed to `output` only once the
/// digests check out, so a failed download leaves nothing behind. `-o -` streams to stdout
/// (there a failure can only be reported, after the bytes went out); without `-o`, the file is
/// named after the manifest's `name` annotation, else the digest's hex, in the current
/// directory, and never replaces a file that is there (issue #50: a name is the producer's
/// word, so it is never a dotfile either: `.bashrc` falls back to the digest's hex).
pub(super) async fn get(
    client: &ClientArgs,
    digest: &str,
    output: Option<&Path>,
    quiet: bool,
    json: bool,
) -> anyhow::Result<()> {
    let (_, api) = client.session()?;
    // `--json`: what was verified and where it went, as one object on stdout.
    let said = |digests: &weft_api::Digests, path: &str| {
        if json {
            let out = serde_json::json!({
                "blake3": digests.blake3.to_string(),
                "sha256": digests.sha256.to_string(),
                "size": digests.size,
                "path": path,
            });
            println!("{out}");
        }
    };
    let digest = Digest::parse(digest)?;
    if json && output == Some(Path::new("-")) {
        anyhow::bail!("--json prints to stdout, where -o - writes the bytes: choose one");
    }
    let output = match output {
        Some(path) if path == Path::new("-") => {
            let mut stdout = tokio::io::stdout();
            let digests = match api.download(&digest, &mut stdout, |_, _| {}).await {
                Ok(digests) => digests,
                Err(error) => return Err(integrity(&api, &digest, error).await),
            };
            eprintln!("verified {} ({} bytes)", digests.blake3, digests.size);
            return Ok(());
        }
        Some(path) => path.to_path_buf(),
        None => {
            let named: std::path::PathBuf = default_name(&api, &digest).await?.into();
            if tokio::fs::symlink_metadata(&named).await.is_ok() {
                anyhow::bail!(
                    "{} exists here; nothing was downloaded (choose where with -o FILE, or -o {} to replace it)",
                    named.display(),
                    named.display()
                );
            }
            named
        }
    };
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
            tokio::fs::rename(&partial, &output).await?;
            eprintln!(
                "verified {} ({} bytes) into {}",
                digests.blake3,
                digests.size,
                output.display()
            );
            said(&digests, &output.display().to_string());
            Ok(())
        }
        Err(error) => {
            let _ = tokio::fs::remove_file(&partial).await;
            Err(integrity(&api, &digest, error).await)
                .context("download failed; nothing was written")
        }
    }
}

/// A download whose bytes did not hash to the digest, or that the server broke off because
/// it found the stored bytes corrupt (it quarantines them and aborts the body rather than
/// send bad bytes): named as what it is, not as a transport decode error. A download that
/// broke off for another reason (the network) is reported as such: the artifact view says
/// which. The server may abort before its response head was flushed (the first windows of
/// a large blob go out before the last is verified), so any transport failure asks.
async fn integrity(
    api: &weft_api::client::Client,
    digest: &Digest,
    error: weft_api::client::Error,
) -> anyhow::Error {
    use weft_api::client::Error as E;
    match error {
        E::Integrity { .. } => anyhow::anyhow!(error),
        E::Http(http) => match api.artifact(digest).await {
            Ok(view) if view.quarantined => anyhow::anyhow!(
                "integrity failure; the server has quarantined it ({digest}: the server stopped the download mid-way)"
            ),
            _ => anyhow::anyhow!("the download of {digest} broke off: {http}"),
        },
        other => anyhow::anyhow!(other),
    }
}

/// The file name `weft get` writes without `-o`: the `name` annotation of the newest manifest
/// that has one (its last path component, so a manifest cannot aim outside the current
/// directory), else the digest's hex.
async fn default_name(api: &weft_api::client::Client, digest: &Digest) -> anyhow::Result<String> {
    let view = api.artifact(digest).await?;
    let named = view.manifests.iter().rev().find_map(|record| {
        let name = record.manifest.annotations.get("name")?;
        let base = Path::new(name).file_name()?.to_str()?;
        let plain =
            !base.is_empty() && !base.starts_with('.') && !base.chars().any(|c| c.is_control());
        plain.then(|| base.to_owned())
    });
    Ok(named.unwrap_or_else(|| view.digests.blake3.to_string()["blake3:".len()..].to_owned()))
}

/// `weft ls`: every page of the artifact listing, as a table or JSON lines.
pub(super) async fn ls(args: LsArgs) -> anyhow::Result<()> {
    let LsArgs {
        client,
        mission,
        work_item,
        producer,
        media_type,
        name,
        json,
    } = args;
    let (_, api) = client.session()?;
    let filters = given([
        ("missionId", mission),
        ("workItemId", work_item),
        ("producer", producer),
        ("mediaType", media_type),
        ("name", name),
    ]);
    let api = &api;
    if !json {
        // Fixed widths, so rows print as pages arrive instead of after the whole listing.
        println!(
            "{:<71}  {:>12}  {:<24}  {:<20}  PRODUCER",
            "ARTIFACT", "SIZE", "MEDIA TYPE", "WORK ITEM"
        );
    }
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
                    "{:<71}  {:>12}  {:<24}  {:<20}  {}",
                    item.artifact,
                    item.size,
                    item.media_type,
                    item.work_item_id.to_string(),
                    item.producer
                );
            }
            Ok(())
        },
    )
    .await
}

/// Copies stdin to `<home>/spool/stdin-<random>`, chunk by chunk; the caller removes it.
async fn spool_stdin(home: &Path) -> anyhow::Result<std::path::PathBuf> {
    let dir = home.join("spool");
    tokio::fs::create_dir_all(&dir)
        .await
        .with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("stdin-{}", hex::encode(rand::random::<[u8; 8]>())));
    let mut spool = tokio::fs::File::create(&path)
        .await
        .with_context(|| format!("creating {}", path.display()))?;
    let copied = tokio::io::copy(&mut tokio::io::stdin(), &mut spool).await;
    if let Err(error) = copied.and(spool.sync_all().await) {
        let _ = tokio::fs::remove_file(&path).await;
        return Err(error).context("reading stdin");
    }
    Ok(path)
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
