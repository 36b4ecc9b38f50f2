-- Version 36 on PostgreSQL: which server runs an owed reaction, and until when (`schema.rs`, V36).
ALTER TABLE reactions ADD COLUMN claimed_by TEXT COLLATE "C";     -- NULL: no server has claimed it
ALTER TABLE reactions ADD COLUMN claimed_until TEXT COLLATE "C";  -- after this, another server may
