//! The flags of the client commands (the clap types `mod.rs`'s `Command` embeds): where the
//! server and the weft home are (`ClientArgs`), and the arguments and sub-actions of `put`,
//! `review`, `ls`, `lineage`, `context`, `events`, `evidence` and `admin`. A leaf: the
//! commands import these; nothing here imports a command. Every flag's help is its doc.

use std::path::PathBuf;

use clap::Subcommand;

/// Where a client command finds the server and the agent's files.
#[derive(Clone, Debug, clap::Args)]
pub(super) struct ClientArgs {
    /// Base URL of the weft server.
    #[arg(
        long,
        env = "WEFT_SERVER",
        default_value = "http://127.0.0.1:7070",
        global = true
    )]
    pub(super) server: String,
    /// Directory with `agent.key` and `session.json` (default `~/.weft`).
    #[arg(long, env = "WEFT_HOME", global = true)]
    pub(super) home: Option<PathBuf>,
}

/// The flags of `weft put`: the file, and what its manifest will say about it.
#[derive(Debug, clap::Args)]
pub(super) struct PutArgs {
    #[command(flatten)]
    pub(super) client: ClientArgs,
    /// The file to upload; `-` reads stdin (spooled to the weft home, then removed).
    pub(super) file: PathBuf,
    #[arg(long)]
    pub(super) group: String,
    #[arg(long)]
    pub(super) mission: String,
    #[arg(long)]
    pub(super) work_item: String,
    /// The Execution Lease the manifest names (default: the one `weft work start` left in
    /// work.json for the WorkItem, else its current lease when this agent holds it).
    #[arg(long)]
    pub(super) lease: Option<String>,
    /// The ownership epoch the manifest names (default: the lease's, from the same place).
    #[arg(long)]
    pub(super) ownership_epoch: Option<u64>,
    #[arg(long)]
    pub(super) media_type: String,
    /// Schema URI or digest of the content, if any.
    #[arg(long)]
    pub(super) schema: Option<String>,
    /// A source artifact (blake3 digest); repeat for several.
    #[arg(long = "source")]
    pub(super) sources: Vec<String>,
    /// A tool as kind:id:version (kind is tool, model or capability); repeat for several.
    #[arg(long = "tool")]
    pub(super) tools: Vec<String>,
    #[arg(long, default_value = "internal")]
    pub(super) classification: String,
    /// An annotation key=value; repeat for several.
    #[arg(long = "annotation")]
    pub(super) annotations: Vec<String>,
    /// Files larger than this many bytes go up in chunks of this size through a resumable
    /// upload; `weft put` run again after an interruption resumes where the server stands.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    pub(super) chunk_size: u64,
    /// No progress bar.
    #[arg(long, short)]
    pub(super) quiet: bool,
    /// Print `{artifact, manifestId, sequence}` as JSON instead of the digest.
    #[arg(long)]
    pub(super) json: bool,
}

/// The flags of `weft review`.
#[derive(Debug, clap::Args)]
pub(super) struct ReviewArgs {
    #[command(flatten)]
    pub(super) client: ClientArgs,
    pub(super) work_item: String,
    /// The acceptance criterion the Evidence is about; with several checks, each records
    /// under CRITERION.<check> (so one check cannot contest another).
    #[arg(long)]
    pub(super) criterion: Option<String>,
    /// An artifact to check (blake3 digest); repeat for several.
    #[arg(long = "artifact", required = true)]
    pub(super) artifacts: Vec<String>,
    /// integrity or schema, optionally with its own criterion (schema=ac-2); repeat for
    /// several (default: integrity).
    #[arg(long = "check")]
    pub(super) checks: Vec<String>,
    /// The WorkItem's Mission, when its id is used in several.
    #[arg(long)]
    pub(super) mission: Option<String>,
    #[arg(long)]
    pub(super) json: bool,
}

/// The flags of `weft ls`: filters on the artifact listing.
#[derive(Debug, clap::Args)]
pub(super) struct LsArgs {
    #[command(flatten)]
    pub(super) client: ClientArgs,
    #[arg(long)]
    pub(super) mission: Option<String>,
    #[arg(long)]
    pub(super) work_item: Option<String>,
    #[arg(long)]
    pub(super) producer: Option<String>,
    #[arg(long)]
    pub(super) media_type: Option<String>,
    /// Only artifacts whose file name (what `weft put` recorded) starts with this.
    #[arg(long)]
    pub(super) name: Option<String>,
    /// Print JSON lines instead of a table.
    #[arg(long)]
    pub(super) json: bool,
}

/// The flags of `weft lineage`: which way to walk, how far, and how to print it.
#[derive(Debug, clap::Args)]
pub(super) struct LineageArgs {
    #[command(flatten)]
    pub(super) client: ClientArgs,
    pub(super) digest: String,
    /// Descendants instead of ancestors.
    #[arg(long)]
    pub(super) down: bool,
    #[arg(long)]
    pub(super) depth: Option<u32>,
    #[arg(long, default_value_t = 1000)]
    pub(super) limit: u32,
    /// tree, json, dot, mermaid, prov-json or intoto (an in-toto Statement signed by the server).
    #[arg(long, default_value = "tree")]
    pub(super) format: String,
    /// Follow this Mission's manifests: needed for the ancestors of bytes published in
    /// several Missions (each is its own provenance).
    #[arg(long)]
    pub(super) mission: Option<String>,
}

