-- Version 47 on SQLite (`schema.rs`, V47): no bearer secret stays at rest in a stored answer.
-- Before, an answer to `POST /v1/leases/{id}/tokens` or `POST /v1/sessions` asked for with an
-- `Idempotency-Key` was stored as sent, its `"token"` in the clear; it is now stored sealed to
-- its caller's token (`src/http/sealed.rs`). The answers stored before are trimmed as the
-- answer horizon trims (`rows/idempotency.rs`): the key and request hash stay, so a retry is
-- answered `command_expired`, never done again. A sealed answer begins with a NUL byte.
UPDATE idempotency SET status = 0, body = X''
WHERE status BETWEEN 200 AND 299
  AND substr(body, 1, 1) <> X'00'
  AND instr(body, CAST('"token":"' AS BLOB)) > 0;
