-- Version 42 on SQLite (`schema.rs`, V42). Every byte each Agent uploaded uncited, by Group,
-- as a sum that only grows (`rows/agent_upload_totals.rs`): a server's bound on an Agent's
-- uncited bytes, an exact sum read once, stays an upper bound by adding what this sum grew
-- since, whichever server took the uploads (`artifacts/upload.rs`, `limits.rs`). One row per
-- (Agent, Group): an upload writes only its own Group's row, under that Group's lock.
CREATE TABLE agent_upload_totals (
    agent_id  TEXT NOT NULL,
    group_id  TEXT NOT NULL,
    bytes     INTEGER NOT NULL,
    PRIMARY KEY (agent_id, group_id)
) WITHOUT ROWID;
