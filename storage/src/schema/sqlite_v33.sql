-- Version 33 on SQLite: the lifecycle of what is stored (`schema.rs`, V33).
CREATE TABLE retention_policies (
    group_id      TEXT NOT NULL,
    mission_id    TEXT NOT NULL,     -- '' for the Group's own policy or a classification's
    classification TEXT NOT NULL DEFAULT '',  -- '' unless the policy is for one classification
    keep_bytes    INTEGER,           -- seconds after the Mission's end; NULL: forever
    keep_records  INTEGER,
    sequence      INTEGER NOT NULL,  -- its retention.set Event
    PRIMARY KEY (group_id, mission_id, classification)
) WITHOUT ROWID;
CREATE TABLE holds (
    hold_id    TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,        -- artifact, workItem, mission
    target     TEXT NOT NULL,
    reason     TEXT NOT NULL,
    placed_at  TEXT NOT NULL,
    lifted_at  TEXT
);
CREATE TABLE blob_dispositions (
    group_id     TEXT NOT NULL,
    blake3       BLOB NOT NULL,
    sequence     INTEGER NOT NULL,   -- its artifact.disposed Event in group_id
    disposed_at  TEXT NOT NULL,
    PRIMARY KEY (group_id, blake3, sequence)
) WITHOUT ROWID;
ALTER TABLE missions ADD COLUMN ended_at TEXT;
UPDATE missions SET ended_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE state <> 'active';
ALTER TABLE blobs ADD COLUMN disposed_at TEXT;
ALTER TABLE blobs ADD COLUMN disposal_pending INTEGER;  -- 1 until its file is deleted
CREATE INDEX blobs_disposal_pending ON blobs(disposal_pending) WHERE disposal_pending IS NOT NULL;
CREATE INDEX blob_uploaders_group ON blob_uploaders(group_id);
ALTER TABLE commands ADD COLUMN recorded_at TEXT;  -- NULL: kept before V33 (trimmed from the migration)
UPDATE commands SET recorded_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now');
ALTER TABLE groups ADD COLUMN quota_bytes INTEGER;
ALTER TABLE groups ADD COLUMN quota_artifacts INTEGER;
