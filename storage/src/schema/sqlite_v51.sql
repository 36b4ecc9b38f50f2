-- Version 51 on SQLite (`schema.rs`, V51): how far a forward vouched for its artifact's
-- manifests. A Context Package forwarded into another Group showed there every manifest
-- of the artifact in the source Group, also those published later, whose classification
-- the forward never weighed (CTX-7). `up_to` is the newest such manifest's rowid when the
-- forward committed (a Group's later publications get later rowids: both hold its lock);
-- forwards made before are cut where they stand now.
ALTER TABLE forwarded_artifacts ADD COLUMN up_to INTEGER NOT NULL DEFAULT 0;
UPDATE forwarded_artifacts SET up_to = coalesce((SELECT max(m.rowid) FROM manifests m
    WHERE m.blake3 = forwarded_artifacts.blake3
      AND m.group_id = forwarded_artifacts.from_group_id), 0);
