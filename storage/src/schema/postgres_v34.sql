-- Version 34 on PostgreSQL: Agent Cards and Presence (`schema.rs`, V34).
ALTER TABLE agents ADD COLUMN card TEXT COLLATE "C";
ALTER TABLE agents ADD COLUMN card_issued_ms BIGINT;
ALTER TABLE agents ADD COLUMN card_registered_at TEXT COLLATE "C";
ALTER TABLE agents ADD COLUMN max_concurrency BIGINT;
CREATE TABLE presence (
    group_id       TEXT COLLATE "C" NOT NULL,
    agent_id       TEXT COLLATE "C" NOT NULL,
    free_slots     BIGINT NOT NULL,
    capacity_state TEXT COLLATE "C" NOT NULL,
    reported_ms    BIGINT NOT NULL,
    reported_at    TEXT COLLATE "C" NOT NULL,
    schedules      TEXT COLLATE "C" NOT NULL DEFAULT '[]',
    PRIMARY KEY (group_id, agent_id)
);
