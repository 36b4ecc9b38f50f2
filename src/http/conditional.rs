//! RFC 9110 §13 conditional requests on a representation with a strong ETag: `If-Match`,
//! `If-None-Match` and `If-Range`, evaluated in §13.2.2's order.
//!
//! weft's representations are content-addressed, so they have strong validators and no
//! modification dates: an `If-Range` date never matches (the full representation is sent), and
//! `If-Unmodified-Since` / `If-Modified-Since` are ignored as §13.1.3/§13.1.4 allow when there
//! is no `Last-Modified`.

use axum::http::{HeaderMap, header};

/// What the preconditions decide before the answer is built.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Precondition {
    /// Go on; `honour_range` says whether a `Range` header is to be read at all.
    Proceed { honour_range: bool },
    /// `If-None-Match` matched: 304.
    NotModified,
    /// `If-Match` did not: 412.
    Failed,
}

/// Evaluates `If-Match` (strong comparison), then `If-None-Match` (weak), then `If-Range`
/// (strong) against `etag` (quoted, as sent in `ETag`); `range_etag` is the validator a
/// `Range` applies to (the content's, also for a proof of a range of it).
pub(crate) fn evaluate(headers: &HeaderMap, etag: &str, range_etag: &str) -> Precondition {
    if let Some(value) = header_text(headers, header::IF_MATCH)
        && !list_matches(&value, etag, false)
    {
        return Precondition::Failed;
    }
    if let Some(value) = header_text(headers, header::IF_NONE_MATCH)
        && list_matches(&value, etag, true)
    {
        return Precondition::NotModified;
    }
    let honour_range = match header_text(headers, header::IF_RANGE) {
        None => true,
        // An entity tag matches strongly; a weak one or a date never does here (§13.1.5).
        Some(value) => value.trim() == range_etag,
    };
    Precondition::Proceed { honour_range }
}

/// All values of a header joined as one list; `Some("")`-like garbage for unreadable bytes, so
/// an unreadable `If-Match` fails rather than being ignored.
fn header_text(headers: &HeaderMap, name: header::HeaderName) -> Option<String> {
    let mut values = headers.get_all(name).iter().peekable();
    values.peek()?;
    Some(
        values
            .map(|value| value.to_str().unwrap_or("\u{0}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// Whether a `#entity-tag` list (or `*`) matches `etag`; `weak` allows `W/` tags (§8.8.3.2).
fn list_matches(list: &str, etag: &str, weak: bool) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag == etag || (weak && tag.strip_prefix("W/") == Some(etag)))
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn check(pairs: &[(header::HeaderName, &str)], expected: Precondition) {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(name.clone(), HeaderValue::from_str(value).expect("value"));
        }
        assert_eq!(evaluate(&headers, "\"a\"", "\"a\""), expected, "{pairs:?}");
    }

    #[test]
    fn preconditions_follow_rfc_9110() {
        use Precondition::{Failed, NotModified, Proceed};
        let range = Proceed { honour_range: true };
        let whole = Proceed {
            honour_range: false,
        };
        check(&[], range);
        check(
            &[(header::IF_MATCH, "\"a\"")],
            Proceed { honour_range: true },
        );
        check(&[(header::IF_MATCH, "*")], Proceed { honour_range: true });
        check(
            &[(header::IF_MATCH, "\"b\", \"a\"")],
            Proceed { honour_range: true },
        );
        check(&[(header::IF_MATCH, "\"other\"")], Failed);
        check(&[(header::IF_MATCH, "W/\"a\"")], Failed);
        check(&[(header::IF_NONE_MATCH, "W/\"a\"")], NotModified);
        check(
            &[(header::IF_NONE_MATCH, "\"b\"")],
            Proceed { honour_range: true },
        );
        check(
            &[
                (header::IF_MATCH, "\"b\""),
                (header::IF_NONE_MATCH, "\"a\""),
            ],
            Failed,
        );
        check(
            &[(header::IF_RANGE, "\"a\"")],
            Proceed { honour_range: true },
        );
        check(&[(header::IF_RANGE, "\"other\"")], whole);
        check(
            &[(header::IF_RANGE, "W/\"a\"")],
            Proceed {
                honour_range: false,
            },
        );
        check(
            &[(header::IF_RANGE, "Tue, 15 Nov 1994 08:12:31 GMT")],
            Proceed {
                honour_range: false,
            },
        );
    }
}
