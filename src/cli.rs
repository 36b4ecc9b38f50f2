//! The `weft` command line: the server (`serve`), operator calls (`admin`), the Worker's
//! journey (`keygen`, `login`, `put`, `get`, `show`, `ls`) and offline checks (`fsck`).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use clap::{Parser, Subcommand};
use ed25519_dalek::SigningKey;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use weft_api::client::Client;
use weft_api::dsse::BASE64;
use weft_api::manifest::{Classification, Content, Execution, Producer, Tool, ToolKind};
use weft_api::session::Role;
use weft_api::{ArtifactId, Digest, Id, KeyId, Manifest};

use crate::config::Config;
use crate::telemetry::LogArgs;

#[derive(Debug, Parser)]
#[command(
    name = "weft",
    version,
    about = "Content-addressed artifact store and event log of an MWP Group Authority"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    pub log: LogArgs,
}

/// Where a client command finds the server and the agent's files.
#[derive(Clone, Debug, clap::Args)]
struct ClientArgs {
    /// Base URL of the weft server.
    #[arg(
        long,
        env = "WEFT_SERVER",
        default_value = "http://127.0.0.1:7070",
        global = true
    )]
    server: String,
    /// Directory with `agent.key` and `session.json` (default `~/.weft`).
    #[arg(long, env = "WEFT_HOME", global = true)]
    home: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server.
    Serve(Config),
    /// Create an Ed25519 agent key (`agent.key` in the weft home, mode 0600).
    Keygen {
        #[command(flatten)]
        client: ClientArgs,
        /// Overwrite an existing key.
        #[arg(long)]
        force: bool,
    },
    /// Operator calls, with the admin token.
    Admin {
        #[command(flatten)]
        client: ClientArgs,
        /// The admin token (default: read from --admin-token-file).
        #[arg(long, env = "WEFT_ADMIN_TOKEN")]
        admin_token: Option<String>,
        /// File holding the admin token.
        #[arg(long, default_value = "weft-data/admin.token")]
        admin_token_file: PathBuf,
        #[command(subcommand)]
        action: AdminAction,
    },
    /// Open a session for this agent in a Group (signed challenge).
    Login {
        #[command(flatten)]
        client: ClientArgs,
        #[arg(long)]
        agent_id: String,
        #[arg(long)]
        group: String,
        /// The agent card version manifests will carry.
        #[arg(long, default_value = "1")]
        card_version: String,
    },
    /// Upload a file and publish its signed manifest; prints the artifact digest.
    Put {
        #[command(flatten)]
        client: ClientArgs,
        file: PathBuf,
        #[arg(long)]
        group: String,
        #[arg(long)]
        mission: String,
        #[arg(long)]
        work_item: String,
        #[arg(long)]
        lease: String,
        #[arg(long, default_value_t = 1)]
        ownership_epoch: u64,
        #[arg(long)]
        media_type: String,
        /// Schema URI or digest of the content, if any.
        #[arg(long)]
        schema: Option<String>,
        /// A source artifact (blake3 digest); repeat for several.
        #[arg(long = "source")]
        sources: Vec<String>,
        /// A tool as kind:id:version (kind is tool, model or capability); repeat for several.
        #[arg(long = "tool")]
        tools: Vec<String>,
        #[arg(long, default_value = "internal")]
        classification: String,
        /// An annotation key=value; repeat for several.
        #[arg(long = "annotation")]
        annotations: Vec<String>,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Download an artifact, verified.
    Get {
        #[command(flatten)]
        client: ClientArgs,
        digest: String,
        #[arg(long, short)]
        output: PathBuf,
        #[arg(long, short)]
        quiet: bool,
    },
    /// Show an artifact's manifests, decoded and signature-checked.
    Show {
        #[command(flatten)]
        client: ClientArgs,
        digest: String,
    },
    /// List artifacts.
    Ls {
        #[command(flatten)]
        client: ClientArgs,
        #[arg(long)]
        mission: Option<String>,
        #[arg(long)]
        work_item: Option<String>,
        #[arg(long)]
        producer: Option<String>,
        #[arg(long)]
        media_type: Option<String>,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Record and list Evidence.
    Evidence {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: EvidenceAction,
    },
    /// Where an artifact came from (or, with --down, what was derived from it).
    Lineage {
        #[command(flatten)]
        client: ClientArgs,
        digest: String,
        /// Descendants instead of ancestors.
        #[arg(long)]
        down: bool,
        #[arg(long)]
        depth: Option<u32>,
        #[arg(long, default_value_t = 1000)]
        limit: u32,
        /// tree, json, dot, mermaid, prov-json or intoto (an in-toto Statement signed by the server).
        #[arg(long, default_value = "tree")]
        format: String,
    },
    /// Read a Group's event log.
    Events {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: EventsAction,
    },
    /// The latest verdict per acceptance criterion of a WorkItem.
    Criteria {
        #[command(flatten)]
        client: ClientArgs,
        work_item: String,
        #[arg(long)]
        json: bool,
    },
    /// Re-hash every blob and re-check every row, signature and Group chain (offline).
    Fsck {
        #[arg(long, default_value = "weft-data")]
        data_dir: PathBuf,
    },
    /// Print both digests of a file, hashed with the server's pipeline (benchmark baseline).
    #[command(hide = true)]
    Hash { file: PathBuf },
}

#[derive(Debug, Subcommand)]
enum EventsAction {
    /// Print Events (JSON lines) after a position; with --follow, keep printing live ones.
    Tail {
        #[arg(long)]
        group: String,
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long)]
        follow: bool,
    },
    /// Re-check the whole hash chain and compare its head with the server's signed checkpoint.
    Verify {
        #[arg(long)]
        group: String,
    },
}

