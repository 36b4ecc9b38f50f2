-- Version 34 on SQLite: Agent Cards and Presence (`schema.rs`, V34).
ALTER TABLE agents ADD COLUMN card TEXT;               -- the signed card's DSSE envelope, JSON
ALTER TABLE agents ADD COLUMN card_issued_ms INTEGER;  -- its issuedAt in Unix milliseconds
ALTER TABLE agents ADD COLUMN card_registered_at TEXT;
ALTER TABLE agents ADD COLUMN max_concurrency INTEGER;  -- the card's, for Presence's bound
CREATE TABLE presence (
    group_id       TEXT NOT NULL,
    agent_id       TEXT NOT NULL,
    free_slots     INTEGER NOT NULL,
    capacity_state TEXT NOT NULL,
    reported_ms    INTEGER NOT NULL,  -- Unix milliseconds, for the rate limit
    reported_at    TEXT NOT NULL,
    schedules      TEXT NOT NULL DEFAULT '[]',  -- DIS-1: JSON, the reporter's WorkItems of this Group
    PRIMARY KEY (group_id, agent_id)
) WITHOUT ROWID;
