//! The `weft` command line: the server (`serve`), operator calls (`admin`), the Worker's
//! journey (`keygen`, `login`, `put`, `get`, `show`, `ls`), Missions and WorkItems
//! (`mission`, `work`: signed Commands) and offline checks (`fsck`).
//!
//! This file holds the top-level commands (`Command`, the clap type of the command line) and
//! `Cli::run`, which only dispatches; nothing under `cli` imports from it. The flags the
//! commands share or take whole are in `args` (and those of `mission` and `work` in
//! `work_args`), leaves the commands import. Each command lives in the module named after
//! what it owns: `keys` (the agent key and the files under the weft home), `session` (login
//! and `session.json`), `admin`, `artifacts`, `evidence`, `events`, `lineage`, `work` and
//! `fsck`; `pages` walks cursor-paged listings for them, `table` prints them.
//! Output text, flags and exit codes are part of the interface: the e2e tests run the binary.

mod account;
mod admin;
mod args;
mod artifacts;
mod audit;
mod context;
mod errors;
mod events;
mod evidence;
mod fsck;
mod hold;
mod keys;
mod lifecycle;
mod lineage;
mod migrate;
mod pages;
mod preflight;
mod resume;
mod review;
mod session;
mod show;
mod table;
mod tlog;
mod witness;
mod work;
mod work_args;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use args::{
    AdminAction, ClientArgs, ContextAction, EventsAction, EvidenceAction, LineageArgs, LsArgs,
    PutArgs, ReviewArgs,
};
pub use errors::explain;
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

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the server.
    #[command(after_help = "Example: weft serve --listen 127.0.0.1:7070 --data-dir weft-data")]
    Serve(Config),
    /// Create an Ed25519 agent key (`agent.key` in the weft home, mode 0600).
    #[command(after_help = "Example: weft keygen --json")]
    Keygen {
        #[command(flatten)]
        client: ClientArgs,
        /// Overwrite an existing key.
        #[arg(long)]
        force: bool,
        /// Print the result as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Operator calls, with the admin token.
    #[command(
        after_help = "Example: weft admin group create g1 && weft admin agent register --agent-id worker-1 && weft admin member set g1 worker-1 --role worker"
    )]
    Admin {
        #[command(flatten)]
        client: ClientArgs,
        /// The admin token (default: read from --admin-token-file).
        #[arg(long, env = "WEFT_ADMIN_TOKEN")]
        admin_token: Option<String>,
        /// File holding the admin token.
        #[arg(long, default_value = "weft-data/admin.token")]
        admin_token_file: PathBuf,
        /// Print each result as JSON (`weft admin --json group create g1`).
        #[arg(long)]
        json: bool,
        #[command(subcommand)]
        action: AdminAction,
    },
    /// Open a session for this agent in a Group (signed challenge).
    #[command(after_help = "Example: weft login --agent-id worker-1 --group g1")]
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
        /// Print the result as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Upload a file and publish its signed manifest; prints the artifact digest.
    #[command(
        after_help = "Example: weft put report.json --group g1 --mission m1 --work-item wi-1 --media-type application/json --source blake3:…"
    )]
    Put(PutArgs),
    /// Download an artifact, verified.
    #[command(after_help = "Example: weft get blake3:… -o report.json")]
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
        /// Print the result as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Show an artifact's manifests, each signature verified against a key trusted here.
    #[command(after_help = "Example: weft show blake3:… --json")]
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
        /// Print the result as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Who this session is: agent, Group, expiry, and whether the server still accepts it.
    #[command(after_help = "Example: weft whoami --json")]
    Whoami {
        #[command(flatten)]
        client: ClientArgs,
        /// Print only the session's bearer token (for curl: `-H "Authorization: Bearer
        /// $(weft whoami --token)"`); nothing is asked of the server.
        #[arg(long)]
        token: bool,
        /// Print the result as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Renew the session `weft login` stored: a fresh signed request gives it a full lifetime
    /// from now, with the same token and epochs, so the leases held under it go on (a new
    /// `weft login` would end them, LSE-9).
    Renew {
        #[command(flatten)]
        client: ClientArgs,
        /// Print the result as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Forget the session (`session.json`); the agent key stays.
    Logout {
        #[command(flatten)]
        client: ClientArgs,
        /// Print the result as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Print a shell completion script: `weft completions bash > ~/.local/share/bash-completion/completions/weft`
    /// (zsh: into a directory of `$fpath` as `_weft`; fish: `~/.config/fish/completions/weft.fish`).
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Run the built-in reviewer on a WorkItem: server-signed Evidence, one record per check.
    #[command(
        after_help = "Example: weft review wi-1 --artifact blake3:… --check integrity --check schema=ac-2"
    )]
    Review(ReviewArgs),
    /// List artifacts.
    #[command(after_help = "Example: weft ls --mission m1 --name report")]
    Ls(LsArgs),
    /// Record and list Evidence.
    #[command(
        after_help = "Example: weft evidence add --mission m1 --work-item wi-1 --criterion ac-1 --outcome pass --method automated_test --artifact blake3:…"
    )]
    Evidence {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: EvidenceAction,
    },
    /// Legal holds as the Group's approver (the operator's: `weft admin hold`).
    #[command(after_help = "Example: weft hold add --mission m1 --reason \"audit 2026-12\"")]
    Hold {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: hold::GroupHoldAction,
    },
    /// Where an artifact came from (or, with --down, what was derived from it).
    #[command(after_help = "Example: weft lineage blake3:… --mission m1 --format dot")]
    Lineage(LineageArgs),
    /// Context Packages: publish, show, list versions, verify against the log, forward.
    #[command(
        after_help = "Example: weft context publish --package pkg-1 --mission m1 --from 1 --to 40 --artifact blake3:…"
    )]
    Context {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: ContextAction,
    },
    /// Read a Group's event log.
    #[command(after_help = "Example: weft events verify --group g1 --authority-key KEY")]
    Events {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: EventsAction,
    },
    /// The latest verdict per acceptance criterion of a WorkItem.
    #[command(after_help = "Example: weft criteria wi-1 --json")]
    Criteria {
        #[command(flatten)]
        client: ClientArgs,
        work_item: String,
        #[arg(long)]
        json: bool,
    },
    /// Missions: create, show, and close them (signed Commands of the session's Group).
    #[command(
        after_help = "Example: weft mission create m1 --title \"Q3 report\" --financial 100 --tokens 1000000"
    )]
    Mission {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: MissionAction,
    },
    /// WorkItems: authorize, offer, accept, run and close them; show one or a Mission's graph.
    #[command(
        after_help = "Example: weft work authorize wi-1 --mission m1 --contract contract.toml"
    )]
    Work {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: WorkAction,
    },
    /// Re-hash every blob and re-check every row, signature and Group chain (offline).
    ///
    /// Exit codes: 0 clean; 1 damage (`PROBLEM` lines) or an error; 2 only crash leftovers,
    /// which the next server start removes; 3 a running server holds the directory (stop it
    /// first). Example: `weft fsck --data-dir weft-data --json`
    Fsck {
        #[arg(long, default_value = "weft-data")]
        data_dir: PathBuf,
        /// The servers' `--index postgres://…`, when the index is in PostgreSQL (the data
        /// directory then only holds `authority.key`). Check while no server writes.
        #[arg(long, value_parser = crate::config::parse_index)]
        index: Option<String>,
        /// The server's `--blobs s3://…`, when its blobs are in a bucket.
        #[arg(long, env = "WEFT_BLOBS", value_parser = crate::config::parse_blobs)]
        blobs: Option<weft_storage::S3Location>,
        /// The server's `--s3-credentials-file`.
        #[arg(long, env = "WEFT_S3_CREDENTIALS_FILE")]
        s3_credentials_file: Option<PathBuf>,
        /// Print the result as one JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Copy a single-node data directory (stopped) into PostgreSQL and an S3 bucket, for
    /// several servers: every digest verified on the way, every table's rows counted, then
    /// fsck on the copy. The source is only read; the destination must be empty.
    ///
    /// Example: `weft migrate --from weft-data --index postgres://weft@db/weft --blobs 's3://weft-blobs/prod?endpoint=http://127.0.0.1:3900&region=garage'`
    Migrate {
        #[arg(long)]
        from: PathBuf,
        #[arg(long, env = "WEFT_INDEX", value_parser = crate::config::parse_index)]
        index: String,
        #[arg(long, env = "WEFT_BLOBS", value_parser = crate::config::parse_blobs)]
        blobs: weft_storage::S3Location,
        /// Credentials for the bucket (`--s3-credentials-file` of `weft serve`).
        #[arg(long, env = "WEFT_S3_CREDENTIALS_FILE")]
        s3_credentials_file: Option<PathBuf>,
    },
    /// One Mission's offline audit bundle (issue #45): `export` writes it (a Group-wide
    /// reader's session), `verify` checks it with no server.
    Audit {
        #[command(flatten)]
        client: ClientArgs,
        #[command(subcommand)]
        action: audit::AuditAction,
    },
    /// Run a transparency-log witness (c2sp.org/tlog-witness, issue #45): it cosigns a Group's
    /// checkpoint only when the log's key signed it and it extends the tree the witness
    /// cosigned last, and it remembers that (in DATA_DIR/witness-state.json) before it answers.
    /// Prints `listening on http://ADDR`, then `vkey NAME+ID+KEY` (what `weft serve --witness
    /// URL=VKEY` and `weft events verify --witness` take).
    ///
    /// Example: `weft witness --name witness.example/w1 --authority-key $(jq -r .keys[0].publicKey keys.json)`
    Witness(witness::WitnessArgs),
    /// Print both digests of a file, hashed with the server's pipeline (benchmark baseline).
    #[command(hide = true)]
    Hash { file: PathBuf },
    /// Run a Worker (DESIGN §13): join the Groups of `worker.toml`, admit offers, schedule
    /// WorkItems into slots and run each through its capability's executor.
    #[command(after_help = "Example: weft worker --config worker.toml")]
    Worker {
        #[arg(long)]
        config: PathBuf,
    },
}