#[derive(Debug, Subcommand)]
pub(super) enum ContextAction {
    /// Sign the next version of a package (version 1, or the latest + 1 naming it as previous)
    /// in the session's Group; prints its id.
    Publish {
        #[arg(long)]
        package: String,
        #[arg(long)]
        mission: String,
        #[arg(long)]
        work_item: Option<String>,
        /// First Event of the Group's log it summarises.
        #[arg(long)]
        from: u64,
        /// Last Event it summarises (at most the head).
        #[arg(long)]
        to: u64,
        /// A cited Artifact digest (repeat).
        #[arg(long = "artifact")]
        artifacts: Vec<String>,
        #[arg(long = "decision")]
        decisions: Vec<String>,
        #[arg(long = "constraint")]
        constraints: Vec<String>,
        /// An unresolved question (repeat).
        #[arg(long = "question")]
        questions: Vec<String>,
        /// Print the server's answer as JSON instead of the id.
        #[arg(long)]
        json: bool,
    },
    /// Show the latest version (or --version N).
    Show {
        package: String,
        #[arg(long)]
        version: Option<u64>,
        #[arg(long)]
        json: bool,
    },
    /// List every version, oldest first.
    Versions { package: String },
    /// Check a version: its id, its signature and that its Event range lies within the log,
    /// chaining to the checkpoint the server's authority key signed.
    Verify {
        package: String,
        #[arg(long)]
        version: Option<u64>,
        /// The generator's public key (base64); without it, only a package this agent
        /// generated has its signature checked.
        #[arg(long, value_name = "KEY")]
        generator_key: Option<String>,
        /// Trust only this authority key (as for `weft events verify`).
        #[arg(long, value_name = "KEY", env = "WEFT_AUTHORITY_KEY")]
        authority_key: Option<String>,
    },
    /// Forward a version and the Artifacts it cites to another Group (a coordinator of both).
    Forward {
        package: String,
        #[arg(long)]
        to_group: String,
        #[arg(long)]
        version: Option<u64>,
        /// Print the server's answer as JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum EventsAction {
    /// Print Events (JSON lines) after a position; with --follow, keep printing live ones.
    Tail {
        #[arg(long)]
        group: String,
        #[arg(long, default_value_t = 0)]
        after: u64,
        #[arg(long)]
        follow: bool,
    },
    /// Print what one Agent did in a Group (JSON lines, newest first): the Commands it
    /// signed, what it published, reviewed and opened, as far as you may see.
    ///
    /// Example: `weft events by --group g1 --actor coordinator-1 --limit 20`
    By {
        #[arg(long)]
        group: String,
        /// The Agent whose acts to list.
        #[arg(long)]
        actor: String,
        /// At most this many Events (all when absent).
        #[arg(long)]
        limit: Option<u64>,
    },
    /// Re-check the whole hash chain and compare its head with the server's signed checkpoint.
    Verify {
        #[arg(long)]
        group: String,
        /// Trust only this authority key (base64 of the 32-byte Ed25519 public key, or its
        /// keyid `ed25519:<hex>`) instead of the keys the same server serves, so a server
        /// that rewrote its log and its key is caught. Get it once, out of band:
        /// `GET /v1/authority/keys` on a server you trust.
        #[arg(long, value_name = "KEY", env = "WEFT_AUTHORITY_KEY")]
        authority_key: Option<String>,
        /// A signed checkpoint this client saw before (written here after each success):
        /// refuse a head older than it, or a log that no longer holds it, as after the log's
        /// tail was cut.
        #[arg(long, value_name = "FILE")]
        since_checkpoint: Option<std::path::PathBuf>,
        /// A witness whose cosignature counts (its verifier key `NAME+ID+KEY`, what `weft
        /// witness` prints; repeatable): the transparency-log checkpoint must carry at least
        /// `--quorum` of them.
        #[arg(long = "witness", value_name = "VKEY")]
        witnesses: Vec<String>,
        /// How many of the `--witness` keys must have cosigned (default: all of them).
        #[arg(long)]
        quorum: Option<usize>,
        /// Print the verdict as one JSON object (a failure still exits non-zero).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum EvidenceAction {
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
        /// Print `{evidenceId, sequence}` as JSON instead of the id.
        #[arg(long)]
        json: bool,
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
pub(super) enum AdminAction {
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
    /// Retention, holds, collection, usage and quotas (issue #46).
    #[command(flatten)]
    Lifecycle(super::lifecycle::LifecycleAction),
    /// Register a schema URI as naming a published schema artifact.
    Schema {
        uri: String,
        /// The schema artifact's blake3 digest.
        artifact: String,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum GroupAction {
    Create { group: String },
}

#[derive(Debug, Subcommand)]
pub(super) enum AgentAction {
    Register {
        #[arg(long)]
        agent_id: String,
        /// Base64 public key; default: the key in the weft home.
        #[arg(long)]
        public_key: Option<String>,
        #[arg(long, default_value = "1")]
        card_version: String,
    },
    /// Deactivates an Agent everywhere: it opens no session and signs nothing new; its
    /// sessions and streams end.
    Deactivate { agent_id: String },
    /// Replaces an Agent's key: the old key verifies only what it signed before; the Agent's
    /// sessions end.
    RotateKey {
        agent_id: String,
        /// Base64 of the new 32-byte Ed25519 public key.
        #[arg(long)]
        public_key: String,
    },
    /// Shows an Agent: its keys (current first, retired ones with when) and Memberships.
    Show {
        agent_id: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum MemberAction {
    Set {
        group: String,
        agent_id: String,
        /// worker, coordinator, reviewer, auditor or approver; repeat for several.
        #[arg(long = "role", required = true)]
        roles: Vec<String>,
        /// Scope the Membership to this Mission (CTX-5); repeat for several; none: the Group.
        #[arg(long = "mission")]
        missions: Vec<String>,
    },
    /// Ends a Membership: the Agent's sessions in the Group end at once.
    Remove { group: String, agent_id: String },
    /// Lists a Group's Memberships: Agent, roles, scope, epoch.
    Ls {
        group: String,
        #[arg(long)]
        json: bool,
    },
}
