-- Version 44 on PostgreSQL (`schema.rs`, V44), as on SQLite: when a quarantined blob was last
-- repaired, so a stale read through another server cannot quarantine it (`engine/repairs.rs`).
ALTER TABLE blobs ADD COLUMN repaired_at TEXT COLLATE "C";