#[derive(Debug, Subcommand)]
enum EvidenceAction {
    /// Sign Evidence with the agent key and record it.
    Add {
        #[arg(long)]
        mission: String,
        #[arg(long)]
        work_item: String,
        #[arg(long)]
        criterion: String,
        /// pass, fail or inconclusive.
        #[arg(long)]
        outcome: String,
        /// integrity_check, schema_validation, automated_test, business_rule, reviewer_agent or human.
        #[arg(long)]
        method: String,
        #[arg(long, default_value = "weft-cli")]
        method_name: String,
        #[arg(long, default_value = env!("CARGO_PKG_VERSION"))]
        method_version: String,
        /// A cited artifact (blake3 digest); repeat for several.
        #[arg(long = "artifact")]
        artifacts: Vec<String>,
        /// Short structured prose (at most 4 KiB).
        #[arg(long, default_value = "")]
        summary: String,
        /// A metric name=value (numbers stay numbers); repeat for several.
        #[arg(long = "metric")]
        metrics: Vec<String>,
        /// The Evidence this record corrects.
        #[arg(long)]
        supersedes: Option<String>,
    },
    /// List Evidence, newest first.
    Ls {
        #[arg(long)]
        work_item: Option<String>,
        #[arg(long)]
        criterion: Option<String>,
        #[arg(long)]
        outcome: Option<String>,
        #[arg(long)]
        method: Option<String>,
        #[arg(long)]
        producer: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
enum AdminAction {
    /// Groups.
    Group {
        #[command(subcommand)]
        action: GroupAction,
    },
    /// Agents.
    Agent {
        #[command(subcommand)]
        action: AgentAction,
    },
    /// Memberships.
    Member {
        #[command(subcommand)]
        action: MemberAction,
    },
}

#[derive(Debug, Subcommand)]
enum GroupAction {
    Create { group: String },
}

#[derive(Debug, Subcommand)]
enum AgentAction {
    Register {
        #[arg(long)]
        agent_id: String,
        /// Base64 public key; default: the key in the weft home.
        #[arg(long)]
        public_key: Option<String>,
        #[arg(long, default_value = "1")]
        card_version: String,
    },
}

#[derive(Debug, Subcommand)]
enum MemberAction {
    Set {
        group: String,
        agent_id: String,
        /// worker, coordinator, reviewer or auditor; repeat for several.
        #[arg(long = "role", required = true)]
        roles: Vec<String>,
    },
}

/// `agent.key`: the secret key, with its public half for convenience.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyFile {
    secret_key: String,
    public_key: String,
    keyid: String,
}

/// `session.json`, written by `weft login`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionFile {
    server: String,
    token: String,
    agent_id: String,
    group_id: String,
    agent_card_version: String,
    expires_at: String,
}

impl ClientArgs {
    fn home(&self) -> anyhow::Result<PathBuf> {
        if let Some(home) = &self.home {
            return Ok(home.clone());
        }
        let user_home = std::env::var_os("HOME").context("set WEFT_HOME or HOME")?;
        Ok(PathBuf::from(user_home).join(".weft"))
    }

