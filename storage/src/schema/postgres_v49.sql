-- Version 49 on PostgreSQL (`schema.rs`, V49): the witnessed tree size each Group's checkpoint
-- route serves (`rows/tlog_served.rs`); see `sqlite_v49.sql`.
CREATE TABLE tlog_served (
    group_id  TEXT COLLATE "C" PRIMARY KEY,
    size      BIGINT NOT NULL
);
