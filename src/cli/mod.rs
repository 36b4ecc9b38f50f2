//! The `weft` command line: the server (`serve`), operator calls (`admin`), the Worker's
//! journey (`keygen`, `login`, `put`, `get`, `show`, `ls`), Missions and WorkItems
//! (`mission`, `work`: signed Commands) and offline checks (`fsck`).
//!
//! This file holds the flags (the clap types) and `Cli::run`, which only dispatches. Each
//! command lives in the module named after what it owns: `keys` (the agent key and the files
//! under the weft home), `session` (login and `session.json`), `admin`, `artifacts`,
//! `evidence`, `events`, `lineage`, `work` and `fsck`; `pages` walks cursor-paged listings for
//! them. It is long because every flag of every command is declared here, next to its help.
//! Output text, flags and exit codes are part of the interface: the e2e tests run the binary.

mod account;
mod admin;
mod artifacts;
mod context;
mod errors;
mod events;
mod evidence;
mod fsck;
mod keys;
mod lineage;
mod pages;
mod preflight;
mod resume;
mod review;
mod session;
mod show;
mod table;
mod work;
mod work_args;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub use errors::explain;
use table::{when, when_text};
use work_args::{MissionAction, WorkAction};

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
    Put(PutArgs),
    /// Download an artifact, verified.
    Get {
        #[command(flatten)]
        client: ClientArgs,
        digest: String,
        /// Where to write it; `-` is stdout. Default: the manifest's `name` annotation, else
        /// the digest's hex, in the current directory.
        #[arg(long, short)]
        output: Option<PathBuf>,
        #[arg(long, short)]
        quiet: bool,
    },
    /// Show an artifact's manifests, each signature verified against a key trusted here.
    Show {
        #[command(flatten)]
        client: ClientArgs,
        digest: String,
        /// A producer's public key (base64) to verify its manifests with; repeat for several.
        /// Without one, only this agent's own manifests and server-signed records are checked.
        #[arg(long = "producer-key", value_name = "KEY")]
        producer_keys: Vec<String>,
        /// Trust only this authority key (as for `weft events verify`).
        #[arg(long, value_name = "KEY", env = "WEFT_AUTHORITY_KEY")]
        authority_key: Option<String>,
    },
    /// Who this session is: agent, Group, expiry, and whether the server still accepts it.
    Whoami {
        #[command(flatten)]
        client: ClientArgs,
        /// Print only the session's bearer token (for curl: `-H "Authorization: Bearer
        /// $(weft whoami --token)"`); nothing is asked of the server.
        #[arg(long)]
        token: bool,
    },
    /// Forget the session (`session.json`); the agent key stays.
    Logout {
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Run the built-in reviewer on a WorkItem: server-signed Evidence, one record per check.
    Review(ReviewArgs),
    /// List artifacts.
    Ls(LsArgs),
    /// Record and list Evidence.
    Evidence {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: EvidenceAction,
    },
    /// Where an artifact came from (or, with --down, what was derived from it).
    Lineage(LineageArgs),
    /// Context Packages: publish, show, list versions, verify against the log, forward.
    Context {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: ContextAction,
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
    /// Missions: create, show, and close them (signed Commands of the session's Group).
    Mission {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: MissionAction,
    },
    /// WorkItems: authorize, offer, accept, run and close them; show one or a Mission's graph.
    Work {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: WorkAction,
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

/// The flags of `weft put`: the file, and what its manifest will say about it.
#[derive(Debug, clap::Args)]
struct PutArgs {
    #[command(flatten)]
    client: ClientArgs,
    /// The file to upload; `-` reads stdin (spooled to the weft home, then removed).
    file: PathBuf,
    #[arg(long)]
    group: String,
    #[arg(long)]
    mission: String,
    #[arg(long)]
    work_item: String,
    /// The Execution Lease the manifest names (default: the one `weft work start` left in
    /// work.json for the WorkItem, else its current lease when this agent holds it).
    #[arg(long)]
    lease: Option<String>,
    /// The ownership epoch the manifest names (default: the lease's, from the same place).
    #[arg(long)]
    ownership_epoch: Option<u64>,
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
    /// Files larger than this many bytes go up in chunks of this size through a resumable
    /// upload; `weft put` run again after an interruption resumes where the server stands.
    #[arg(long, default_value_t = 8 * 1024 * 1024)]
    chunk_size: u64,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
}

/// The flags of `weft review`.
#[derive(Debug, clap::Args)]
struct ReviewArgs {
    #[command(flatten)]
    client: ClientArgs,
    work_item: String,
    /// The acceptance criterion the Evidence is about; with several checks, each records
    /// under CRITERION.<check> (so one check cannot contest another).
    #[arg(long)]
    criterion: Option<String>,
    /// An artifact to check (blake3 digest); repeat for several.
    #[arg(long = "artifact", required = true)]
    artifacts: Vec<String>,
    /// integrity or schema, optionally with its own criterion (schema=ac-2); repeat for
    /// several (default: integrity).
    #[arg(long = "check")]
    checks: Vec<String>,
    /// The WorkItem's Mission, when its id is used in several.
    #[arg(long)]
    mission: Option<String>,
    #[arg(long)]
    json: bool,
}

/// The flags of `weft ls`: filters on the artifact listing.
#[derive(Debug, clap::Args)]
struct LsArgs {
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
}

/// The flags of `weft lineage`: which way to walk, how far, and how to print it.
#[derive(Debug, clap::Args)]
struct LineageArgs {
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
}

#[derive(Debug, Subcommand)]
enum ContextAction {
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
    },
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
    /// Register a schema URI as naming a published schema artifact.
    Schema {
        uri: String,
        /// The schema artifact's blake3 digest.
        artifact: String,
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
enum MemberAction {
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

impl Cli {
    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Serve(config) => crate::serve::run(config).await,
            Command::Keygen { client, force } => keys::keygen(&client, force),
            Command::Admin {
                client,
                admin_token,
                admin_token_file,
                action,
            } => admin::run(&client, admin_token, &admin_token_file, action).await,
            Command::Login {
                client,
                agent_id,
                group,
                card_version,
            } => session::login(&client, &agent_id, &group, card_version).await,
            Command::Put(args) => artifacts::put(args).await,
            Command::Get {
                client,
                digest,
                output,
                quiet,
            } => artifacts::get(&client, &digest, output.as_deref(), quiet).await,
            Command::Show {
                client,
                digest,
                producer_keys,
                authority_key,
            } => show::show(&client, &digest, &producer_keys, authority_key.as_deref()).await,
            Command::Whoami { client, token } => account::whoami(&client, token).await,
            Command::Logout { client } => account::logout(&client),
            Command::Review(args) => review::run(args).await,
            Command::Ls(args) => artifacts::ls(args).await,
            Command::Evidence { client, action } => evidence::run(&client, action).await,
            Command::Events { client, action } => events::run(&client, action).await,
            Command::Context { client, action } => context::run(&client, action).await,
            Command::Lineage(args) => lineage::print(args).await,
            Command::Criteria {
                client,
                work_item,
                json,
            } => evidence::criteria(&client, &work_item, json).await,
            Command::Mission { client, action } => work::mission(&client, action).await,
            Command::Work { client, action } => work::work(&client, action).await,
            Command::Fsck { data_dir } => fsck::run(&data_dir).await,
            Command::Hash { file } => fsck::hash(&file).await,
        }
    }
}
