-- Version 40 on PostgreSQL (`schema.rs`, V40), as on SQLite: each WorkItem history row
-- carries its Event's type, indexed; a WorkItem's unreleased leases indexed by start.
ALTER TABLE work_history ADD COLUMN type TEXT COLLATE "C" NOT NULL DEFAULT '';
UPDATE work_history h SET type = e.type
    FROM work_items w JOIN events e ON e.group_id = w.group_id
    WHERE w.work_item_id = h.work_item_id AND e.sequence = h.sequence;
-- No default once filled: a server of an earlier version still running over this database
-- (versions are checked when a server opens it) fails its history rows loudly instead of
-- writing rows without a type that the look-ups by type would never find.
ALTER TABLE work_history ALTER COLUMN type DROP DEFAULT;
CREATE INDEX work_history_by_type ON work_history(work_item_id, type, sequence);
CREATE INDEX leases_current ON leases(work_item_id, started_at) WHERE released_at IS NULL;
