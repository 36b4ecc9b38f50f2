-- Version 39 on SQLite (`schema.rs`, V39): a session found by its Agent, Group and epoch.
-- Every request under a capability token checks that the session it was granted in is the
-- one still live (`access/grant.rs`), and read the whole `sessions` table to find it.
CREATE INDEX sessions_by_epoch ON sessions(agent_id, group_id, session_epoch);
