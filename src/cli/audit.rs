//! `weft audit export` and `weft audit verify` (issue #45): one Mission's offline audit bundle
//! (`weft_api::audit`), written and checked as one tar file. Long because export and verify
//! share the tar's one layout, kept in one file so the two cannot drift apart.
//!
//! - **Export** (a Group-wide reader's session: an auditor or coordinator): the Group's
//!   checkpoint (cosigned where the server has witnesses), the Mission's Events read from the
//!   log up to it with an inclusion proof each, the manifests and Evidence those Events name,
//!   the keys that signed them, the Mission's lineage; with `--with-bytes`, each published
//!   artifact's bytes, verified as downloaded (`blobs/<hex>`, streamed, never whole in
//!   memory). The tar is written deterministically (sorted members, mode 0644, time 0).
//! - **Verify** (no server): every check of `weft_api::audit::check`; each `blobs/` member
//!   re-hashed as read; and the file must be exactly the tar its members make, so a byte
//!   changed anywhere (a header, padding, the end) is found, at its offset. One line per failed
//!   check; exit 0 when all hold, 1 otherwise.

use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use weft_api::audit::{AgentKey, BlobEntry, BlobsFound, Bundle, ProvenEvent};
use weft_api::tlog::witness::WitnessKey;
use weft_api::{ArtifactId, Digest, Id};

use super::args::ClientArgs;

/// `weft audit …`.
#[derive(Debug, clap::Subcommand)]
pub(super) enum AuditAction {
    /// Write one Mission's (or one WorkItem's) audit bundle (a tar) for checking with no
    /// server.
    #[command(after_help = "Example: weft audit export --mission m1 -o m1.audit.tar --with-bytes")]
    Export {
        #[arg(long, required_unless_present_any = ["work_item", "artifact"], conflicts_with_all = ["work_item", "artifact"])]
        mission: Option<String>,
        /// Only this WorkItem's Events (its Mission's bundle, narrowed).
        #[arg(long, conflicts_with = "artifact")]
        work_item: Option<String>,
        /// The Events about this artifact (`blake3:…`): its publications, the Evidence citing
        /// it, its integrity, in any Mission.
        #[arg(long)]
        artifact: Option<String>,
        #[arg(short = 'o', long)]
        output: PathBuf,
        /// Include every published artifact's bytes.
        #[arg(long)]
        with_bytes: bool,
    },
    /// Check a bundle with no server: exit 0 when every check holds, 1 otherwise (one line
    /// per failed check).
    #[command(after_help = "Example: weft audit verify m1.audit.tar --authority-key KEY")]
    Verify {
        file: PathBuf,
        /// Trust this Authority key (base64) instead of the one the bundle names.
        #[arg(long, value_name = "KEY")]
        authority_key: Option<String>,
        /// A witness whose cosignature of the checkpoint counts (repeatable).
        #[arg(long = "witness", value_name = "VKEY")]
        witnesses: Vec<String>,
        /// How many of the `--witness` keys must have cosigned (default: all).
        #[arg(long)]
        quorum: Option<usize>,
    },
}

pub(super) async fn run(client: &ClientArgs, action: AuditAction) -> anyhow::Result<()> {
    match action {
        AuditAction::Export {
            mission,
            work_item,
            artifact,
            output,
            with_bytes,
        } => {
            let artifact = artifact
                .map(|text| match Digest::parse(&text) {
                    Ok(Digest::Blake3(id)) => Ok(id),
                    _ => Err(anyhow::anyhow!("--artifact takes a blake3:… digest")),
                })
                .transpose()?;
            export(client, (mission, work_item, artifact), &output, with_bytes).await
        }
        AuditAction::Verify {
            file,
            authority_key,
            witnesses,
            quorum,
        } => {
            let failures = verify(&file, authority_key.as_deref(), &witnesses, quorum)?;
            if failures.is_empty() {
                println!("ok: {} holds", file.display());
                return Ok(());
            }
            for failure in &failures {
                println!("FAILED {failure}");
            }
            std::process::exit(1);
        }
    }
}

/// What to export: a Mission, a WorkItem, or an artifact (one of the three).
type Wanted = (Option<String>, Option<String>, Option<ArtifactId>);