    fn key(&self) -> anyhow::Result<SigningKey> {
        let path = self.home()?.join("agent.key");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {} (run `weft keygen`)", path.display()))?;
        let file: KeyFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let secret: [u8; 32] = BASE64
            .decode(&file.secret_key)
            .ok()
            .and_then(|bytes| bytes.try_into().ok())
            .context("agent.key: secretKey is not base64 of 32 bytes")?;
        Ok(SigningKey::from_bytes(&secret))
    }

    fn session(&self) -> anyhow::Result<(SessionFile, Client)> {
        let path = self.home()?.join("session.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {} (run `weft login`)", path.display()))?;
        let session: SessionFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let client = Client::new(self.server.clone(), Some(session.token.clone()));
        Ok((session, client))
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
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

fn parse_role(text: &str) -> anyhow::Result<Role> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| anyhow::anyhow!("role must be worker, coordinator, reviewer or auditor"))
}

impl Cli {
    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Serve(config) => crate::serve::run(config).await,
            Command::Keygen { client, force } => keygen(&client, force),
            Command::Admin {
                client,
                admin_token,
                admin_token_file,
                action,
            } => {
                let token = match admin_token {
                    Some(token) => token,
                    None => std::fs::read_to_string(&admin_token_file)
                        .with_context(|| {
                            format!(
                                "reading {} (or pass --admin-token)",
                                admin_token_file.display()
                            )
                        })?
                        .trim()
                        .to_owned(),
                };
                admin(
                    &client,
                    Client::new(client.server.clone(), Some(token)),
                    action,
                )
                .await
            }
            Command::Login {
                client,
                agent_id,
                group,
                card_version,
            } => login(&client, &agent_id, &group, card_version).await,
            Command::Put {
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
            } => {
                let (session, api) = client.session()?;
                let key = client.key()?;
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
                    work_item_id: Id::parse("work-item", &work_item)?,
                    execution: Execution {
                        lease_id: Id::parse("lease", &lease)?,
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
                    classification: serde_json::from_value::<Classification>(
                        serde_json::Value::String(classification),
                    )
                    .map_err(|_| {
                        anyhow::anyhow!(
                            "classification must be public, internal, confidential or restricted"
                        )
                    })?,
                    retrieval_uri: format!(
                        "{}/v1/artifacts/{}/content",
                        api.base(),
                        receipt.blake3
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
                let published = api.publish(&key, &manifest).await?;
                eprintln!(
                    "published manifest {} at sequence {}",
                    published.manifest_id, published.sequence
                );
                println!("{}", published.artifact);
                Ok(())
            }
            Command::Get {
                client,
                digest,
                output,
                quiet,
            } => {
                let (_, api) = client.session()?;
                let digest = Digest::parse(&digest)?;
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
                        eprintln!("verified {} ({} bytes)", digests.blake3, digests.size);
                        Ok(())
                    }
                    Err(error) => {
                        let _ = tokio::fs::remove_file(&partial).await;
                        Err(error).context("download failed; nothing was written")
                    }
                }
            }
            Command::Show { client, digest } => {
                let (_, api) = client.session()?;
                let view = api.artifact(&Digest::parse(&digest)?).await?;
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
                    let payload_ok =
                        BASE64
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
            Command::Ls {
                client,
                mission,
                work_item,
                producer,
                media_type,
                json,
            } => {
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
                                item.artifact,
                                item.size,
                                item.media_type,
                                item.work_item_id,
                                item.producer
                            );
                        }
                        Ok(())
                    },
                )
                .await
            }
            Command::Evidence { client, action } => evidence(&client, action).await,
            Command::Events { client, action } => events(&client, action).await,
            Command::Lineage {
                client,
                digest,
                down,
                depth,
                limit,
                format,
            } => {
                let (_, api) = client.session()?;
                let digest = Digest::parse(&digest)?;
                let mut query: Vec<(&str, String)> = vec![
                    (
                        "direction",
                        if down { "descendants" } else { "ancestors" }.to_owned(),
                    ),
                    ("limit", limit.to_string()),
                ];
                if let Some(depth) = depth {
                    query.push(("depth", depth.to_string()));
                }
                match format.as_str() {
                    "dot" | "mermaid" | "json" | "prov-json" | "intoto" => {
                        query.push(("format", format.clone()));
                        print!(
                            "{}",
                            api.get_text(&format!("/v1/artifacts/{digest}/provenance"), &query)
                                .await?
                        );
                        if matches!(format.as_str(), "json" | "prov-json" | "intoto") {
                            println!();
                        }
                    }
                    "tree" => {
                        let text = api
                            .get_text(&format!("/v1/artifacts/{digest}/provenance"), &query)
                            .await?;
                        print_tree(&serde_json::from_str(&text)?, down);
                    }
                    other => bail!(
                        "--format {other:?} is not tree, json, dot, mermaid, prov-json or intoto"
                    ),
                }
                Ok(())
            }
            Command::Criteria {
                client,
                work_item,
                json,
            } => {
                let (_, api) = client.session()?;
                let view = api.criteria(&Id::parse("work item", &work_item)?).await?;
                if json {
                    println!("{}", serde_json::to_string_pretty(&view)?);
                    return Ok(());
                }
                println!(
                    "{:<24} {:<13} {:>4} {:>4} {:>4}  {:<9} PRODUCERS",
                    "CRITERION", "LATEST", "PASS", "FAIL", "INC", "CONTESTED"
                );
                for row in &view.criteria {
                    println!(
                        "{:<24} {:<13} {:>4} {:>4} {:>4}  {:<9} {}",
                        row.criterion,
                        format!("{} ({})", row.latest.outcome.as_str(), row.latest.producer),
                        row.counts.pass,
                        row.counts.fail,
                        row.counts.inconclusive,
                        if row.contested { "yes" } else { "no" },
                        row.producers.join(",")
                    );
                }
                Ok(())
            }
            Command::Fsck { data_dir } => fsck(&data_dir).await,
            Command::Hash { file } => {
                let reader = tokio::fs::File::open(&file).await?;
                let stream = tokio_util::io::ReaderStream::with_capacity(reader, 1024 * 1024);
                let digests = weft_storage::digest_stream(stream).await?;
                println!("{} {} {}", digests.blake3, digests.sha256, digests.size);
                Ok(())
            }
        }
    }
}

