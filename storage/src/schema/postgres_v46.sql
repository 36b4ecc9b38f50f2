-- Version 46 on PostgreSQL (`schema.rs`, V46): a lease's renewals indexed by lease, instant
-- and `rowid`, the order its newest are read in on both engines (`rows/lease_renewals.rs`).
DROP INDEX lease_renewals_lease;
CREATE INDEX lease_renewals_lease ON lease_renewals(lease_id, renewed_at, rowid);
