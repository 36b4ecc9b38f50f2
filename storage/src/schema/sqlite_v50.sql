-- Version 50 on SQLite (`schema.rs`, V50): a WorkItem's refused publications indexed by
-- arrival and its questions by sequence. Every Command's answer lists the newest of each
-- (`rows/inert_publications.rs`, `rows/work_questions.rs`); read along an index of the
-- WorkItem alone, each read opened a sorter for its `ORDER BY`, even with no rows to sort
-- (issue #44). These indexes hold the order, so the newest are the index's last entries.
DROP INDEX inert_publications_work_item;
CREATE INDEX inert_publications_work_item
    ON inert_publications(work_item_id, received_at, manifest_id);
CREATE INDEX work_questions_by_sequence ON work_questions (work_item_id, asked_sequence);