async fn export(
    client: &ClientArgs,
    (mission, work_item, artifact): Wanted,
    output: &Path,
    with_bytes: bool,
) -> anyhow::Result<()> {
    let (session, api) = client.session()?;
    let group = Id::parse("group", &session.group_id)?;
    // A WorkItem's bundle is its Mission's, narrowed to the WorkItem's Events; an artifact's
    // names the Mission of its first publication (whose lineage it holds).
    let mission = match (mission, &work_item, &artifact) {
        (Some(mission), _, _) => mission,
        (None, Some(work_item), _) => {
            api.work_item(&Id::parse("work-item", work_item)?)
                .await?
                .mission_id
        }
        (None, None, Some(artifact)) => {
            let view = api.artifact(&Digest::Blake3(*artifact)).await?;
            let first = view
                .manifests
                .iter()
                .min_by_key(|m| m.sequence)
                .with_context(|| format!("no manifest of {artifact} is visible to you"))?;
            first.manifest.mission_id.to_string()
        }
        (None, None, None) => bail!("name --mission, --work-item or --artifact"),
    };
    let mission = mission.as_str();
    let scope = weft_api::audit::Scope {
        mission,
        work_item: work_item.as_deref(),
        artifact,
    };
    let mission_id = Id::parse("mission", mission)?;
    let keys = api.authority_keys().await?;
    let authority = keys
        .keys
        .first()
        .context("the server serves no Authority key")?;
    let authority_key = weft_api::dsse::parse_public_key(&authority.public_key)?;
    let checkpoint = api
        .get_text(&format!("/v1/groups/{group}/tlog/checkpoint"), &[])
        .await?;
    let (head, _) = weft_api::tlog::witness::open_witnessed(
        checkpoint.as_bytes(),
        &authority_key,
        &weft_api::tlog::origin(&authority_key, group.as_str()),
        &[],
        0,
    )
    .map_err(|r| anyhow::anyhow!("the server's checkpoint: {}", r.message))?;
    // The Mission's Events up to the checkpoint, each with its proof.
    let mut events = Vec::new();
    let mut after = 0;
    while after < head.size {
        let page = api.events(&group, after, 1000).await?;
        let Some(last) = page.last() else { break };
        after = last.sequence();
        for delivered in page {
            let Some(event) = delivered.event() else {
                bail!(
                    "Event {} is withheld from this session: export with a Group-wide reader (an auditor or coordinator)",
                    delivered.sequence()
                );
            };
            if event.sequence > head.size || !weft_api::audit::in_scope(event, &scope) {
                continue;
            }
            let proof = api
                .get_text(
                    &format!("/v1/groups/{group}/tlog/proof/inclusion"),
                    &[
                        ("sequence", event.sequence.to_string()),
                        ("size", head.size.to_string()),
                    ],
                )
                .await?;
            events.push(ProvenEvent {
                event: event.clone(),
                proof: serde_json::from_str(&proof)?,
            });
        }
    }
    if events.is_empty() {
        bail!("no Event of this scope in Group {group}'s log");
    }
    // What the Events name: manifests, Evidence, and the keys that signed them.
    let mut manifests = Vec::new();
    let mut evidence = Vec::new();
    let mut published: BTreeMap<ArtifactId, u64> = BTreeMap::new();
    for proven in &events {
        match weft_api::EventPayload::of(&proven.event).ok().flatten() {
            // A record a retention policy disposed of (issue #46) is not in the bundle: its
            // `records.disposed` Event, in the Mission's scope, is.
            Some(weft_api::EventPayload::ArtifactPublished(p)) => {
                published.insert(p.artifact, p.size);
                let view = match api.artifact(&Digest::Blake3(p.artifact)).await {
                    Ok(view) => view,
                    Err(error) if error.code() == Some(weft_api::ErrorCode::Disposed) => {
                        eprintln!("manifest {}: disposed of by policy", p.manifest_id);
                        continue;
                    }
                    Err(error) => return Err(error.into()),
                };
                if view
                    .disposed_manifests
                    .iter()
                    .any(|gone| gone.id == p.manifest_id)
                {
                    eprintln!("manifest {}: disposed of by policy", p.manifest_id);
                    continue;
                }
                let record = view
                    .manifests
                    .into_iter()
                    .find(|m| m.manifest_id == p.manifest_id)
                    .with_context(|| {
                        format!("the server does not show manifest {}", p.manifest_id)
                    })?;
                manifests.push(record);
            }
            Some(weft_api::EventPayload::EvidenceRecorded(p)) => {
                let text = match api
                    .get_text(&format!("/v1/evidence/{}", p.evidence_id), &[])
                    .await
                {
                    Ok(text) => text,
                    Err(error) if error.code() == Some(weft_api::ErrorCode::Disposed) => {
                        eprintln!("Evidence {}: disposed of by policy", p.evidence_id);
                        continue;
                    }
                    Err(error) => return Err(error.into()),
                };
                evidence.push(serde_json::from_str::<weft_api::views::EvidenceRecord>(
                    &text,
                )?);
            }
            _ => {}
        }
    }
    let mut keyids = std::collections::BTreeSet::new();
    for envelope in manifests
        .iter()
        .map(|m| &m.envelope)
        .chain(evidence.iter().map(|e| &e.envelope))
    {
        keyids.insert(envelope.signer_keyid()?.as_str().to_owned());
    }
    let mut keys = Vec::new();
    // The Authority's own signatures (its reviewer's Evidence, a child Mission's approval)
    // are checked against `authorityKey`, which `verify` trusts only when pinned or
    // witnessed: no Agent key is fetched for it (`/v1/keys` holds Agents' keys only).
    let own = weft_api::KeyId::of(&authority_key);
    for keyid in keyids.into_iter().filter(|keyid| *keyid != own.as_str()) {
        let text = api.get_text(&format!("/v1/keys/{keyid}"), &[]).await?;
        let value: serde_json::Value = serde_json::from_str(&text)?;
        keys.push(AgentKey {
            keyid,
            agent_id: value["agentId"].as_str().unwrap_or_default().to_owned(),
            public_key: value["publicKey"].as_str().unwrap_or_default().to_owned(),
        });
    }
    // A Mission that published nothing has no lineage (`not_found`): `null` in the bundle.
    let (lineage_route, lineage_query) = match (&work_item, &artifact) {
        (_, Some(artifact)) => (
            format!("/v1/artifacts/{artifact}/provenance"),
            vec![("missionId", mission.to_owned())],
        ),
        (Some(work_item), None) => (format!("/v1/workitems/{work_item}/provenance"), vec![]),
        (None, None) => (format!("/v1/missions/{mission_id}/provenance"), vec![]),
    };
    let lineage: serde_json::Value = match api.get_text(&lineage_route, &lineage_query).await {
        Ok(text) => serde_json::from_str(&text)?,
        Err(error)
            if error.code() == Some(weft_api::ErrorCode::NotFound) && published.is_empty() =>
        {
            serde_json::Value::Null
        }
        Err(error) => return Err(error.into()),
    };
    // The bytes go to temporary files first (verified as downloaded), then into the tar.
    // Names of this run's own, beside the output: never an existing directory or file.
    let unique = format!("{}-{}", std::process::id(), uuid_like());
    let scratch = ScratchDir::new(output.with_extension(format!("parts-{unique}")))?;
    let mut blobs: Vec<BlobEntry> = Vec::new();
    for (artifact, size) in published.iter().filter(|_| with_bytes) {
        let path = scratch.0.join(hex::encode(artifact.0));
        let mut file = tokio::fs::File::create(&path).await?;
        match api
            .download(&Digest::Blake3(*artifact), &mut file, |_, _| {})
            .await
        {
            Ok(_) => blobs.push(BlobEntry {
                artifact: *artifact,
                size: *size,
            }),
            // Bytes a retention policy disposed of (issue #46): the bundle carries the
            // `artifact.disposed` Event that says so, not the bytes.
            Err(error) if error.code() == Some(weft_api::ErrorCode::Disposed) => {
                drop(file);
                std::fs::remove_file(&path)?;
                eprintln!(
                    "{artifact}: bytes disposed of by policy; the bundle holds its artifact.disposed Event"
                );
            }
            Err(error) => return Err(error.into()),
        }
    }
    let bundle = Bundle {
        version: weft_api::audit::VERSION,
        group_id: group.to_string(),
        mission_id: mission.to_owned(),
        work_item_id: work_item.clone(),
        artifact,
        authority_key: authority.public_key.clone(),
        checkpoint,
        events,
        manifests,
        evidence,
        keys,
        lineage,
        blobs: blobs.clone(),
    };
    let json = serde_json::to_vec_pretty(&bundle)?;
    let temporary = output.with_extension(format!("partial-{unique}"));
    // Removed unless it becomes the output.
    let _partial = ScratchFile(temporary.clone());
    {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temporary)
            .with_context(|| format!("writing {}", temporary.display()))?;
        let mut writer = std::io::BufWriter::new(file);
        let mut members: Vec<(String, Box<dyn std::io::Read>, u64)> = vec![(
            "bundle.json".into(),
            Box::new(std::io::Cursor::new(json.as_slice())),
            json.len() as u64,
        )];
        for entry in &blobs {
            let name = hex::encode(entry.artifact.0);
            let file = std::fs::File::open(scratch.0.join(&name))?;
            let size = file.metadata()?.len();
            members.push((format!("blobs/{name}"), Box::new(file), size));
        }
        write_tar(&mut writer, members)?;
        writer.flush()?;
        writer.get_ref().sync_all()?;
    }
    std::fs::rename(&temporary, output)?;
    println!(
        "wrote {}: {} Events, {} manifests, {} Evidence, {} blobs; tree of {} signed",
        output.display(),
        bundle.events.len(),
        bundle.manifests.len(),
        bundle.evidence.len(),
        bundle.blobs.len(),
        head.size
    );
    Ok(())
}

