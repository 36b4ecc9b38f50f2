-- Version 48 on SQLite (`schema.rs`, V48): the Groups an operator's hold was placed in, kept
-- with it (`rows/hold_groups.rs`). Its lifting, its listing and its Events go to those Groups,
-- never to a Group that published the held bytes afterwards. Holds placed before this version
-- have none and are judged as before, by what their target belongs to now.
CREATE TABLE hold_groups (
    hold_id   TEXT NOT NULL,
    group_id  TEXT NOT NULL,
    PRIMARY KEY (hold_id, group_id)
);