fn keygen(client: &ClientArgs, force: bool) -> anyhow::Result<()> {
    let path = client.home()?.join("agent.key");
    if path.exists() && !force {
        bail!("{} exists; pass --force to replace it", path.display());
    }
    let key = weft_api::dsse::generate_key();
    let public = key.verifying_key();
    let file = KeyFile {
        secret_key: BASE64.encode(key.to_bytes()),
        public_key: BASE64.encode(public.as_bytes()),
        keyid: KeyId::of(&public).to_string(),
    };
    write_private(&path, &serde_json::to_vec_pretty(&file)?)?;
    eprintln!("wrote {}", path.display());
    println!("publicKey {}", file.public_key);
    println!("keyid     {}", file.keyid);
    Ok(())
}

async fn admin(client_args: &ClientArgs, api: Client, action: AdminAction) -> anyhow::Result<()> {
    match action {
        AdminAction::Group {
            action: GroupAction::Create { group },
        } => {
            let created = api.create_group(&Id::parse("group", &group)?).await?;
            println!(
                "group {group} {}",
                if created { "created" } else { "already exists" }
            );
        }
        AdminAction::Agent {
            action:
                AgentAction::Register {
                    agent_id,
                    public_key,
                    card_version,
                },
        } => {
            let key = match public_key {
                Some(text) => weft_api::dsse::parse_public_key(&text)?,
                None => client_args.key()?.verifying_key(),
            };
            let keyid = api
                .register_agent(&Id::parse("agent-id", &agent_id)?, &key, &card_version)
                .await?;
            println!("agent {agent_id} registered with {keyid}");
        }
        AdminAction::Member {
            action:
                MemberAction::Set {
                    group,
                    agent_id,
                    roles,
                },
        } => {
            let roles = roles
                .iter()
                .map(|r| parse_role(r))
                .collect::<Result<Vec<_>, _>>()?;
            let membership = api
                .set_membership(
                    &Id::parse("group", &group)?,
                    &Id::parse("agent-id", &agent_id)?,
                    &roles,
                )
                .await?;
            println!(
                "{agent_id} in {group}: {:?} (membership epoch {})",
                membership.roles, membership.epoch
            );
        }
    }
    Ok(())
}

