//! A statement written for both engines (SQLite's spelling) in PostgreSQL's, translated
//! once per statement when it is first prepared (`postgres.rs`).
//!
//! The translation is deliberately small and total over what the `rows/` files write:
//! `?N` placeholders become `$N`; `INSERT OR IGNORE` becomes `ON CONFLICT DO NOTHING`;
//! SQLite's `INDEXED BY` hints are dropped; `CROSS JOIN t ON` becomes `INNER JOIN t ON`;
//! `json_each(x)` becomes `json_array_elements_text(x::json)` (its column is `value` on both);
//! `json_extract(x, '$.k')` becomes `(x::json ->> 'k')`; `zeroblob(n)` becomes `n` zero
//! bytes. Anything else must already be common SQL; the schema gives every rowid table a
//! `rowid` identity column, so `rowid` means the same, except `commands` (a rowid table on
//! SQLite only since V45, with no `rowid` on PostgreSQL: never name its rowid).

/// A statement written for both engines, in PostgreSQL's spelling (see the module's doc).
pub(crate) fn translate(sql: &str) -> String {
    let placeholders = placeholders(sql);
    let mut out = rewrite_calls(&placeholders);
    out = remove_indexed_by(&out);
    out = cross_joins_with_on(&out);
    if let Some(at) = find_word(&out, "INSERT OR IGNORE") {
        out.replace_range(at..at + "INSERT OR IGNORE".len(), "INSERT");
        let trimmed = out.trim_end().trim_end_matches(';').to_owned();
        out = match find_word(&trimmed, "RETURNING") {
            Some(at) => format!(
                "{} ON CONFLICT DO NOTHING {}",
                &trimmed[..at],
                &trimmed[at..]
            ),
            None => format!("{trimmed} ON CONFLICT DO NOTHING"),
        };
    }
    out
}

/// `?N` as `$N` and a bare `?` as the next number, outside quotes.
fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut next = 1u32;
    let mut quote: Option<char> = None;
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(c);
            }
            None if c == '?' => {
                let mut number = String::new();
                while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
                    number.push(d);
                    chars.next();
                }
                if number.is_empty() {
                    number = next.to_string();
                    next += 1;
                } else if let Ok(n) = number.parse::<u32>() {
                    next = next.max(n + 1);
                }
                out.push('$');
                out.push_str(&number);
            }
            None => out.push(c),
        }
    }
    out
}

/// The byte offset of `word` (case-insensitive, on word boundaries), outside quotes.
fn find_word(sql: &str, word: &str) -> Option<usize> {
    let upper = sql.to_ascii_uppercase();
    let word = word.to_ascii_uppercase();
    let bytes = upper.as_bytes();
    let mut from = 0;
    while let Some(found) = upper[from..].find(&word) {
        let at = from + found;
        let before = at.checked_sub(1).map(|i| bytes[i]);
        let after = bytes.get(at + word.len()).copied();
        let boundary = |b: Option<u8>| b.is_none_or(|b| !(b.is_ascii_alphanumeric() || b == b'_'));
        if boundary(before) && boundary(after) && !inside_quotes(sql, at) {
            return Some(at);
        }
        from = at + word.len();
    }
    None
}

fn inside_quotes(sql: &str, at: usize) -> bool {
    sql[..at].chars().filter(|c| *c == '\'').count() % 2 == 1
}

fn remove_indexed_by(sql: &str) -> String {
    let mut out = sql.to_owned();
    while let Some(at) = find_word(&out, "INDEXED BY") {
        let rest = &out[at + "INDEXED BY".len()..];
        let name_start = rest.len() - rest.trim_start().len();
        let name_len = rest[name_start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len() - name_start);
        out.replace_range(at..at + "INDEXED BY".len() + name_start + name_len, "");
    }
    out
}

