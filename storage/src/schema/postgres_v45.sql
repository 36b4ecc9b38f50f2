-- Version 45 on PostgreSQL (`schema.rs`, V45): nothing to change. SQLite's `commands` became a
-- table with its key in a separate index, which PostgreSQL's (a heap and its primary key's
-- index) always was. It gets no `rowid` column: nothing reads a Command by rowid, and the
-- column's unique index would cost every Command one more index insert.
SELECT 1;
