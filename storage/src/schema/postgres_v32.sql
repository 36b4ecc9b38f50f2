-- Version 32 on PostgreSQL: witnesses' cosignatures of each Group's checkpoints (`schema.rs`, V32).
CREATE TABLE tlog_cosignatures (
    group_id  TEXT COLLATE "C" NOT NULL,
    witness   TEXT COLLATE "C" NOT NULL,
    size      BIGINT NOT NULL,
    line      TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (group_id, witness, size)
);