/// SQLite's `CROSS JOIN t ON …` (a join whose order the planner keeps) as an inner join:
/// PostgreSQL takes `ON` only on an inner or outer join.
fn cross_joins_with_on(sql: &str) -> String {
    let mut out = sql.to_owned();
    let mut from = 0;
    while let Some(found) = find_word(&out[from..], "CROSS JOIN") {
        let at = from + found;
        let rest = &out[at + "CROSS JOIN".len()..];
        let clause_end = ["WHERE", "JOIN", "ORDER", "GROUP", "LIMIT", ")"]
            .iter()
            .filter_map(|word| find_word(rest, word))
            .min()
            .unwrap_or(rest.len());
        if find_word(&rest[..clause_end], "ON").is_some() {
            out.replace_range(at..at + "CROSS JOIN".len(), "INNER JOIN");
        }
        from = at + "CROSS JOIN".len();
    }
    out
}

/// The text between the parenthesis opened just before `open` and its match.
fn call_arguments(sql: &str, open: usize) -> Option<(usize, &str)> {
    let mut depth = 0usize;
    for (offset, c) in sql[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some((open + offset, &sql[open + 1..open + offset]));
                }
            }
            _ => {}
        }
    }
    None
}

/// `json_each(x)` and `json_extract(x, '$.k')` in PostgreSQL's spelling.
fn rewrite_calls(sql: &str) -> String {
    let mut out = sql.to_owned();
    for (name, build) in [
        ("json_each", json_each as fn(&str) -> Option<String>),
        ("json_extract", json_extract),
        ("zeroblob", zeroblob),
    ] {
        let mut from = 0;
        while let Some(found) = find_word(&out[from..], name) {
            let at = from + found;
            let open = at + name.len();
            let Some((close, arguments)) = out
                .get(open..)
                .filter(|rest| rest.starts_with('('))
                .and_then(|_| call_arguments(&out, open))
            else {
                from = open;
                continue;
            };
            let Some(replacement) = build(arguments) else {
                from = open;
                continue;
            };
            out.replace_range(at..=close, &replacement);
            from = at + replacement.len();
        }
    }
    out
}

fn json_each(arguments: &str) -> Option<String> {
    Some(format!(
        "json_array_elements_text(CAST({arguments} AS json))"
    ))
}

fn zeroblob(arguments: &str) -> Option<String> {
    Some(format!("decode(repeat('00', {arguments}), 'hex')"))
}

fn json_extract(arguments: &str) -> Option<String> {
    let comma = arguments.rfind(',')?;
    let (value, path) = (arguments[..comma].trim(), arguments[comma + 1..].trim());
    let key = path.strip_prefix("'$.")?.strip_suffix('\'')?;
    Some(format!("(CAST({value} AS json) ->> '{key}')"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_are_translated() {
        assert_eq!(
            translate("SELECT a FROM t WHERE x = ?1 AND y = ?2 AND z = '?'"),
            "SELECT a FROM t WHERE x = $1 AND y = $2 AND z = '?'"
        );
        assert_eq!(
            translate("INSERT OR IGNORE INTO t (a) VALUES (?1)"),
            "INSERT INTO t (a) VALUES ($1) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            translate(
                "SELECT m.rowid FROM json_each(?3) j CROSS JOIN things m INDEXED BY things_x WHERE m.x = j.value"
            ),
            "SELECT m.rowid FROM json_array_elements_text(CAST($3 AS json)) j CROSS JOIN things m  WHERE m.x = j.value"
        );
        assert_eq!(
            translate("SELECT a FROM t CROSS JOIN u ON u.x = t.x CROSS JOIN v WHERE v.y = 1"),
            "SELECT a FROM t INNER JOIN u ON u.x = t.x CROSS JOIN v WHERE v.y = 1"
        );
        assert_eq!(
            translate("SELECT json_extract(e.payload, '$.ownershipEpoch') FROM e"),
            "SELECT (CAST(e.payload AS json) ->> 'ownershipEpoch') FROM e"
        );
        assert_eq!(
            translate("SELECT value FROM json_each(coalesce(?3, '[null]'))"),
            "SELECT value FROM json_array_elements_text(CAST(coalesce($3, '[null]') AS json))"
        );
    }
}
