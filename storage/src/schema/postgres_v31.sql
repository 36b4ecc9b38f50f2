-- Version 31 on PostgreSQL: each Group's log as a Merkle tree (`schema.rs`, V31).
CREATE TABLE tlog_hashes (
    group_id  TEXT COLLATE "C" NOT NULL,
    idx       BIGINT NOT NULL,
    hash      BYTEA NOT NULL,
    PRIMARY KEY (group_id, idx)
);
