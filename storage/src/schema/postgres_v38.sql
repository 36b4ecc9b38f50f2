-- Version 38 on PostgreSQL (`schema.rs`, V38). Lookups that read what they find, not a Group's
-- history: Commands keyed by (Group, id, Agent), so a signed Command fetched by its id
-- without its Agent (`work/handle.rs`) reads the Agents that used that id, not every Command
-- of the Group; and the Command and idempotent answers not yet trimmed found by age
-- (`lifespan/answers.rs`), so a trimming batch reads its batch, not every row trimmed before.
ALTER TABLE commands DROP CONSTRAINT commands_pkey;
ALTER TABLE commands ADD PRIMARY KEY (group_id, command_id, agent_id);
CREATE INDEX commands_answered ON commands(recorded_at) WHERE answer <> '';
CREATE INDEX idempotency_answered ON idempotency(created_at) WHERE status <> 0;
