-- Version 38 on PostgreSQL: Commands keyed by (Group, id, Agent), and the answers still kept
-- found by age (`schema.rs`, V38).
ALTER TABLE commands DROP CONSTRAINT commands_pkey;
ALTER TABLE commands ADD PRIMARY KEY (group_id, command_id, agent_id);
CREATE INDEX commands_answered ON commands(recorded_at) WHERE answer <> '';
CREATE INDEX idempotency_answered ON idempotency(created_at) WHERE status <> 0;
