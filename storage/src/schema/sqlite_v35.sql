-- Version 35 on SQLite: holds placed by a Group's approvers, and the running
-- count of a Group's usage its quota check keeps (`schema.rs`, V35).
ALTER TABLE holds ADD COLUMN group_id TEXT;   -- the approver's Group; NULL for the operator's
ALTER TABLE holds ADD COLUMN placed_by TEXT;  -- the approver; NULL for the operator
CREATE INDEX holds_group_in_force ON holds(group_id) WHERE lifted_at IS NULL;
CREATE INDEX holds_group_placed ON holds(group_id, placed_at);  -- the placement rate
-- An upper bound of the Group's usage (`artifacts/quota.rs`); NULL until counted.
ALTER TABLE groups ADD COLUMN usage_artifacts_bound INTEGER;
ALTER TABLE groups ADD COLUMN usage_bytes_bound INTEGER;
ALTER TABLE groups ADD COLUMN usage_bound_epoch INTEGER;  -- `usage_epoch` when it was counted
-- No row until the first repair (then one, id 0): `weft migrate` copies it as any row.
CREATE TABLE usage_epoch (id INTEGER PRIMARY KEY, epoch INTEGER NOT NULL);
-- A WorkItem's view lists its newest offers (`rows/offers.rs::newest`).
CREATE INDEX offers_work_item_sequence ON offers(work_item_id, sequence);
