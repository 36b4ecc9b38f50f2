//! The operator's revocation journey through the CLI (issue #10 finding 3): remove a
//! Membership, rotate a key, deactivate an Agent; each ends the Agent's session at once.

use crate::support::{TestServer, enrol, weft};

fn ok(outcome: (bool, String, String)) -> String {
    assert!(
        outcome.0,
        "command failed:\nstdout: {}\nstderr: {}",
        outcome.1, outcome.2
    );
    outcome.1
}

/// The command fails and says `code`.
fn refused(outcome: (bool, String, String), code: &str) {
    assert!(!outcome.0, "expected a refusal: {}", outcome.1);
    assert!(
        outcome.2.contains(code) || outcome.1.contains(code),
        "expected {code}:\nstdout: {}\nstderr: {}",
        outcome.1,
        outcome.2
    );
}

#[test]
fn the_operator_removes_rotates_and_deactivates_through_the_cli() {
    let root = tempfile::tempdir().expect("tempdir");
    let server = TestServer::start(&root.path().join("data"), &[]);
    let url = server.url();
    let home = root.path().join("home");
    enrol(&server, &home, "g1", "agent-1", "worker");
    let token_file = server.data_dir.join("admin.token");
    let token_file = token_file.to_str().expect("utf-8");
    let admin = |args: &[&str]| {
        let mut all = vec!["admin", "--admin-token-file", token_file];
        all.extend_from_slice(args);
        weft(&home, &url, &all)
    };
    ok(weft(&home, &url, &["ls"]));

    let removed = ok(admin(&["member", "remove", "g1", "agent-1"]));
    assert!(removed.contains("membership epoch 2"), "{removed}");
    refused(weft(&home, &url, &["ls"]), "stale_membership");
    refused(
        weft(
            &home,
            &url,
            &["login", "--agent-id", "agent-1", "--group", "g1"],
        ),
        "not_a_member",
    );
    ok(admin(&[
        "member", "set", "g1", "agent-1", "--role", "worker",
    ]));
    ok(weft(
        &home,
        &url,
        &["login", "--agent-id", "agent-1", "--group", "g1"],
    ));
    ok(weft(&home, &url, &["ls"]));

    // A new key for the Agent: the old one (still in the weft home) is refused from now on.
    let new_key = ed25519_dalek::SigningKey::from_bytes(&[9; 32]);
    let public = {
        use base64::Engine as _;
        weft_api::dsse::BASE64.encode(new_key.verifying_key().as_bytes())
    };
    let rotated = ok(admin(&[
        "agent",
        "rotate-key",
        "agent-1",
        "--public-key",
        &public,
    ]));
    assert!(rotated.contains("ed25519:"), "{rotated}");
    refused(weft(&home, &url, &["ls"]), "unauthorized");
    refused(
        weft(
            &home,
            &url,
            &["login", "--agent-id", "agent-1", "--group", "g1"],
        ),
        "key_retired",
    );

    let deactivated = ok(admin(&["agent", "deactivate", "agent-1"]));
    assert!(deactivated.contains("told g1"), "{deactivated}");
    refused(
        weft(
            &home,
            &url,
            &["login", "--agent-id", "agent-1", "--group", "g1"],
        ),
        "agent_deactivated",
    );
    refused(
        admin(&["member", "set", "g1", "agent-1", "--role", "worker"]),
        "agent_deactivated",
    );
}
