-- Version 41 on SQLite (`schema.rs`, V41). Whether anything of the store cites a blob, as
-- collection asks of each candidate and the sweep of each uncited upload, by index rather
-- than by a scan per blob: the artifacts each Context Package version cites, one row each
-- (`rows/context_package_artifacts.rs`; before, `LIKE '%blake3:…%'` over every version's
-- JSON), and the blobs schemas and snapshots name. Also the version a server must be at for
-- the quota's remembered lower bound (`artifacts/quota.rs`): from this version on, collection
-- and the sweep move `usage_epoch` when a Group's usage shrinks, and a server of an earlier
-- version refuses to open the database.
CREATE TABLE context_package_artifacts (
    blake3      BLOB NOT NULL,          -- a cited artifact
    context_id  BLOB NOT NULL,          -- the version citing it (`context_packages`)
    PRIMARY KEY (blake3, context_id)
) WITHOUT ROWID;
INSERT OR IGNORE INTO context_package_artifacts (blake3, context_id)
    SELECT unhex(substr(j.value, 8)), c.context_id
    FROM context_packages c, json_each(c.artifacts) j
    WHERE j.value LIKE 'blake3:%' AND length(j.value) = 71;
-- Every version's citations are rows from here on (`cited` says so; on PostgreSQL it has no
-- default, so a server of an earlier version still running over the database fails to index
-- a version rather than index one whose citations collection would not see).
ALTER TABLE context_packages ADD COLUMN cited INTEGER NOT NULL DEFAULT 1;
CREATE INDEX schemas_blake3 ON schemas(blake3);
CREATE INDEX snapshots_state ON snapshots(state_blake3);
CREATE INDEX snapshots_archive ON snapshots(archive_blake3);
