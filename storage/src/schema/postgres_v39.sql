-- Version 39 on PostgreSQL (`schema.rs`, V39): a session found by its Agent, Group and epoch
-- (as on SQLite); and `rowid` in the indexes whose readers order by it, as SQLite's carry it
-- implicitly: a lease's newest renewals (every Command's view) sorted all the lease's rows,
-- and a page of a Group's artifacts or Evidence walked the table's `rowid` order.
CREATE INDEX sessions_by_epoch ON sessions(agent_id, group_id, session_epoch);
DROP INDEX lease_renewals_lease;
CREATE INDEX lease_renewals_lease ON lease_renewals(lease_id, rowid);
DROP INDEX manifests_group;
CREATE INDEX manifests_group ON manifests(group_id, rowid);
DROP INDEX evidence_by_group;
CREATE INDEX evidence_by_group ON evidence(group_id, rowid);
