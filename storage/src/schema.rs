//! The index and event-log tables, versioned with `PRAGMA user_version`.
//! Long (about 800 lines) because it holds every migration since V1, in order, as the SQL
//! that ran, and the tests that pin its query plans.
//!
//! Digests are stored as 32-byte BLOBs; ids as TEXT already validated by `weft_api::Id`.
//! **Invariant:** every `manifests.blake3` has its `blobs` row, every `derivations` row joins
//! two published artifacts (foreign keys are on), and `events` sequences per Group are
//! contiguous from 1 (enforced by the single writer, checked by fsck).

use crate::error::Error;
use rusqlite::Connection;

mod backfill;
mod postgres;

const V1: &str = r#"
CREATE TABLE groups (
    group_id    TEXT PRIMARY KEY,
    created_at  TEXT NOT NULL
);
CREATE TABLE agents (
    agent_id            TEXT PRIMARY KEY,
    public_key          BLOB NOT NULL,
    keyid               TEXT NOT NULL UNIQUE,
    agent_card_version  TEXT NOT NULL,
    registered_at       TEXT NOT NULL
);
CREATE TABLE memberships (
    group_id  TEXT NOT NULL REFERENCES groups(group_id),
    agent_id  TEXT NOT NULL REFERENCES agents(agent_id),
    roles     TEXT NOT NULL,            -- JSON array of role names
    epoch     INTEGER NOT NULL,
    PRIMARY KEY (group_id, agent_id)
);
CREATE INDEX memberships_agent ON memberships(agent_id);
CREATE TABLE session_epochs (
    agent_id  TEXT NOT NULL,
    group_id  TEXT NOT NULL,
    epoch     INTEGER NOT NULL,
    PRIMARY KEY (agent_id, group_id)
);
CREATE TABLE sessions (
    token_hash        BLOB PRIMARY KEY,  -- blake3 of the bearer token; the token is never stored
    agent_id          TEXT NOT NULL,
    group_id          TEXT NOT NULL,
    session_epoch     INTEGER NOT NULL,
    membership_epoch  INTEGER NOT NULL,
    expires_at        TEXT NOT NULL
);
CREATE TABLE session_nonces (
    agent_id  TEXT NOT NULL,
    nonce     TEXT NOT NULL,
    seen_at   TEXT NOT NULL,
    PRIMARY KEY (agent_id, nonce)
);
CREATE TABLE blobs (
    blake3          BLOB PRIMARY KEY,
    sha256          BLOB NOT NULL UNIQUE,
    size            INTEGER NOT NULL,
    stored_at       TEXT NOT NULL,
    quarantined_at  TEXT
);
CREATE TABLE blob_uploaders (
    blake3    BLOB NOT NULL REFERENCES blobs(blake3),
    agent_id  TEXT NOT NULL,
    PRIMARY KEY (blake3, agent_id)
);
CREATE TABLE manifests (
    manifest_id      BLOB PRIMARY KEY,  -- blake3 of the DSSE payload bytes
    blake3           BLOB NOT NULL REFERENCES blobs(blake3),
    group_id         TEXT NOT NULL REFERENCES groups(group_id),
    mission_id       TEXT NOT NULL,
    work_item_id     TEXT NOT NULL,
    producer         TEXT NOT NULL REFERENCES agents(agent_id),
    media_type       TEXT NOT NULL,
    lease_id         TEXT NOT NULL,
    ownership_epoch  INTEGER NOT NULL,
    classification   TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    envelope         TEXT NOT NULL,     -- the DSSE envelope exactly as accepted
    sequence         INTEGER NOT NULL   -- of its artifact.published Event in group_id
);
CREATE INDEX manifests_blake3 ON manifests(blake3);
CREATE INDEX manifests_mission ON manifests(mission_id);
CREATE INDEX manifests_work_item ON manifests(work_item_id);
CREATE INDEX manifests_group ON manifests(group_id);
CREATE TABLE derivations (
    artifact     BLOB NOT NULL REFERENCES blobs(blake3),
    source       BLOB NOT NULL REFERENCES blobs(blake3),
    manifest_id  BLOB NOT NULL REFERENCES manifests(manifest_id),
    PRIMARY KEY (artifact, source, manifest_id)
);
CREATE INDEX derivations_source ON derivations(source);
CREATE TABLE events (
    group_id              TEXT NOT NULL REFERENCES groups(group_id),
    sequence              INTEGER NOT NULL,
    event_id              TEXT NOT NULL UNIQUE,
    type                  TEXT NOT NULL,
    causation_command_id  TEXT,
    payload               TEXT NOT NULL,
    appended_at           TEXT NOT NULL,
    prev_hash             BLOB NOT NULL,
    hash                  BLOB NOT NULL,
    PRIMARY KEY (group_id, sequence)
) WITHOUT ROWID;
"#;

