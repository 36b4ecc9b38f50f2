-- Version 47 on PostgreSQL (`schema.rs`, V47): the stored answers that hold a bearer secret
-- in the clear are trimmed, as on SQLite (`sqlite_v47.sql`).
UPDATE idempotency SET status = 0, body = ''::bytea
WHERE status BETWEEN 200 AND 299
  AND substring(body from 1 for 1) <> decode('00', 'hex')
  AND position(convert_to('"token":"', 'UTF8') in body) > 0;