async fn login(
    client: &ClientArgs,
    agent_id: &str,
    group: &str,
    card_version: String,
) -> anyhow::Result<()> {
    let key = client.key()?;
    let api = Client::new(client.server.clone(), None);
    let grant = api
        .open_session(
            &key,
            &Id::parse("agent-id", agent_id)?,
            &Id::parse("group", group)?,
        )
        .await?;
    let session = SessionFile {
        server: client.server.clone(),
        token: grant.token,
        agent_id: agent_id.to_owned(),
        group_id: group.to_owned(),
        agent_card_version: card_version,
        expires_at: grant.expires_at.to_rfc3339(),
    };
    write_private(
        &client.home()?.join("session.json"),
        &serde_json::to_vec_pretty(&session)?,
    )?;
    println!(
        "session open for {agent_id} in {group} (session epoch {}, expires {})",
        grant.session_epoch, session.expires_at
    );
    Ok(())
}

async fn fsck(data_dir: &Path) -> anyhow::Result<()> {
    if !data_dir.join("index.sqlite").exists() {
        bail!("{} holds no weft index", data_dir.display());
    }
    let mut options = weft_storage::Options::on_disk(data_dir);
    options.sweep_staging = false;
    // Snapshot signatures are checked against the server's own key.
    if data_dir.join("authority.key").exists() {
        options.authority = std::sync::Arc::new(crate::serve::authority_key(data_dir)?);
    }
    let store = weft_storage::Store::open(options).await?;
    let report = store.fsck().await?;
    println!(
        "checked {} blobs ({} bytes), {} manifests, {} events",
        report.n_blobs, report.n_bytes, report.n_manifests, report.n_events
    );
    for problem in &report.problems {
        println!("PROBLEM {problem}");
    }
    if report.problems.is_empty() {
        println!("ok");
        Ok(())
    } else {
        bail!("{} problems found", report.problems.len())
    }
}