/// Evidence (DESIGN §5.1) and registered schema URIs for the built-in reviewer.
const V2: &str = r#"
CREATE TABLE evidence (
    evidence_id   BLOB PRIMARY KEY,   -- blake3 of the DSSE payload bytes
    group_id      TEXT NOT NULL REFERENCES groups(group_id),
    mission_id    TEXT NOT NULL,
    work_item_id  TEXT NOT NULL,
    criterion     TEXT NOT NULL,
    outcome       TEXT NOT NULL,
    method_kind   TEXT NOT NULL,
    producer      TEXT NOT NULL,
    timestamp     TEXT NOT NULL,
    supersedes    BLOB REFERENCES evidence(evidence_id),
    envelope      TEXT NOT NULL,
    sequence      INTEGER NOT NULL
);
CREATE INDEX evidence_by_criterion ON evidence(work_item_id, criterion);
CREATE INDEX evidence_by_group ON evidence(group_id);
CREATE INDEX evidence_supersedes ON evidence(supersedes);
CREATE TABLE evidence_artifacts (
    evidence_id  BLOB NOT NULL REFERENCES evidence(evidence_id),
    blake3       BLOB NOT NULL REFERENCES blobs(blake3),
    PRIMARY KEY (evidence_id, blake3)
);
CREATE INDEX evidence_artifacts_blake3 ON evidence_artifacts(blake3);
CREATE TABLE schemas (
    uri       TEXT PRIMARY KEY,
    blake3    BLOB NOT NULL REFERENCES blobs(blake3)
);
"#;

/// Delivery state: ACK cursors and stored answers of idempotent requests. Neither is Group
/// history; neither ever touches `events` (DLV-7).
const V3: &str = r#"
CREATE TABLE cursors (
    group_id    TEXT NOT NULL REFERENCES groups(group_id),
    agent_id    TEXT NOT NULL,
    sequence    INTEGER NOT NULL,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (group_id, agent_id)
);
CREATE TABLE idempotency (
    scope         TEXT NOT NULL,      -- who asked: an agent id, or "admin"
    key           TEXT NOT NULL,
    request_hash  BLOB NOT NULL,      -- blake3 of method, path and body
    status        INTEGER NOT NULL,
    body          BLOB NOT NULL,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (scope, key)
);
"#;

/// Compaction of the online log into signed snapshots: Events up to `sequence` left the
/// `events` table for the archive artifact `archive_blake3`; `state_blake3` is the projected
/// Group state at `sequence`.
const V4: &str = r#"
CREATE TABLE snapshots (
    group_id          TEXT NOT NULL REFERENCES groups(group_id),
    sequence          INTEGER NOT NULL,
    from_sequence     INTEGER NOT NULL,
    state_blake3      BLOB NOT NULL REFERENCES blobs(blake3),
    archive_blake3    BLOB NOT NULL REFERENCES blobs(blake3),
    event_chain_hash  BLOB NOT NULL,
    envelope          TEXT NOT NULL,
    PRIMARY KEY (group_id, sequence)
);
"#;

/// Access model (issue #10): an upload is known to the Group its session acted in, not to
/// every Group of its Agent (rows of v4 are kept for each Group the uploader was a member
/// of, which is what they meant then); Memberships are removed by marking them, so their
/// epoch keeps counting up and a session of the removed Membership never becomes valid again
/// if the Agent is added back; Agents can be deactivated; every key an Agent ever had stays
/// in `agent_keys` with the instant it was retired, so what it signed before stays verifiable.
const V5: &str = r#"
CREATE TABLE blob_uploads (
    blake3    BLOB NOT NULL REFERENCES blobs(blake3),
    agent_id  TEXT NOT NULL,
    group_id  TEXT NOT NULL,
    uploaded_at TEXT,                 -- the latest upload: the sweep keeps a recently uploaded blob
    PRIMARY KEY (blake3, agent_id, group_id)
);
INSERT INTO blob_uploads (blake3, agent_id, group_id)
    SELECT u.blake3, u.agent_id, m.group_id FROM blob_uploaders u JOIN memberships m ON m.agent_id = u.agent_id;
DROP TABLE blob_uploaders;
ALTER TABLE blob_uploads RENAME TO blob_uploaders;
CREATE INDEX blob_uploaders_agent ON blob_uploaders(agent_id);
ALTER TABLE memberships ADD COLUMN removed_at TEXT;
ALTER TABLE agents ADD COLUMN deactivated_at TEXT;
CREATE TABLE agent_keys (
    keyid       TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL REFERENCES agents(agent_id),
    public_key  BLOB NOT NULL,
    added_at    TEXT NOT NULL,
    retired_at  TEXT                  -- NULL: the Agent's current key
);
CREATE INDEX agent_keys_agent ON agent_keys(agent_id);
INSERT INTO agent_keys (keyid, agent_id, public_key, added_at)
    SELECT keyid, agent_id, public_key, registered_at FROM agents;
"#;

/// Evidence standing (EVD-1): what each record's producer weighed when it recorded it, so
/// the verdict in force ranks a review over a Worker's claim without re-reading roles that
/// may have changed since. The `membership.set` Events of the Group log carry the same
/// roles, so the column is derivable from the log. Rows recorded before it get the standing
/// of their producer's current Membership (the best that is known), the server's reviewer
/// `authority`.
const V6: &str = r#"
ALTER TABLE evidence ADD COLUMN standing TEXT NOT NULL DEFAULT 'worker';
UPDATE evidence SET standing = CASE
    WHEN producer = 'weft-authority' THEN 'authority'
    ELSE COALESCE((SELECT CASE
            WHEN m.roles LIKE '%"reviewer"%' THEN 'reviewer'
            WHEN m.roles LIKE '%"coordinator"%' THEN 'coordinator'
            ELSE 'worker' END
        FROM memberships m WHERE m.group_id = evidence.group_id AND m.agent_id = evidence.producer), 'worker')
    END;
