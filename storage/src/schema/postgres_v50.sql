-- Version 50 on PostgreSQL (`schema.rs`, V50): a WorkItem's refused publications indexed by
-- arrival and its questions by sequence, the orders their newest are read in; see
-- `sqlite_v50.sql`.
DROP INDEX inert_publications_work_item;
CREATE INDEX inert_publications_work_item
    ON inert_publications(work_item_id, received_at, manifest_id);
CREATE INDEX work_questions_by_sequence ON work_questions (work_item_id, asked_sequence);
