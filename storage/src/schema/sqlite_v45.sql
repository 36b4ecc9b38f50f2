-- Version 45 on SQLite (`schema.rs`, V45). `commands` becomes a rowid table with its key in a
-- separate unique index (issue #44). Kept WITHOUT ROWID, every accepted Command inserted its
-- whole row (its answer and signed envelope, about 1.5 KiB) into the key's B-tree at a random
-- place (a Command id is its Agent's choice): few rows a page, a split every few inserts, and
-- each a dirtied 4 KiB page in the WAL; every Command's retry look-up, which almost always
-- finds nothing, walked that deep tree. Now rows are appended at the table's end and only the
-- short key goes into the index, which the look-up searches. PostgreSQL's table was always
-- laid out this way (a heap and its key's index).
CREATE TABLE commands_v45 (
    group_id      TEXT NOT NULL,
    agent_id      TEXT NOT NULL,             -- '' for a Command stored before V22
    command_id    TEXT NOT NULL,
    request_hash  BLOB NOT NULL,             -- blake3 of the DSSE payload bytes
    answer        TEXT NOT NULL,             -- the 201 body, replayed on a retry; '' once trimmed
    envelope      TEXT,                      -- the signed Command; NULL before V27
    recorded_at   TEXT                       -- NULL: kept before V33
);
INSERT INTO commands_v45 (group_id, agent_id, command_id, request_hash, answer, envelope, recorded_at)
    SELECT group_id, agent_id, command_id, request_hash, answer, envelope, recorded_at FROM commands;
DROP TABLE commands;
ALTER TABLE commands_v45 RENAME TO commands;
CREATE UNIQUE INDEX commands_key ON commands(group_id, command_id, agent_id);
CREATE INDEX commands_answered ON commands(recorded_at) WHERE answer <> '';
