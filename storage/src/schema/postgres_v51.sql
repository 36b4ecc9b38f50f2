-- Version 51 on PostgreSQL (`schema.rs`, V51): how far a forward vouched for its artifact's
-- manifests; see `sqlite_v51.sql`.
ALTER TABLE forwarded_artifacts ADD COLUMN up_to BIGINT NOT NULL DEFAULT 0;
UPDATE forwarded_artifacts SET up_to = coalesce((SELECT max(m.rowid) FROM manifests m
    WHERE m.blake3 = forwarded_artifacts.blake3
      AND m.group_id = forwarded_artifacts.from_group_id), 0);
