-- Version 40 on SQLite (`schema.rs`, V40). Lookups of a WorkItem that read what they find,
-- not the WorkItem's whole history: each history row carries its Event's type, so a
-- `work.start` finds the last `work.started` or `work.failed` by index (`rows/work_history.rs`)
-- instead of walking every progress report since; and a WorkItem's unreleased leases are
-- indexed by start, so a Command's current lease (`rows/leases.rs`) is one index entry, not a
-- walk of every lease the WorkItem ever had. Rows whose Event was compacted away keep ''.
ALTER TABLE work_history ADD COLUMN type TEXT NOT NULL DEFAULT '';
UPDATE work_history SET type = COALESCE(
    (SELECT e.type FROM work_items w JOIN events e
         ON e.group_id = w.group_id AND e.sequence = work_history.sequence
     WHERE w.work_item_id = work_history.work_item_id), '');
CREATE INDEX work_history_by_type ON work_history(work_item_id, type, sequence);
CREATE INDEX leases_current ON leases(work_item_id, started_at) WHERE released_at IS NULL;