impl Cli {
    pub async fn run(self) -> anyhow::Result<()> {
        match self.command {
            Command::Serve(config) => crate::serve::run(config).await,
            Command::Keygen {
                client,
                force,
                json,
            } => keys::keygen(&client, force, json),
            Command::Admin {
                client,
                admin_token,
                admin_token_file,
                json,
                action,
            } => admin::run(&client, admin_token, &admin_token_file, action, json).await,
            Command::Login {
                client,
                agent_id,
                group,
                card_version,
                json,
            } => session::login(&client, &agent_id, &group, card_version, json).await,
            Command::Put(args) => artifacts::put(args).await,
            Command::Get {
                client,
                digest,
                output,
                quiet,
                json,
            } => artifacts::get(&client, &digest, output.as_deref(), quiet, json).await,
            Command::Show {
                client,
                digest,
                producer_keys,
                authority_key,
                json,
            } => {
                show::show(
                    &client,
                    &digest,
                    &producer_keys,
                    authority_key.as_deref(),
                    json,
                )
                .await
            }
            Command::Whoami {
                client,
                token,
                json,
            } => account::whoami(&client, token, json).await,
            Command::Renew { client, json } => session::renew(&client, json).await,
            Command::Logout { client, json } => account::logout(&client, json),
            Command::Completions { shell } => {
                use std::io::Write as _;
                let script = completions(shell);
                match std::io::stdout().write_all(&script) {
                    // `weft completions bash | head`: the reader left, nothing to report.
                    Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
                    written => Ok(written?),
                }
            }
            Command::Review(args) => review::run(args).await,
            Command::Ls(args) => artifacts::ls(args).await,
            Command::Evidence { client, action } => evidence::run(&client, action).await,
            Command::Hold { client, action } => hold::run(&client, action).await,
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
            Command::Fsck {
                data_dir,
                index,
                blobs,
                s3_credentials_file,
                json,
            } => {
                let blobs = blobs.map(|mut location| {
                    location.credentials_file = s3_credentials_file;
                    location
                });
                fsck::run(&data_dir, index, blobs, json).await
            }
            Command::Migrate {
                from,
                index,
                mut blobs,
                s3_credentials_file,
            } => {
                blobs.credentials_file = s3_credentials_file;
                migrate::run(&from, index, blobs).await
            }
            Command::Witness(args) => witness::run(args).await,
            Command::Audit { client, action } => audit::run(&client, action).await,
            Command::Worker { config } => crate::worker::run(&config).await,
            Command::Hash { file } => fsck::hash(&file).await,
        }
    }
}

/// The completion script of `shell` for every command and flag `weft` takes.
fn completions(shell: clap_complete::Shell) -> Vec<u8> {
    use clap::CommandFactory as _;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "weft", &mut script);
    script
}

#[cfg(test)]
mod completion_tests {
    /// `weft completions` covers the commands, nested ones included (issue #50).
    #[test]
    fn every_shell_gets_a_script_naming_the_commands() {
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
        ] {
            let script = String::from_utf8(super::completions(shell)).expect("text");
            for command in ["serve", "lineage", "contract-template", "completions"] {
                assert!(script.contains(command), "{shell:?} lacks {command}");
            }
        }
    }
}
