-- Version 43 on PostgreSQL (`schema.rs`, V43), as on SQLite: an upload session names its last
-- committed chunk object on a store that cannot append (`blobs/chunks.rs`).
ALTER TABLE upload_sessions ADD COLUMN last_chunk TEXT COLLATE "C";
-- And how many chunks it took (at most `--max-upload-chunks`, `options.rs`).
ALTER TABLE upload_sessions ADD COLUMN chunks BIGINT NOT NULL DEFAULT 0;
