-- Version 35 on SQLite: holds placed by a Group's approvers (`schema.rs`, V35).
ALTER TABLE holds ADD COLUMN group_id TEXT;   -- the approver's Group; NULL for the operator's
ALTER TABLE holds ADD COLUMN placed_by TEXT;  -- the approver; NULL for the operator
CREATE INDEX holds_group_in_force ON holds(group_id) WHERE lifted_at IS NULL;
