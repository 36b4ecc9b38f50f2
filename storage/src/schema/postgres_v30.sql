-- Version 30 on PostgreSQL: the disposals of blob files (`schema.rs`, V30).
CREATE TABLE blob_disposals (
    generation      BIGINT PRIMARY KEY,
    disposed_at     TEXT COLLATE "C" NOT NULL,
    deleting_until  TEXT COLLATE "C",
    digests         BYTEA NOT NULL
);
