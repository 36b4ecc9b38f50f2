-- Version 42 on PostgreSQL (`schema.rs`, V42), as on SQLite: every byte each Agent uploaded
-- uncited, by Group, as a sum that only grows (`rows/agent_upload_totals.rs`).
CREATE TABLE agent_upload_totals (
    agent_id  TEXT COLLATE "C" NOT NULL,
    group_id  TEXT COLLATE "C" NOT NULL,
    bytes     BIGINT NOT NULL,
    PRIMARY KEY (agent_id, group_id)
);
