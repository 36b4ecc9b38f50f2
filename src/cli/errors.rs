//! How a failed command reads to a person: `error: <cause chain>` on one line and, when the
//! failure is one a user can fix, a `next:` line naming the step (start the server or set
//! `WEFT_SERVER`, run `weft login`, …). Never a backtrace, whatever `RUST_BACKTRACE` says:
//! `main` prints [`explain`] itself instead of returning the error to the runtime.
//!
//! This module only reads errors; the commands decide what went wrong.

use weft_api::ErrorCode;
use weft_api::client::Error as ClientError;

/// The words a failed command prints on stderr before exiting 1.
pub fn explain(error: &anyhow::Error) -> String {
    // `{error:#}` joins the cause chain, but an error that prints its source in its own
    // message (as `reqwest`'s and the client's do) would then say everything twice.
    let mut text = String::from("error: ");
    let mut said = String::new();
    for cause in error.chain() {
        let message = cause.to_string();
        if said.contains(&message) {
            continue;
        }
        if !said.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&message);
        said.push_str(&message);
    }
    if let Some(next) = next_step(error) {
        text.push_str("\nnext: ");
        text.push_str(&next);
    }
    text
}

/// Whether `http` failed because no server answered (nothing was refused): the one test of
/// "the Authority is away", for the next-step hint here and for the offline journal.
pub(super) fn unanswered(error: &ClientError) -> bool {
    matches!(error, ClientError::Http(http) if http.is_connect() || http.is_timeout())
}

/// Marks the failure of a `weft admin` command: its token is the operator's, so a refused one
/// is fixed by the admin token, never by `weft login` (issue #50).
#[derive(Debug)]
pub(super) struct AdminCall;

impl std::fmt::Display for AdminCall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("weft admin")
    }
}

/// The step that fixes the failure, when the failure says which one.
fn next_step(error: &anyhow::Error) -> Option<String> {
    let admin = error.downcast_ref::<AdminCall>().is_some();
    let client = error
        .chain()
        .find_map(|e| e.downcast_ref::<ClientError>())?;
    if admin
        && let ClientError::Api { body, .. } = client
        && matches!(body.code, ErrorCode::Unauthorized | ErrorCode::Forbidden)
    {
        return Some(
            "the server refuses this admin token: pass the one it printed at its first start \
             (--admin-token, or admin.token in its data directory)"
                .to_owned(),
        );
    }
    match client {
        ClientError::Http(http) if unanswered(client) => {
            let tried = http
                .url()
                .map(|url| url.origin().ascii_serialization())
                .unwrap_or_else(|| "the configured address".to_owned());
            Some(format!(
                "no weft server answered at {tried}: start one (`weft serve`) or point WEFT_SERVER (or --server) at it"
            ))
        }
        ClientError::Api { body, .. } => match body.code {
            ErrorCode::StaleSession | ErrorCode::StaleMembership | ErrorCode::Unauthorized => {
                Some("the session is no longer valid: run `weft login` again".to_owned())
            }
            ErrorCode::IntegrityFailure => Some(
                "integrity failure; the server has quarantined it: an operator repairs it (re-upload the same bytes, or `weft fsck` offline)".to_owned(),
            ),
            _ => None,
        },
        ClientError::Integrity { .. } => Some(
            "integrity failure; the server has quarantined it: download again later, or ask the operator to repair it".to_owned(),
        ),
        _ => None,
    }
}

/// A protocol word (an outcome, a role, a reason…) by its wire name; a wrong one is refused
/// with the list of allowed values, taken from the type itself so it cannot drift.
pub(super) fn wire_word<T: serde::de::DeserializeOwned>(
    what: &str,
    text: &str,
) -> anyhow::Result<T> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|error| {
        let message = error.to_string();
        let allowed = message
            .split_once("expected ")
            .map(|(_, allowed)| allowed.replace('`', ""))
            .unwrap_or(message);
        anyhow::anyhow!("{what} {text:?} is not allowed; expected {allowed}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let error = anyhow::anyhow!("connection refused")
            .context("sending request: connection refused")
            .context("download failed");
        assert_eq!(
            explain(&error),
            "error: download failed: sending request: connection refused"
        );
    }

    #[test]
    fn a_wrong_word_lists_the_allowed_ones() {
        let error =
            wire_word::<weft_api::evidence::Outcome>("outcome", "maybe").expect_err("refused");
        assert_eq!(
            error.to_string(),
            "outcome \"maybe\" is not allowed; expected one of pass, fail, inconclusive"
        );
    }
}
