-- Version 37 on SQLite: records disposed of by policy (`schema.rs`, V37).
ALTER TABLE manifests ADD COLUMN records_disposed INTEGER;  -- its records.disposed Event in group_id; NULL: kept
ALTER TABLE evidence ADD COLUMN records_disposed INTEGER;   -- its records.disposed Event in group_id; NULL: kept
CREATE INDEX evidence_mission ON evidence(mission_id);
CREATE INDEX manifests_records_kept ON manifests(mission_id) WHERE records_disposed IS NULL;
CREATE INDEX evidence_records_kept ON evidence(mission_id) WHERE records_disposed IS NULL;
CREATE INDEX reusable_artifacts_evidence ON reusable_artifacts(evidence_id);
CREATE INDEX manifests_mission_blake3 ON manifests(mission_id, blake3);
