-- Version 48 on PostgreSQL (`schema.rs`, V48): the Groups an operator's hold was placed in,
-- kept with it (`rows/hold_groups.rs`); see `sqlite_v48.sql`.
CREATE TABLE hold_groups (
    hold_id   TEXT COLLATE "C" NOT NULL,
    group_id  TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (hold_id, group_id)
);