"#;

/// Missions and WorkItems (DESIGN §10): the projection of their Events, kept in the
/// transaction that appends them. `commands` holds each accepted Command's answer by
/// `commandId` (a retry replays it). Offers stay after they end (`status`), so a late
/// acceptance can be told `offer_withdrawn` or `offer_expired`.
const V7: &str = r#"
CREATE TABLE missions (
    mission_id           TEXT PRIMARY KEY,
    group_id             TEXT NOT NULL REFERENCES groups(group_id),
    title                TEXT NOT NULL,
    priority_class       TEXT NOT NULL,
    budget               TEXT NOT NULL,      -- JSON, six dimensions
    state                TEXT NOT NULL,
    revision             INTEGER NOT NULL,
    parent_work_item_id  TEXT,               -- set for a child Mission (T15)
    child_failure_policy TEXT,
    created_sequence     INTEGER NOT NULL
);
CREATE INDEX missions_group ON missions(group_id);
CREATE INDEX missions_parent ON missions(parent_work_item_id);
CREATE TABLE work_items (
    work_item_id          TEXT PRIMARY KEY,
    group_id              TEXT NOT NULL REFERENCES groups(group_id),
    mission_id            TEXT NOT NULL REFERENCES missions(mission_id),
    state                 TEXT NOT NULL,
    revision              INTEGER NOT NULL,
    contract_revision     INTEGER NOT NULL,
    contract              TEXT NOT NULL,     -- JSON, the current contract
    owner                 TEXT,
    ownership_epoch       INTEGER NOT NULL,
    ownership_expires_at  TEXT,
    approval_granted      INTEGER NOT NULL,
    child_mission_id      TEXT,
    attempts              INTEGER NOT NULL
);
CREATE INDEX work_items_mission ON work_items(mission_id);
CREATE TABLE work_deps (
    work_item_id  TEXT NOT NULL REFERENCES work_items(work_item_id),
    depends_on    TEXT NOT NULL REFERENCES work_items(work_item_id),
    PRIMARY KEY (work_item_id, depends_on)
) WITHOUT ROWID;
CREATE INDEX work_deps_dependents ON work_deps(depends_on);
CREATE TABLE work_history (
    work_item_id  TEXT NOT NULL,
    sequence      INTEGER NOT NULL,
    PRIMARY KEY (work_item_id, sequence)
) WITHOUT ROWID;
CREATE TABLE offers (
    work_item_id       TEXT NOT NULL REFERENCES work_items(work_item_id),
    offer_id           TEXT NOT NULL,
    candidates         TEXT NOT NULL,        -- JSON array of agent ids
    expires_at         TEXT NOT NULL,
    selection_basis    TEXT NOT NULL,        -- JSON (OFR-10)
    contract_revision  INTEGER NOT NULL,
    status             TEXT NOT NULL,        -- live | accepted | withdrawn
    declined           TEXT NOT NULL,        -- JSON object agent id -> reason
    sequence           INTEGER NOT NULL,
    PRIMARY KEY (work_item_id, offer_id)
) WITHOUT ROWID;
CREATE TABLE leases (
    lease_id         TEXT PRIMARY KEY,
    work_item_id     TEXT NOT NULL REFERENCES work_items(work_item_id),
    kind             TEXT NOT NULL,          -- execution | ownership | blocked
    agent_id         TEXT NOT NULL,
    session_epoch    INTEGER NOT NULL,
    ownership_epoch  INTEGER NOT NULL,
    started_at       TEXT NOT NULL,
    expires_at       TEXT NOT NULL,
    released_at      TEXT
);
CREATE INDEX leases_work_item ON leases(work_item_id);
CREATE TABLE proposals (
    proposal_id  TEXT PRIMARY KEY,
    group_id     TEXT NOT NULL REFERENCES groups(group_id),
    mission_id   TEXT NOT NULL,
    proposer     TEXT NOT NULL,
    contract     TEXT NOT NULL,
    sequence     INTEGER NOT NULL,
    authorized   INTEGER NOT NULL
);
CREATE TABLE commands (
    command_id    TEXT PRIMARY KEY,
    group_id      TEXT NOT NULL,
    request_hash  BLOB NOT NULL,             -- blake3 of the DSSE payload bytes
    answer        TEXT NOT NULL              -- the 201 body, replayed on a retry
);
"#;

/// The sequence of the `work.started` Event that opened each Execution Lease: Evidence a
/// Worker recorded after it is bound to that lease (EVD-2, issue #12).
const V8: &str = r#"
ALTER TABLE leases ADD COLUMN started_sequence INTEGER;
"#;

