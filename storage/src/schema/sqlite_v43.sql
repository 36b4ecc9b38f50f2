-- Version 43 on SQLite (`schema.rs`, V43). On a store that cannot append (S3, memory), each
-- chunk of a resumable upload is an object of its own whose name also says which chunk came
-- before it (`blobs/chunks.rs`); the session names its last committed chunk, and its bytes are
-- the chain back from it. Two servers writing a chunk at one offset at once (a client retrying
-- on another) each write an object of their own; only the one whose row moved is in the chain.
-- NULL: no chunk yet, a local file, or a session older than this version (its chunks are
-- found by offset, as before).
ALTER TABLE upload_sessions ADD COLUMN last_chunk TEXT;
-- How many chunks it took: a session takes at most `--max-upload-chunks` (`options.rs`), so
-- reading its chunks back (a listing of its objects) stays bounded.
ALTER TABLE upload_sessions ADD COLUMN chunks INTEGER NOT NULL DEFAULT 0;