/// A name no other run uses (the time in nanoseconds and a counter).
fn uuid_like() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{nanos:x}-{}",
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// A file removed when it goes out of scope, if it still exists.
struct ScratchFile(PathBuf);

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A directory for the downloaded bytes, removed when the export ends, whichever way.
struct ScratchDir(PathBuf);

impl ScratchDir {
    fn new(path: PathBuf) -> anyhow::Result<Self> {
        // `create_dir` (not `_all`): an existing directory of that name is never taken over.
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(path))
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The largest `bundle.json` read (about a million Events with their proofs).
const MAX_BUNDLE_JSON: u64 = 2 << 30;

/// The header `write_tar` gives member `name` of `size` bytes.
fn header_for(name: &str, size: u64) -> anyhow::Result<tar::Header> {
    let mut header = tar::Header::new_gnu();
    header.set_path(name)?;
    header.set_size(size);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header.set_entry_type(tar::EntryType::Regular);
    header.set_cksum();
    Ok(header)
}

/// Writes `members` (in order) as a deterministic tar: GNU headers, mode 0644, owner 0, time 0.
fn write_tar<W: std::io::Write>(
    out: &mut W,
    members: Vec<(String, Box<dyn std::io::Read + '_>, u64)>,
) -> anyhow::Result<()> {
    let mut builder = tar::Builder::new(out);
    for (name, data, size) in members {
        builder.append(&header_for(&name, size)?, data)?;
    }
    builder.finish()?;
    Ok(())
}

/// Every failed check of the bundle at `file` (empty: it holds).
fn verify(
    file: &Path,
    authority: Option<&str>,
    witnesses: &[String],
    quorum: Option<usize>,
) -> anyhow::Result<Vec<String>> {
    let witnesses = witnesses
        .iter()
        .map(|vkey| {
            WitnessKey::parse(vkey).map_err(|e| anyhow::anyhow!("--witness: {}", e.message))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let quorum = quorum.unwrap_or(witnesses.len());
    let authority = authority
        .map(|text| {
            weft_api::dsse::parse_public_key(text)
                .map_err(|e| anyhow::anyhow!("--authority-key: {}", e.message))
        })
        .transpose()?;
    let mut failures = Vec::new();
    // Pass 1: the members, the bundle parsed, each blob re-hashed as read.
    let mut json = None;
    let mut found: BlobsFound = BTreeMap::new();
    let mut names = Vec::new();
    let reader =
        std::fs::File::open(file).with_context(|| format!("reading {}", file.display()))?;
    let mut archive = tar::Archive::new(std::io::BufReader::new(reader));
    let entries = match archive.entries() {
        Ok(entries) => entries,
        Err(error) => return Ok(vec![format!("{}: not a tar ({error})", file.display())]),
    };
    for entry in entries {
        let mut entry = match entry {
            Ok(entry) => entry,
            Err(error) => {
                failures.push(format!(
                    "{}: a damaged tar header ({error})",
                    file.display()
                ));
                return Ok(failures);
            }
        };
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        names.push(name.clone());
        // Only the headers `write_tar` writes are read on: a sparse or other entry could claim
        // any size, and its data would be made up, not read.
        let size = entry.header().size().unwrap_or(u64::MAX);
        let plain = entry.header().entry_type() == tar::EntryType::Regular
            && header_for(&name, size).is_ok_and(|h| h.as_bytes() == entry.header().as_bytes());
        if !plain {
            failures.push(format!("{name}: not a member a bundle writes (its header)"));
            return Ok(failures);
        }
        if name == "bundle.json" {
            if size > MAX_BUNDLE_JSON {
                failures.push(format!("bundle.json: {size} bytes, over {MAX_BUNDLE_JSON}"));
                return Ok(failures);
            }
            let mut bytes = Vec::new();
            entry.read_to_end(&mut bytes)?;
            json = Some(bytes);
        } else if let Some(hex_name) = name.strip_prefix("blobs/") {
            let mut hasher = blake3::Hasher::new();
            let mut size = 0u64;
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                let n = entry.read(&mut buffer)?;
                if n == 0 {
                    break;
                }
                hasher.update(&buffer[..n]);
                size += n as u64;
            }
            let digest = ArtifactId(*hasher.finalize().as_bytes());
            if hex::encode(digest.0) == hex_name {
                found.insert(digest, size);
            } else {
                failures.push(format!("{name}: its bytes do not hash to its name"));
            }
        } else {
            failures.push(format!("{name}: not a member a bundle has"));
        }
    }
    let Some(json) = json else {
        failures.push(format!("{}: no bundle.json", file.display()));
        return Ok(failures);
    };
    let bundle: Bundle = match serde_json::from_slice(&json) {
        Ok(bundle) => bundle,
        Err(error) => {
            failures.push(format!("bundle.json: {error}"));
            return Ok(failures);
        }
    };
    failures.extend(weft_api::audit::check(
        &bundle,
        authority.as_ref(),
        &witnesses,
        quorum,
        &found,
    ));
    // Bytes a policy let go are said to be so, by the proven Event that records it.
    for (artifact, policy, sequence) in weft_api::audit::dispositions(&bundle) {
        println!(
            "note: bytes of {artifact} disposed of by policy ({policy}) at sequence {sequence}"
        );
    }
    for (record, policy, sequence) in weft_api::audit::records_disposed(&bundle) {
        println!("note: record {record} disposed of by policy ({policy}) at sequence {sequence}");
    }
    // bundle.json is exactly what its content writes (no whitespace or key order of its own).
    if serde_json::to_vec_pretty(&bundle).ok().as_deref() != Some(json.as_slice()) {
        failures.push(
            "bundle.json: not in its canonical form (a byte was changed outside its values?)"
                .into(),
        );
    }
    let expected: Vec<(String, u64)> =
        std::iter::once(("bundle.json".to_owned(), json.len() as u64))
            .chain(
                bundle
                    .blobs
                    .iter()
                    .map(|b| (format!("blobs/{}", hex::encode(b.artifact.0)), b.size)),
            )
            .collect();
    if names
        != expected
            .iter()
            .map(|(name, _)| name.clone())
            .collect::<Vec<_>>()
    {
        failures.push(format!(
            "{}: members {names:?}, not the bundle's",
            file.display()
        ));
    } else if let Some(at) = layout_difference(file, &expected)? {
        // Pass 2: the file is exactly the tar its members make: every header, the padding
        // and the end (the data was checked in pass 1).
        failures.push(format!(
            "{}: byte {at} is not what the bundle's members make",
            file.display()
        ));
    }
    Ok(failures)
}

/// The first offset where `file` is not the tar `write_tar` makes of members `expected`
/// (name, size), data aside: streamed, nothing held but a block.
fn layout_difference(file: &Path, expected: &[(String, u64)]) -> anyhow::Result<Option<u64>> {
    let mut reader = std::io::BufReader::new(std::fs::File::open(file)?);
    let mut offset = 0u64;
    let mut block = [0u8; 512];
    let read_block = |reader: &mut std::io::BufReader<std::fs::File>,
                      block: &mut [u8; 512]|
     -> std::io::Result<bool> {
        match reader.read_exact(block) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(false),
            Err(error) => Err(error),
        }
    };
    for (name, size) in expected {
        let header = header_for(name, *size)?;
        if !read_block(&mut reader, &mut block)? {
            return Ok(Some(offset));
        }
        if let Some(at) = header
            .as_bytes()
            .iter()
            .zip(block.iter())
            .position(|(a, b)| a != b)
        {
            return Ok(Some(offset + at as u64));
        }
        offset += 512;
        // The data, then zeros to the next block.
        let blocks = size.div_ceil(512);
        for i in 0..blocks {
            if !read_block(&mut reader, &mut block)? {
                return Ok(Some(offset));
            }
            let data = (size - i * 512).min(512) as usize;
            if let Some(at) = block[data..].iter().position(|b| *b != 0) {
                return Ok(Some(offset + (data + at) as u64));
            }
            offset += 512;
        }
    }
    // The end: two zero blocks, then nothing.
    for _ in 0..2 {
        if !read_block(&mut reader, &mut block)? {
            return Ok(Some(offset));
        }
        if let Some(at) = block.iter().position(|b| *b != 0) {
            return Ok(Some(offset + at as u64));
        }
        offset += 512;
    }
    let mut rest = [0u8; 1];
    Ok((reader.read(&mut rest)? > 0).then_some(offset))
}
