-- Version 46 on SQLite (`schema.rs`, V46): a lease's renewals indexed by lease and instant.
-- Every Command's answer lists its lease's newest renewals (`rows/lease_renewals.rs`). Read
-- along an index of `lease_id` alone, each of those rows was a second search of the table by
-- its rowid for its instant (about 2 % of a renewal's server CPU, issue #44); this index
-- holds the instant, and the rowid after it, so the read never leaves it.
DROP INDEX lease_renewals_lease;
CREATE INDEX lease_renewals_lease ON lease_renewals(lease_id, renewed_at);