/// The filters that were given, as query pairs.
fn given<const N: usize>(
    pairs: [(&'static str, Option<String>); N],
) -> Vec<(&'static str, String)> {
    pairs
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
}

/// Walks every page of a cursor-paged listing (`after` = the previous page's `next`).
async fn each_page<T, F, Fut>(
    filters: &[(&'static str, String)],
    mut fetch: F,
    mut each: impl FnMut(&T) -> anyhow::Result<()>,
) -> anyhow::Result<()>
where
    F: FnMut(Vec<(&'static str, String)>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<(Vec<T>, Option<u64>)>>,
{
    let mut after: Option<u64> = None;
    loop {
        let mut page_filters = filters.to_vec();
        if let Some(after) = after {
            page_filters.push(("after", after.to_string()));
        }
        let (items, next) = fetch(page_filters).await?;
        for item in &items {
            each(item)?;
        }
        match next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}

fn parse_word<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> anyhow::Result<T> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| anyhow::anyhow!("{what} {text:?} is not one of the allowed values"))
}

async fn evidence(client: &ClientArgs, action: EvidenceAction) -> anyhow::Result<()> {
    use weft_api::evidence::{Evidence, EvidenceResult, Method, Metric, Subject, SubjectKind};
    let (session, api) = client.session()?;
    match action {
        EvidenceAction::Add {
            mission,
            work_item,
            criterion,
            outcome,
            method,
            method_name,
            method_version,
            artifacts,
            summary,
            metrics,
            supersedes,
        } => {
            let key = client.key()?;
            let work_item_id = Id::parse("work item", &work_item)?;
            let metrics = metrics
                .iter()
                .map(|pair| {
                    let (name, value) =
                        pair.split_once('=').context("--metric wants name=value")?;
                    let value = value
                        .parse::<f64>()
                        .map(Metric::Number)
                        .unwrap_or_else(|_| Metric::Text(value.to_owned()));
                    Ok((name.to_owned(), value))
                })
                .collect::<anyhow::Result<_>>()?;
            let evidence = Evidence {
                subject: Subject {
                    kind: SubjectKind::WorkItem,
                    id: work_item_id.to_string(),
                },
                mission_id: Id::parse("mission", &mission)?,
                group_id: Id::parse("group", &session.group_id)?,
                work_item_id,
                criterion,
                method: Method {
                    kind: parse_word("method", &method)?,
                    name: method_name,
                    version: method_version,
                },
                result: EvidenceResult {
                    outcome: parse_word("outcome", &outcome)?,
                    summary,
                    metrics,
                },
                producer: Producer {
                    agent_id: Id::parse("agentId", &session.agent_id)?,
                    agent_card_version: session.agent_card_version.clone(),
                },
                timestamp: chrono::Utc::now().fixed_offset(),
                artifacts: artifacts
                    .iter()
                    .map(|a| ArtifactId::parse(a))
                    .collect::<Result<_, _>>()?,
                supersedes: supersedes.as_deref().map(ArtifactId::parse).transpose()?,
            };
            let recorded = api.record_evidence(&key, &evidence).await?;
            eprintln!("recorded at sequence {}", recorded.sequence);
            println!("{}", recorded.evidence_id);
        }
        EvidenceAction::Ls {
            work_item,
            criterion,
            outcome,
            method,
            producer,
            json,
        } => {
            let filters = given([
                ("workItemId", work_item),
                ("criterion", criterion),
                ("outcome", outcome),
                ("method", method),
                ("producer", producer),
            ]);
            let api = &api;
            each_page(
                &filters,
                |page_filters| async move {
                    let page = api.list_evidence(&page_filters).await?;
                    Ok((page.items, page.next))
                },
                |record| {
                    if json {
                        println!("{}", serde_json::to_string(record)?);
                    } else {
                        let evidence = &record.evidence;
                        println!(
                            "{}  {:<10} {:<12} {:<18} {:<12} {}",
                            record.evidence_id,
                            evidence.work_item_id,
                            evidence.criterion,
                            evidence.method.kind.as_str(),
                            evidence.result.outcome.as_str(),
                            evidence.producer.agent_id
                        );
                    }
                    Ok(())
                },
            )
            .await?;
        }
    }
    Ok(())
}

async fn events(client: &ClientArgs, action: EventsAction) -> anyhow::Result<()> {
    use futures::StreamExt as _;
    let (_, api) = client.session()?;
    match action {
        EventsAction::Tail {
            group,
            after,
            follow,
        } => {
            let group = Id::parse("group", &group)?;
            if !follow {
                let mut after = after;
                loop {
                    let page = api.events(&group, after, 1000).await?;
                    let Some(last) = page.last() else { break };
                    after = last.sequence;
                    for event in &page {
                        println!("{}", serde_json::to_string(event)?);
                    }
                }
                return Ok(());
            }
            let response = api.event_stream(&group, after).await?;
            let mut body = response.bytes_stream();
            let mut decoder = weft_api::subscription::SseDecoder::default();
            while let Some(chunk) = body.next().await {
                for frame in decoder.push(&chunk?) {
                    println!("{}", frame.data);
                }
            }
            Ok(())
        }
        EventsAction::Verify { group } => {
            let group = Id::parse("group", &group)?;
            // The checkpoint first: the chain read afterwards must reach at least its head.
            let signed = api.checkpoint(&group).await?;
            let keys = api.authority_keys().await?;
            let trusted = keys
                .keys
                .iter()
                .filter_map(|key| weft_api::dsse::parse_public_key(&key.public_key).ok())
                .any(|key| {
                    signed
                        .envelope
                        .verify(weft_api::dsse::CHECKPOINT_TYPE, &key)
                        .is_ok_and(|payload| {
                            serde_json::from_slice::<weft_api::views::Checkpoint>(payload.value())
                                .ok()
                                .as_ref()
                                == Some(&signed.checkpoint)
                        })
                });
            if !trusted {
                bail!("the checkpoint is not signed by the server's authority key");
            }
            let (mut sequence, mut head) = (0u64, weft_api::EventHash::GENESIS);
            // Compacted history first: each archive, chained on from the previous one, must end
            // at the chain hash its authority-signed snapshot reference states.
            let authority: Vec<_> = keys
                .keys
                .iter()
                .filter_map(|key| weft_api::dsse::parse_public_key(&key.public_key).ok())
                .collect();
            for snapshot in api.snapshots(&group).await?.snapshots {
                let signed_ok = authority.iter().any(|key| {
                    snapshot
                        .envelope
                        .verify(weft_api::dsse::SNAPSHOT_TYPE, key)
                        .is_ok_and(|payload| {
                            serde_json::from_slice::<weft_api::views::SnapshotReference>(
                                payload.value(),
                            )
                            .ok()
                            .as_ref()
                                == Some(&snapshot.reference)
                        })
                });
                if !signed_ok {
                    bail!(
                        "snapshot {} is not signed by the server's authority key",
                        snapshot.reference.sequence
                    );
                }
                let mut archive = Vec::new();
                let digests = api
                    .download_path(
                        &format!("/v1/groups/{group}/snapshots/blobs/{}", snapshot.archive),
                        &mut archive,
                    )
                    .await?;
                if digests.blake3 != snapshot.archive {
                    bail!("archive {} does not hash to its name", snapshot.archive);
                }
                let events: Vec<weft_api::Event> = archive
                    .split(|b| *b == b'\n')
                    .filter(|line| !line.is_empty())
                    .map(serde_json::from_slice)
                    .collect::<Result<_, _>>()?;
                (sequence, head) = weft_api::event::verify_chain(sequence, head, &events)
                    .map_err(|problem| anyhow::anyhow!("archive chain broken: {problem}"))?;
                if (sequence, head)
                    != (
                        snapshot.reference.sequence,
                        snapshot.reference.event_chain_hash,
                    )
                {
                    bail!(
                        "archive of snapshot {} does not end at its signed chain hash",
                        snapshot.reference.sequence
                    );
                }
            }
            let mut hash_at_checkpoint = (signed.checkpoint.sequence == sequence).then_some(head);
            loop {
                let page = api.events(&group, sequence, 1000).await?;
                if page.is_empty() {
                    break;
                }
                (sequence, head) = weft_api::event::verify_chain(sequence, head, &page)
                    .map_err(|problem| anyhow::anyhow!("chain broken: {problem}"))?;
                if let Some(event) = page
                    .iter()
                    .find(|e| e.sequence == signed.checkpoint.sequence)
                {
                    hash_at_checkpoint = Some(event.hash);
                }
            }
            match hash_at_checkpoint {
                Some(hash) if hash == signed.checkpoint.hash => {
                    println!(
                        "ok: {sequence} events chain from genesis; sequence {} matches the signed checkpoint",
                        signed.checkpoint.sequence
                    );
                    Ok(())
                }
                Some(_) => bail!(
                    "the chain disagrees with the signed checkpoint at sequence {}",
                    signed.checkpoint.sequence
                ),
                None => bail!(
                    "the log ends before the signed checkpoint ({})",
                    signed.checkpoint.sequence
                ),
            }
        }
    }
}

/// Prints a lineage answer as an indented tree: each artifact under the one it was reached
/// from, with its media type, WorkItem and producer.
fn print_tree(lineage: &serde_json::Value, down: bool) {
    use std::collections::{HashMap, HashSet};
    let artifacts = lineage["artifacts"].as_array().cloned().unwrap_or_default();
    let describe = |artifact: &serde_json::Value| {
        let manifest = &artifact["manifests"][0];
        format!(
            "{}  {}  {} by {}",
            artifact["id"].as_str().unwrap_or_default(),
            manifest["mediaType"].as_str().unwrap_or("-"),
            manifest["workItemId"].as_str().unwrap_or("-"),
            manifest["producer"].as_str().unwrap_or("-")
        )
    };
    let by_id: HashMap<&str, &serde_json::Value> = artifacts
        .iter()
        .filter_map(|a| Some((a["id"].as_str()?, a)))
        .collect();
    let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
    for edge in lineage["edges"].as_array().into_iter().flatten() {
        if edge["type"] != "derivedFrom" {
            continue;
        }
        let (child, source) = (
            edge["from"].as_str().unwrap_or_default(),
            edge["to"].as_str().unwrap_or_default(),
        );
        let (parent, next) = if down {
            (source, child)
        } else {
            (child, source)
        };
        children.entry(parent).or_default().push(next);
    }
    let Some(root) = lineage["root"].as_str() else {
        return;
    };
    let mut printed = HashSet::new();
    let mut stack = vec![(root, 0usize)];
    while let Some((id, indent)) = stack.pop() {
        let Some(artifact) = by_id.get(id) else {
            continue;
        };
        let again = !printed.insert(id);
        println!(
            "{}{}{}",
            "  ".repeat(indent),
            describe(artifact),
            if again { "  (see above)" } else { "" }
        );
        if again {
            continue;
        }
        for next in children.get(id).into_iter().flatten().rev() {
            stack.push((next, indent + 1));
        }
    }
    let withheld = lineage["withheld"].as_u64().unwrap_or(0);
    if withheld > 0 {
        println!("({withheld} nodes in Groups you cannot read were withheld)");
    }
    if lineage["truncated"].as_bool() == Some(true) {
        println!("(truncated; raise --limit or narrow --depth)");
    }
}
