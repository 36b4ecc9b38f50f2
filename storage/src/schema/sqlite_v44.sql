-- Version 44 on SQLite (`schema.rs`, V44). When a quarantined blob was last repaired (its bytes
-- uploaded again): a read through another server that judged the replaced copy's bytes, and
-- began before the repair, does not quarantine the repaired blob (`engine/repairs.rs`).
ALTER TABLE blobs ADD COLUMN repaired_at TEXT;
