-- Version 41 on PostgreSQL (`schema.rs`, V41), as on SQLite: the artifacts each Context
-- Package version cites, one row each; the blobs schemas and snapshots name, indexed.
--
-- `cited` first, with no default once filled: a server of an earlier version still running
-- over the database fails to index a Context Package version instead of indexing one whose
-- citations collection would not see. Adding it locks `context_packages` to the commit, so
-- the backfill below reads every version committed before, and none can be added while it
-- runs.
ALTER TABLE context_packages ADD COLUMN cited BIGINT NOT NULL DEFAULT 1;
ALTER TABLE context_packages ALTER COLUMN cited DROP DEFAULT;
CREATE TABLE context_package_artifacts (
    blake3      BYTEA NOT NULL,
    context_id  BYTEA NOT NULL,
    PRIMARY KEY (blake3, context_id)
);
INSERT INTO context_package_artifacts (blake3, context_id)
    SELECT DISTINCT decode(substr(j.value, 8), 'hex'), c.context_id
    FROM context_packages c, json_array_elements_text(c.artifacts::json) j(value)
    WHERE j.value LIKE 'blake3:%' AND length(j.value) = 71
ON CONFLICT DO NOTHING;
CREATE INDEX schemas_blake3 ON schemas(blake3);
CREATE INDEX snapshots_state ON snapshots(state_blake3);
CREATE INDEX snapshots_archive ON snapshots(archive_blake3);
