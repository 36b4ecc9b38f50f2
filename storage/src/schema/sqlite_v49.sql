-- Version 49 on SQLite (`schema.rs`, V49): the size of each Group's transparency-log tree
-- the checkpoint route serves when witnesses cosign it (`rows/tlog_served.rs`). It only grows:
-- a client that saw a checkpoint is never shown a smaller one.
CREATE TABLE tlog_served (
    group_id  TEXT PRIMARY KEY,
    size      INTEGER NOT NULL
);
