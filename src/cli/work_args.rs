//! The flags of `weft mission` and `weft work` (the clap types of signed Commands), kept
//! apart from `mod.rs` so that file stays readable, and how a list of digests among them
//! parses; `work` runs them. A leaf: it imports nothing of `cli`.

use std::path::PathBuf;

use clap::Subcommand;
use weft_api::ArtifactId;

/// What every signed Command may add: the lease and revision it quotes, and how to print.
#[derive(Debug, Clone, clap::Args)]
pub(super) struct CommandArgs {
    /// The Execution Lease to quote (default for owner commands: the WorkItem's current lease
    /// when this agent owns it).
    #[arg(long)]
    pub(super) lease: Option<String>,
    /// Refuse (`stale_revision`) unless the aggregate is still at this revision.
    #[arg(long)]
    pub(super) expected_revision: Option<u64>,
    /// Print the server's answer as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

#[derive(Debug, Subcommand)]
pub(super) enum MissionAction {
    /// `mission.create` (coordinator).
    Create {
        mission: String,
        #[arg(long)]
        title: String,
        /// low, normal, high or critical.
        #[arg(long, default_value = "normal")]
        priority: String,
        /// Budget limits, the six dimensions of the contract.
        #[arg(long, default_value_t = 0.0)]
        financial: f64,
        #[arg(long, default_value_t = 0)]
        tokens: u64,
        #[arg(long, default_value_t = 0)]
        tool_calls: u64,
        #[arg(long, default_value_t = 0)]
        compute_seconds: u64,
        #[arg(long, default_value_t = 0)]
        wall_clock_seconds: u64,
        #[arg(long, default_value_t = 0)]
        side_effects: u64,
        #[command(flatten)]
        command: CommandArgs,
    },
    /// The Mission: state, budget, WorkItems.
    Show {
        mission: String,
        #[arg(long)]
        json: bool,
    },
    /// `mission.approve`. Refused while WorkItems are live (T18); `--force` cancels them first.
    ///
    /// Example: `weft mission approve m1 --force` (prints each WorkItem it cancels)
    Approve {
        #[command(flatten)]
        close: MissionClose,
        /// Cancel the Mission's live WorkItems first (one signed `work.cancel` each, naming
        /// why), then approve; without it, the live WorkItems are listed and nothing is sent.
        #[arg(long)]
        force: bool,
    },
    /// Run a plan to `verified` as its Coordinator: create the Mission and its WorkItems,
    /// offer each to the members whose Agent Card has its capability, accept results whose
    /// criteria pass, approve the Mission.
    ///
    /// Example: `weft mission run --plan plan.toml`
    Run {
        #[arg(long)]
        plan: std::path::PathBuf,
        /// Give up (exit 1) after this long.
        #[arg(long, default_value_t = 600)]
        timeout_secs: u64,
    },
    /// `mission.fail`.
    Fail(MissionClose),
    /// `mission.cancel`: its live WorkItems are cancelled too.
    Cancel(MissionClose),
}

/// The flags of `mission approve|fail|cancel`.
#[derive(Debug, clap::Args)]
pub(super) struct MissionClose {
    pub(super) mission: String,
    /// An Evidence or artifact id backing the decision; repeat for several.
    #[arg(long = "evidence")]
    pub(super) evidence: Vec<String>,
    #[command(flatten)]
    pub(super) command: CommandArgs,
}

#[derive(Debug, Subcommand)]
pub(super) enum WorkAction {
    /// Print a valid work contract (TOML) with every field explained, to edit and pass to
    /// `weft work authorize --contract FILE.toml`.
    ContractTemplate,
    /// `work.authorize` (coordinator): a WorkItem of a Mission under a contract file.
    Authorize {
        work_item: String,
        #[arg(long)]
        mission: String,
        /// The work contract, JSON or TOML (by extension: `.toml` is TOML, anything else JSON).
        #[arg(long)]
        contract: PathBuf,
        /// The proposal this authorizes, if any.
        #[arg(long)]
        proposal: Option<String>,
        #[command(flatten)]
        command: CommandArgs,
    },
    /// `work.offer` (coordinator): an offer to a bounded set of candidates.
    Offer(OfferArgs),
    /// `work.accept_offer`: take the offer (default: the live offer naming this agent).
    Accept {
        work_item: String,
        #[arg(long)]
        offer: Option<String>,
        #[command(flatten)]
        command: CommandArgs,
    },
    /// `work.decline_offer` with a structured reason.
    Decline {
        work_item: String,
        #[arg(long)]
        offer: Option<String>,
        /// capacity, deadline, capability, authorization, dependency, budget or other.
        #[arg(long)]
        reason: String,
        #[arg(long)]
        detail: Option<String>,
        #[command(flatten)]
        command: CommandArgs,
    },
    /// `work.ask` (a candidate of a live offer): raise an ambiguity before accepting (CON-2);
    /// accepting that offer waits for the answer (CON-3).
    Ask(AskArgs),
    /// `work.answer` (coordinator): answer a candidate's question (CON-2, CON-4).
    Answer(AnswerArgs),
    /// `work.start` (owner): opens an Execution Lease.
    Start(WorkRefArgs),
    /// `lease.renew` (owner): the current Execution Lease lasts the contract's
    /// `executionSeconds` from now.
    Renew(WorkRefArgs),
    /// `work.progress` (owner): a structured progress report (PRG-1); buffered in the offline
    /// journal when the server does not answer.
    Progress(ProgressArgs),
    /// The offline journal (OFL-3…8): what was buffered while the server did not answer.
    Journal {
        /// Send what is pending now (every `weft work` Command does that first anyway).
        #[arg(long)]
        sync: bool,
        /// Drop what was accepted or refused (and what followed a refusal).
        #[arg(long)]
        discard: bool,
        #[arg(long)]
        json: bool,
    },
    /// A capability token bound to the current Execution Lease (LSE-6/7); prints the token.
    Token(TokenArgs),
    /// `work.checkpoint` (owner); buffered in the offline journal when the server does not
    /// answer.
    Checkpoint {
        work_item: String,
        #[arg(long)]
        artifact: Option<String>,
        #[arg(long)]
        note: Option<String>,
        /// Resources spent, `dimension=amount` (financial, tokens, toolCalls, computeSeconds,
        /// wallClockSeconds, sideEffects); repeat for several.
        #[arg(long = "usage", value_name = "DIMENSION=AMOUNT")]
        usage: Vec<String>,
        #[command(flatten)]
        command: CommandArgs,
    },
    /// `work.block` (owner): says what resolution it needs, with its checkpoint (T9, PRG-4:
    /// the block is the checkpoint; no `work checkpoint` first).
    Block {
        work_item: String,
        #[arg(long)]
        needs: String,
        /// The checkpoint's artifact (blake3 digest), if any.
        #[arg(long)]
        artifact: Option<String>,
        /// The checkpoint's note: where the work stands.
        #[arg(long)]
        note: Option<String>,
        #[command(flatten)]
        command: CommandArgs,
    },
    /// `work.unblock`.
    Unblock(WorkRefArgs),
    /// `preemption.request` (coordinator, or the owner's own scheduler): asks the owner to
    /// checkpoint at its next safe point and release its slot (LSE-12).
    Preempt(WorkRefArgs),
    /// `work.submit` (owner): the artifacts and the Evidence of the result.
    Submit {
        work_item: String,
        /// A result artifact (blake3 digest); repeat for several.
        #[arg(long = "artifact", required = true)]
        artifacts: Vec<String>,
        /// An Evidence id; repeat for several.
        #[arg(long = "evidence")]
        evidence: Vec<String>,
        #[command(flatten)]
        command: CommandArgs,
    },
    /// `work.accept_result` (a coordinator that did not do the work): the WorkItem is verified.
    AcceptResult(WorkRefArgs),
    /// `work.fail`.
    Fail {
        work_item: String,
        /// worker_error, review_failed, deadline, budget, dependency, retries_exhausted or other.
        #[arg(long)]
        reason: String,
        #[arg(long)]
        detail: Option<String>,
        /// An Evidence id; repeat for several.
        #[arg(long = "evidence")]
        evidence: Vec<String>,
        #[command(flatten)]
        command: CommandArgs,
    },
    /// `work.cancel` (coordinator).
    Cancel {
        work_item: String,
        #[arg(long)]
        reason: String,
        #[command(flatten)]
        command: CommandArgs,
    },
    /// The WorkItem: state, owner, lease, offers, dependencies, history.
    Show {
        work_item: String,
        #[arg(long)]
        json: bool,
    },
    /// A Mission's WorkItems: state and eligibility of each, and the dependencies.
    Ls {
        #[arg(long)]
        mission: String,
        #[arg(long)]
        json: bool,
    },
}

/// The flags of a Command that names only its WorkItem.
#[derive(Debug, clap::Args)]
pub(super) struct WorkRefArgs {
    pub(super) work_item: String,
    #[command(flatten)]
    pub(super) command: CommandArgs,
}

/// The flags of `work ask`.
#[derive(Debug, clap::Args)]
pub(super) struct AskArgs {
    pub(super) work_item: String,
    /// The offer asked about (default: the newest live offer naming this agent).
    #[arg(long)]
    pub(super) offer: Option<String>,
    /// The question's id (default: a fresh one).
    #[arg(long)]
    pub(super) question: Option<String>,
    /// The question, at most 2 KiB.
    #[arg(long)]
    pub(super) text: String,
    #[command(flatten)]
    pub(super) command: CommandArgs,
}

/// The flags of `work answer`.
#[derive(Debug, clap::Args)]
pub(super) struct AnswerArgs {
    pub(super) work_item: String,
    #[arg(long)]
    pub(super) question: String,
    /// The answer, at most 2 KiB.
    #[arg(long)]
    pub(super) text: String,
    /// clarified (default), new_offer or replacement_work_item (CON-4).
    #[arg(long)]
    pub(super) resolution: Option<String>,
    #[command(flatten)]
    pub(super) command: CommandArgs,
}

/// The flags of `work progress`: the fields of `work.progress` (PRG-1). `--percent`, if
/// given, is stored but never drives a decision (PRG-2).
#[derive(Debug, clap::Args)]
pub(super) struct ProgressArgs {
    pub(super) work_item: String,
    /// The phase the work is in.
    #[arg(long)]
    pub(super) phase: String,
    /// A milestone done; repeat for several.
    #[arg(long = "milestone")]
    pub(super) milestones: Vec<String>,
    #[arg(long)]
    pub(super) next_checkpoint: Option<String>,
    /// A blocker; repeat for several.
    #[arg(long = "blocker")]
    pub(super) blockers: Vec<String>,
    /// Estimated completion (RFC 3339).
    #[arg(long, requires = "confidence")]
    pub(super) completion_at: Option<String>,
    /// Confidence in the estimate, 0 to 1 (0: no estimate).
    #[arg(long, default_value_t = 0.0)]
    pub(super) confidence: f64,
    /// An Evidence id backing the report; repeat for several.
    #[arg(long = "evidence")]
    pub(super) evidence: Vec<String>,
    #[arg(long)]
    pub(super) percent: Option<f64>,
    /// Resources spent, `dimension=amount` (financial, tokens, toolCalls, computeSeconds,
    /// wallClockSeconds, sideEffects); repeat for several.
    #[arg(long = "usage", value_name = "DIMENSION=AMOUNT")]
    pub(super) usage: Vec<String>,
    #[command(flatten)]
    pub(super) command: CommandArgs,
}

/// The flags of `work token`.
#[derive(Debug, clap::Args)]
pub(super) struct TokenArgs {
    pub(super) work_item: String,
    /// blob:write, artifact:publish or evidence:record; repeat for several.
    #[arg(long = "scope", required = true)]
    pub(super) scopes: Vec<String>,
    /// Lifetime in seconds (the server clamps it to the lease's expiry).
    #[arg(long, default_value_t = 300)]
    pub(super) ttl: u64,
    /// A token id of the same lease that the new token rotates out.
    #[arg(long)]
    pub(super) replaces: Option<String>,
    /// The lease (default: the one `weft work start` left in work.json, else the WorkItem's
    /// current Execution Lease when this agent holds it).
    #[arg(long)]
    pub(super) lease: Option<String>,
    /// Print the whole answer as JSON.
    #[arg(long)]
    pub(super) json: bool,
}

/// The flags of `work offer`: candidates, expiry and the structured selection basis (OFR-10),
/// from flags or from `--basis FILE` (JSON or TOML).
#[derive(Debug, clap::Args)]
pub(super) struct OfferArgs {
    pub(super) work_item: String,
    /// The offer id (default: a fresh one).
    #[arg(long)]
    pub(super) offer: Option<String>,
    /// A candidate Agent; repeat for several (at most 16).
    #[arg(long = "candidate", required = true)]
    pub(super) candidates: Vec<String>,
    #[arg(long, default_value_t = 600)]
    pub(super) expires_in: u64,
    /// The whole selection basis from a file; excludes the basis flags below.
    #[arg(long, conflicts_with_all = ["capabilities", "not_authorization_eligible", "available_at", "expected_cost", "reliability_evidence", "policy_rules"])]
    pub(super) basis: Option<PathBuf>,
    /// A matched capability as id:version; repeat for several.
    #[arg(long = "capability")]
    pub(super) capabilities: Vec<String>,
    /// The candidates are not known to be authorization-eligible.
    #[arg(long)]
    pub(super) not_authorization_eligible: bool,
    /// When the candidates are expected to be available (RFC 3339; default now).
    #[arg(long)]
    pub(super) available_at: Option<String>,
    #[arg(long, default_value_t = 0.0)]
    pub(super) expected_cost: f64,
    /// An artifact backing the candidates' reliability; repeat for several.
    #[arg(long = "reliability-evidence")]
    pub(super) reliability_evidence: Vec<String>,
    /// A policy rule that selected them; repeat for several.
    #[arg(long = "policy-rule")]
    pub(super) policy_rules: Vec<String>,
    #[command(flatten)]
    pub(super) command: CommandArgs,
}

/// Artifact digests given as flags (`--evidence`, `--artifact`, …), each parsed.
pub(super) fn artifact_ids(texts: &[String]) -> anyhow::Result<Vec<ArtifactId>> {
    Ok(texts
        .iter()
        .map(|text| ArtifactId::parse(text))
        .collect::<Result<_, _>>()?)
}