/// Capability tokens (LSE-6/7): bound to an Execution Lease, narrowed to a scope, expiring no
/// later than the lease. Only the token's hash is kept, as for sessions.
const V9: &str = r#"
CREATE TABLE capability_tokens (
    token_hash  BLOB PRIMARY KEY,            -- blake3 of the bearer token; the token is never stored
    token_id    TEXT NOT NULL UNIQUE,
    lease_id    TEXT NOT NULL REFERENCES leases(lease_id),
    scope       TEXT NOT NULL,               -- JSON array of scope names
    issued_at   TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    revoked_at  TEXT
);
CREATE INDEX capability_tokens_lease ON capability_tokens(lease_id);
"#;

/// Owner Commands of issue #12: lease renewals (LSE-3's renewal history), a preemption request
/// bound to the Execution Lease it asks to end (LSE-12, so releasing the lease clears it), and
/// the latest progress report of each WorkItem (PRG-1).
const V10: &str = r#"
CREATE TABLE lease_renewals (
    lease_id    TEXT NOT NULL REFERENCES leases(lease_id),
    renewed_at  TEXT NOT NULL,
    expires_at  TEXT NOT NULL           -- the lease's expiry after this renewal
);
CREATE INDEX lease_renewals_lease ON lease_renewals(lease_id);
ALTER TABLE leases ADD COLUMN preemption_requested_at TEXT;
ALTER TABLE leases ADD COLUMN preemption_requested_by TEXT;
-- A new session revokes its Agent's unreleased leases (LSE-9): found without a scan.
CREATE INDEX leases_agent_open ON leases(agent_id) WHERE released_at IS NULL;
CREATE TABLE work_progress (
    work_item_id  TEXT PRIMARY KEY REFERENCES work_items(work_item_id),
    sequence      INTEGER NOT NULL,       -- the work.progress_reported Event
    agent_id      TEXT NOT NULL,
    reported_at   TEXT NOT NULL,
    report        TEXT NOT NULL           -- JSON, the work.progress payload
);
"#;

/// Lease-bound publication (issue #12, OFL-2): a manifest a fenced owner published under the
/// lease of an older ownership epoch is refused `stale_lease` but kept here as an inert audit
/// record. It is never in `manifests`, so never in lineage, listings, criteria or the log.
const V11: &str = r#"
CREATE TABLE inert_publications (
    manifest_id      BLOB PRIMARY KEY,     -- blake3 of the manifest payload, as in manifests
    group_id         TEXT NOT NULL,
    work_item_id     TEXT NOT NULL REFERENCES work_items(work_item_id),
    producer         TEXT NOT NULL,
    lease_id         TEXT NOT NULL REFERENCES leases(lease_id),
    ownership_epoch  INTEGER NOT NULL,     -- the manifest's, older than the WorkItem's
    envelope         TEXT NOT NULL,        -- the DSSE envelope as received
    received_at      TEXT NOT NULL,
    reason           TEXT NOT NULL         -- why it is inert, in words
);
CREATE INDEX inert_publications_work_item ON inert_publications(work_item_id);
"#;

/// Budgets and bounded offline execution (issue #13, OFL-10…12): what each WorkItem and
/// Mission has spent in the six CON-1.7 dimensions (JSON, `weft_api::work::contract::Budgets`;
/// the limit is the contract's or the Mission's), and why a lease ended, so a buffered
/// Command can tell a lease that was closed (released, or fenced by a cancellation, failure,
/// reassignment or ownership expiry) from one that only expired or was revoked by its Agent's
/// reconnect (DESIGN §12). Leases ended before this version say NULL: treated as closed.
const V12: &str = r#"
ALTER TABLE work_items ADD COLUMN spent TEXT NOT NULL
    DEFAULT '{"financial":0.0,"tokens":0,"toolCalls":0,"computeSeconds":0,"wallClockSeconds":0,"sideEffects":0}';
ALTER TABLE missions ADD COLUMN spent TEXT NOT NULL
    DEFAULT '{"financial":0.0,"tokens":0,"toolCalls":0,"computeSeconds":0,"wallClockSeconds":0,"sideEffects":0}';
ALTER TABLE leases ADD COLUMN ended_by TEXT;  -- released | expired | revoked | fenced
-- When the lease was closed for OFL-9: its release or fencing, or the bufferedAt of the
-- reconciled checkpoint that released it; NULL while it runs, expired or revoked.
ALTER TABLE leases ADD COLUMN closed_at TEXT;
"#;

