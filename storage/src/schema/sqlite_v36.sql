-- Version 36 on SQLite: which server runs an owed reaction, and until when (`schema.rs`, V36).
ALTER TABLE reactions ADD COLUMN claimed_by TEXT;     -- NULL: no server has claimed it
ALTER TABLE reactions ADD COLUMN claimed_until TEXT;  -- after this, another server may
