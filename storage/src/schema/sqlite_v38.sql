-- Version 38 on SQLite (`schema.rs`, V38). Lookups that read what they find, not a Group's
-- history: Commands keyed by (Group, id, Agent), so a signed Command fetched by its id
-- without its Agent (`work/handle.rs`) reads the Agents that used that id, not every Command
-- of the Group; and the Command and idempotent answers not yet trimmed found by age
-- (`lifespan/answers.rs`), so a trimming batch reads its batch, not every row trimmed before.
CREATE TABLE commands_v38 (
    group_id      TEXT NOT NULL,
    agent_id      TEXT NOT NULL,             -- '' for a Command stored before V22
    command_id    TEXT NOT NULL,
    request_hash  BLOB NOT NULL,             -- blake3 of the DSSE payload bytes
    answer        TEXT NOT NULL,             -- the 201 body, replayed on a retry; '' once trimmed
    envelope      TEXT,                      -- the signed Command; NULL before V27
    recorded_at   TEXT,                      -- NULL: kept before V33
    PRIMARY KEY (group_id, command_id, agent_id)
) WITHOUT ROWID;
INSERT INTO commands_v38 (group_id, agent_id, command_id, request_hash, answer, envelope, recorded_at)
    SELECT group_id, agent_id, command_id, request_hash, answer, envelope, recorded_at FROM commands;
DROP TABLE commands;
ALTER TABLE commands_v38 RENAME TO commands;
CREATE INDEX commands_answered ON commands(recorded_at) WHERE answer <> '';
CREATE INDEX idempotency_answered ON idempotency(created_at) WHERE status <> 0;