/// Mission isolation and reusable knowledge (CTX-5, CTX-6): a Membership may cover only some
/// Missions of its Group, and an Artifact published as reusable is readable and citable in
/// every Mission of the Group.
const V13: &str = r#"
ALTER TABLE memberships ADD COLUMN missions TEXT;   -- JSON list of Mission ids; NULL: the whole Group
CREATE TABLE reusable_artifacts (
    group_id        TEXT NOT NULL REFERENCES groups(group_id),
    blake3          BLOB NOT NULL,
    classification  TEXT NOT NULL,                   -- public | internal | confidential | restricted
    evidence_id     BLOB NOT NULL REFERENCES evidence(evidence_id),  -- the signed approval
    approved_by     TEXT NOT NULL,                   -- the approver who signed it
    mission_id      TEXT NOT NULL,                   -- the Mission it came from (the approval's)
    published_by    TEXT NOT NULL,
    sequence        INTEGER NOT NULL,                -- of its artifact.reuse_published Event
    published_at    TEXT NOT NULL,
    PRIMARY KEY (group_id, blake3)
);
"#;

/// Context Packages (issue #14, CTX-1…4, CTX-7): each version indexed in the Group it was
/// published in, and a forwarded copy in each Group it was forwarded to (the same id: the
/// payload bytes do not change). `forwarded_artifacts` lets a Group read the Artifacts a
/// forwarded package cites, by digest (blobs are content-addressed, nothing is copied).
const V14: &str = r#"
CREATE TABLE context_packages (
    context_id       BLOB NOT NULL,          -- blake3 of the DSSE payload bytes
    group_id         TEXT NOT NULL REFERENCES groups(group_id),  -- where it is indexed
    package_id       TEXT NOT NULL,
    version          INTEGER NOT NULL,
    previous         BLOB,                   -- the previous version's context_id
    mission_id       TEXT NOT NULL,
    work_item_id     TEXT,
    events_from      INTEGER NOT NULL,       -- sourceEvents, of the payload's groupId
    events_to        INTEGER NOT NULL,
    artifacts        TEXT NOT NULL,          -- JSON array of cited blake3 digests
    generator        TEXT NOT NULL,
    envelope         TEXT NOT NULL,          -- the DSSE envelope exactly as accepted
    sequence         INTEGER NOT NULL,       -- its context.published / context.forwarded Event
    forwarded_from   TEXT,                   -- the source Group of a forwarded copy
    forwarded_by     TEXT,
    PRIMARY KEY (context_id, group_id),
    UNIQUE (group_id, package_id, version)
);
CREATE TABLE forwarded_artifacts (
    group_id       TEXT NOT NULL REFERENCES groups(group_id),
    blake3         BLOB NOT NULL REFERENCES blobs(blake3),
    context_id     BLOB NOT NULL,
    from_group_id  TEXT NOT NULL,
    PRIMARY KEY (group_id, blake3, context_id)
);
"#;

/// When each blob's stored bytes were last re-hashed and found intact, and by what
/// (`verify-now` from the console, or fsck): what the auditor sees.
const V15: &str = r#"
CREATE TABLE blob_verifications (
    blake3       BLOB PRIMARY KEY REFERENCES blobs(blake3),
    verified_at  TEXT NOT NULL,
    verified_by  TEXT NOT NULL      -- "verify-now by <agent>", "fsck"
);
"#;

/// Resumable uploads (issue #16): one row per upload session, owned by the Agent and Group
/// that started it. `received` is the durable length of the staged object at `staging_path`
/// (the object may be longer after a crash mid-chunk; the next chunk truncates it back).
const V17: &str = r#"
CREATE TABLE upload_sessions (
    upload_id     TEXT PRIMARY KEY,
    agent_id      TEXT NOT NULL,
    group_id      TEXT NOT NULL REFERENCES groups(group_id),
    staging_path  TEXT NOT NULL,          -- object path under the data directory
    received      INTEGER NOT NULL,       -- bytes durably appended so far
    started_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL           -- the sweep removes sessions idle past the TTL
);
CREATE INDEX upload_sessions_by_agent ON upload_sessions (agent_id);
"#;

/// Small blobs inline (issue #15).
const V16: &str = r#"
-- Small blobs live in the index (issue #15): written in the transaction of their `blobs`
-- row, so a durable small upload costs a share of one group commit, not a file, a rename
-- and two fsyncs. A blob is inline or a file (or both, after a repair); reads try here first.
CREATE TABLE inline_blobs (
    blake3  BLOB PRIMARY KEY REFERENCES blobs(blake3),
    bytes   BLOB NOT NULL
);
"#;

/// Composite indexes for the lookups every read makes (issue #15): without statistics SQLite
/// picked the one-column `manifests_group` index for `blake3 = ? AND group_id = ?`, so each
/// visibility check walked every manifest of the Group (a 4 KiB GET slowed with the Group's
/// size). `work_item_id, group_id` serves the reviewer's and the scheduling look-ups.
const V18: &str = r#"
CREATE INDEX manifests_blake3_group ON manifests(blake3, group_id, mission_id);
CREATE INDEX manifests_work_item_group ON manifests(work_item_id, group_id, mission_id);
"#;

/// Issue #15: the one-column indexes on `manifests(blake3)` and `manifests(work_item_id)`
/// are prefixes of V18's composite ones, which answer every look-up they answered; each cost
/// every publication a write into one more B-tree (for `blake3`, a random page: a 4 KiB page
/// more in the WAL per publication, the writer's busiest work).
const V19: &str = r#"
DROP INDEX manifests_blake3;
DROP INDEX manifests_work_item;
"#;

/// Issue #15: a small blob's bytes live in `inline_bytes`, keyed by an integer its `blobs`
/// row holds. `inline_blobs` (V16) was keyed by the digest, so every small publication wrote
/// one more random 4 KiB page into the WAL (its autoindex leaf) and every small GET searched
/// one more digest-keyed B-tree; a new row here is appended after the last one, next to the
/// other rows of its commit, and found by its integer. The bytes are not in the `blobs` row
/// itself, so `blobs` stays narrow for the scans that walk it (the sweep, fsck).
/// Blobs stored inline before keep their bytes, moved here.
const V20: &str = r#"
CREATE TABLE inline_bytes (
    id     INTEGER PRIMARY KEY,
    bytes  BLOB NOT NULL
);
ALTER TABLE blobs ADD COLUMN inline_id INTEGER;  -- its inline copy (issue #15); NULL: a file only
INSERT INTO inline_bytes (id, bytes)
    SELECT b.rowid, i.bytes FROM inline_blobs i JOIN blobs b ON b.blake3 = i.blake3;
UPDATE blobs SET inline_id = rowid WHERE blake3 IN (SELECT blake3 FROM inline_blobs);
DROP TABLE inline_blobs;
"#;

/// A resumable upload started with a capability token belongs to that token's lease as well as
/// to its Agent and Group: another token of the same Agent (for another lease) does not see it
/// (LSE-6). NULL: started with a session; only the Agent's sessions see it. Sessions started
/// before hold NULL, so after an upgrade only their Agent's sessions reach them.
const V21: &str = r#"
ALTER TABLE upload_sessions ADD COLUMN lease_id TEXT;
"#;

/// A Command's `commandId` is its Agent's in its Group, not the whole server's (issue #40):
/// another Group's or another Agent's use of an id is neither an existence oracle nor a way to
/// pre-claim it. Commands stored before carry no Agent (`''`); such a row answers any Agent of
/// its Group, as it did.
const V22: &str = r#"
ALTER TABLE commands RENAME TO commands_v7;
CREATE TABLE commands (
    group_id      TEXT NOT NULL,
    agent_id      TEXT NOT NULL,             -- '' for a Command stored before V22
    command_id    TEXT NOT NULL,
    request_hash  BLOB NOT NULL,             -- blake3 of the DSSE payload bytes
    answer        TEXT NOT NULL,             -- the 201 body, replayed on a retry
    PRIMARY KEY (group_id, agent_id, command_id)
) WITHOUT ROWID;
INSERT INTO commands (group_id, agent_id, command_id, request_hash, answer)
    SELECT group_id, '', command_id, request_hash, answer FROM commands_v7;
DROP TABLE commands_v7;
"#;

/// Issue #49: the WorkItem conversation before acceptance (CON-2…CON-4): one row per
/// `work.ask`, answered in place by `work.answer`; both rows change with their Events. And the
/// Group's policy (SCH-6, SCH-7): the highest `priorityClass` a `mission.create` may ask for,
/// set by the operator (`group.policy_set`); `normal` until then.
const V23: &str = r#"
ALTER TABLE groups ADD COLUMN mission_priority_ceiling TEXT NOT NULL DEFAULT 'normal';
CREATE TABLE work_questions (
    work_item_id       TEXT NOT NULL REFERENCES work_items(work_item_id),
    question_id        TEXT NOT NULL,
    offer_id           TEXT NOT NULL,          -- the offer asked on; CON-3 blocks its acceptance
    agent_id           TEXT NOT NULL,          -- the candidate who asked
    text               TEXT NOT NULL,
    asked_at           TEXT NOT NULL,
    asked_sequence     INTEGER NOT NULL,       -- the work.question_asked Event
    answer             TEXT,                   -- NULL: unanswered
    resolution         TEXT,
    answered_by        TEXT,
    answered_at        TEXT,
    answered_sequence  INTEGER,                -- the work.question_answered Event
    PRIMARY KEY (work_item_id, question_id)
) WITHOUT ROWID;
CREATE INDEX work_questions_by_agent ON work_questions (work_item_id, agent_id, offer_id);
"#;

/// The open-proposal caps (issue #40) count a Group's and a proposer's unauthorized
/// proposals in the writer, on every `work.propose`: by index, not by a scan of every Group's.
const V24: &str = r#"
CREATE INDEX proposals_open ON proposals(group_id, authorized, proposer);
"#;

/// A lookup of a WorkItem or Mission by id decides visibility on the index entry (issue #40:
/// another Group's id costs what an unknown one costs, `work/mod.rs::seen_by`): the Group and
/// Mission sit beside the id, so a hidden row's table entry is never read.
const V25: &str = r#"
CREATE INDEX work_items_seen ON work_items(work_item_id, group_id, mission_id);
CREATE INDEX missions_seen ON missions(mission_id, group_id);
"#;

/// Reactions owed after a commit (issue #41, `reactions.rs`): the transaction that appends an
/// Event some reaction follows (`work.submitted`: the review, EVD-3) inserts its row here; the
/// reaction deletes it in the transaction that records what it did, so a reaction a crash cut
/// short runs after the restart, and one that ran never runs again.
const V26: &str = r#"
CREATE TABLE reactions (
    group_id  TEXT NOT NULL,
    sequence  INTEGER NOT NULL,      -- the Event reacted to
    kind      TEXT NOT NULL,         -- its type
    subject   TEXT NOT NULL,         -- what it is about (the WorkItem of a work.submitted)
    PRIMARY KEY (group_id, sequence)
) WITHOUT ROWID;
"#;

/// Each accepted Command's signed envelope, kept with its answer so an auditor can read back
/// what was signed (issue #50: `GET /v1/groups/{g}/commands/{id}`); NULL for Commands
/// accepted before.
const V27: &str = r#"
ALTER TABLE commands ADD COLUMN envelope TEXT;
"#;

/// Each Event's actor, the Agent who acted (issue #50: search by an Agent finds what it
/// offered, accepted, failed and reviewed; `EventPayload::actor`), indexed per Group. The
/// Events appended before are given theirs from their payloads, by the same rule.
const V28: &str = r#"
ALTER TABLE events ADD COLUMN actor TEXT;
UPDATE events SET actor = CASE type
    WHEN 'session.opened' THEN json_extract(payload, '$.agentId')
    WHEN 'artifact.published' THEN json_extract(payload, '$.producer')
    WHEN 'evidence.recorded' THEN json_extract(payload, '$.producer')
    WHEN 'artifact.reuse_published' THEN json_extract(payload, '$.publishedBy')
    WHEN 'context.published' THEN json_extract(payload, '$.generator')
    WHEN 'context.forwarded' THEN json_extract(payload, '$.forwarder')
    WHEN 'group.created' THEN NULL
    WHEN 'membership.set' THEN NULL
    WHEN 'membership.removed' THEN NULL
    WHEN 'agent.deactivated' THEN NULL
    WHEN 'agent.key_rotated' THEN NULL
    WHEN 'artifact.integrity_failure' THEN NULL
    WHEN 'artifact.repaired' THEN NULL
    WHEN 'group.policy_set' THEN NULL
    ELSE json_extract(payload, '$.actor.agentId')
END;
CREATE INDEX events_by_actor ON events(group_id, actor, sequence) WHERE actor IS NOT NULL;
"#;

/// Each manifest's file name (`Manifest::file_name`, issue #50: the console shows and
/// searches it; `''` for none), indexed for prefix search. The manifests stored before get
/// theirs from their signed payloads in the same transaction ([`backfill_names`]).
const V29: &str = r#"
ALTER TABLE manifests ADD COLUMN name TEXT NOT NULL DEFAULT '';
CREATE INDEX manifests_by_name ON manifests(name);
"#;

/// The disposals of blob files (issue #43: several servers over one index): one row per
/// batch of uncited blobs whose rows were deleted, their digests concatenated in `digests`,
/// `deleting_until` set while its files are being deleted. An upload on another server that
/// found one of those files present checks here before recording its row
/// (`rows/blob_disposals.rs`). Unused, and empty, on a SQLite index (one process).
const V30: &str = r#"
CREATE TABLE blob_disposals (
    generation      INTEGER PRIMARY KEY,
    disposed_at     TEXT NOT NULL,
    deleting_until  TEXT,
    digests         BLOB NOT NULL
);
"#;

/// Each Group's log as a Merkle tree (issue #45, `tlog.rs`, `rows/tlog_hashes.rs`): the stored
/// hashes of Go's sumdb/tlog layout, appended with their Events. The Events appended before
/// get theirs when the store opens (`tlog::catch_up`), online or from the compaction archive.
const V31: &str = r#"
CREATE TABLE tlog_hashes (
    group_id  TEXT NOT NULL,
    idx       INTEGER NOT NULL,      -- tlog_tiles::stored_hash_index(level, n)
    hash      BLOB NOT NULL,         -- SHA-256, RFC 6962
    PRIMARY KEY (group_id, idx)
) WITHOUT ROWID;
"#;

/// Witnesses' cosignatures of each Group's checkpoints (issue #45, `rows/tlog_cosignatures.rs`):
/// per Group and witness, the newest few sizes it cosigned and their note lines.
const V32: &str = r#"
CREATE TABLE tlog_cosignatures (
    group_id  TEXT NOT NULL,
    witness   TEXT NOT NULL,         -- its name, as its verifier key gives it
    size      INTEGER NOT NULL,      -- the tree size it cosigned
    line      TEXT NOT NULL,         -- its signature line, as the note carries it
    PRIMARY KEY (group_id, witness, size)
) WITHOUT ROWID;
"#;

/// The lifecycle of what is stored (issue #46, `retention/`): retention policies per Group or
/// Mission, legal holds, the `artifact.disposed` Events of each disposed blob per Group, when
/// each Mission ended (policies count from it; a Mission that ended before this version counts
/// from the migration), a disposed blob's mark (its row stays: a tombstone its manifests still
/// name), each Group's quota, and when each Command was answered (its answer is trimmed after
/// the answer horizon; the id and request hash stay, so a replay is never executed again).
const V33: &str = include_str!("schema/sqlite_v33.sql");

/// Agent Cards and Presence (issue #47): each Agent's signed card and when it was issued, and
/// each member's last Presence report per Group (`rows/presence.rs`).
const V34: &str = include_str!("schema/sqlite_v34.sql");

/// Holds placed by a Group's approvers (issue #46): the Group a hold belongs to and who placed
/// it (both NULL for the operator's); the upper bound of each Group's usage that its quota
/// check keeps and the counter it is valid in (`artifacts/quota.rs`, `rows/usage_epoch.rs`);
/// an index for a WorkItem's newest offers.
const V35: &str = include_str!("schema/sqlite_v35.sql");

/// Claims on owed reactions (issue #43): on an index several servers share, the server that
/// runs one and until when (`rows/reactions.rs::claim`), so two servers do not both run it.
const V36: &str = include_str!("schema/sqlite_v36.sql");

/// Records disposed of by policy (`artifacts/records.rs`): each record's `records.disposed`
/// Event (a tombstone row stays), indexes of a Mission's records and of its blobs by digest.
const V37: &str = include_str!("schema/sqlite_v37.sql");

/// Commands keyed by (Group, id, Agent); the answers not yet trimmed found by age (stop 69).
const V38: &str = include_str!("schema/sqlite_v38.sql");

/// A session found by its Agent, Group and epoch; PostgreSQL's indexes ordered by `rowid`.
const V39: &str = include_str!("schema/sqlite_v39.sql");
/// A WorkItem's history rows carry their Event's type; its unreleased leases indexed by start.
const V40: &str = include_str!("schema/sqlite_v40.sql");
/// The artifacts each Context Package version cites, a row each; schemas', snapshots' blobs.
const V41: &str = include_str!("schema/sqlite_v41.sql");
/// Each Agent's uncited uploads' bytes, by Group, a sum that only grows (the uncited bound).
const V42: &str = include_str!("schema/sqlite_v42.sql");

/// An upload session names its last committed chunk object (stores that cannot append).
const V43: &str = include_str!("schema/sqlite_v43.sql");

/// When a quarantined blob was last repaired (a stale read through another server skips it).
const V44: &str = include_str!("schema/sqlite_v44.sql");

/// Commands in a rowid table, their key in its own index (insert and look-up touch the key).
const V45: &str = include_str!("schema/sqlite_v45.sql");

/// A lease's renewals indexed by lease and instant (its newest read from the index alone).
const V46: &str = include_str!("schema/sqlite_v46.sql");

/// No bearer secret at rest in a stored answer: those stored in the clear are trimmed.
const V47: &str = include_str!("schema/sqlite_v47.sql");

/// The Groups an operator's hold was placed in, kept with it.
const V48: &str = include_str!("schema/sqlite_v48.sql");
/// The witnessed tree size each Group's checkpoint route serves (it only grows).
const V49: &str = include_str!("schema/sqlite_v49.sql");
/// A WorkItem's refused publications indexed by arrival, its questions by sequence.
const V50: &str = include_str!("schema/sqlite_v50.sql");
/// How far each forward vouched for its artifact's manifests in the source Group.
const V51: &str = include_str!("schema/sqlite_v51.sql");

/// Every migration, in order: the one at index `i` brings the schema to version `i + 1`.
const MIGRATIONS: [&str; 51] = [
    V1, V2, V3, V4, V5, V6, V7, V8, V9, V10, V11, V12, V13, V14, V15, V16, V17, V18, V19, V20, V21,
    V22, V23, V24, V25, V26, V27, V28, V29, V30, V31, V32, V33, V34, V35, V36, V37, V38, V39, V40,
    V41, V42, V43, V44, V45, V46, V47, V48, V49, V50, V51,
];

/// A step a migration's SQL cannot do, in Rust.
type Backfill = fn(&Connection) -> Result<(), Error>;

/// Steps a migration's SQL cannot do, run in its transaction after it: (version, step).
const BACKFILLS: [(i64, Backfill); 1] = [(29, backfill::names)];

/// The newest schema version this build writes.
const LATEST: i64 = MIGRATIONS.len() as i64;

/// Brings the schema to the newest version, on either engine; refuses a database from a
/// newer weft.
pub(crate) fn migrate(conn: &crate::sql::Connection) -> Result<(), Error> {
    match conn {
        crate::sql::Connection::Sqlite(conn, _) => migrate_sqlite(conn),
        crate::sql::Connection::Postgres(_) => postgres::migrate(conn, LATEST),
    }
}

/// SQLite's migrations, versioned with `PRAGMA user_version`.
fn migrate_sqlite(conn: &Connection) -> Result<(), Error> {
    let version: i64 = conn.query_row("PRAGMA user_version", [], |row| row.get(0))?;
    if version > LATEST {
        return Err(Error::backend(std::io::Error::other(format!(
            "database schema version {version} is newer than this weft understands ({LATEST})"
        ))));
    }
    for (done, sql) in (1..)
        .zip(MIGRATIONS)
        .skip(usize::try_from(version.max(0)).unwrap_or(0))
    {
        let backfill = BACKFILLS
            .iter()
            .find(|(version, _)| *version == done)
            .map(|(_, step)| *step);
        let Some(backfill) = backfill else {
            conn.execute_batch(&format!(
                "BEGIN; {sql} PRAGMA user_version = {done}; COMMIT;"
            ))?;
            continue;
        };
        conn.execute_batch(&format!("BEGIN; {sql}"))?;
        let stepped = backfill(conn).and_then(|()| {
            Ok(conn.execute_batch(&format!("PRAGMA user_version = {done}; COMMIT;"))?)
        });
        if let Err(error) = stepped {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(error);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_secrets;
