//! `weft put` of a large file: a typo in the manifest fields fails before a byte is sent, and
//! an upload interrupted after some chunks resumes from the server's durable offset when the
//! same command runs again, ending with the right digest.

use crate::support::{TestServer, enrol, files_under, leased_work_item, weft, weft_with};

#[test]
fn an_interrupted_put_resumes_and_a_typo_fails_before_the_upload() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let home = root.path().join("home");
    let server = TestServer::start(&data, &[]);
    let url = server.url();
    enrol(&server, &home, "g1", "agent-1", "worker");
    leased_work_item(&server, root.path(), "g1", "m1", "w1", &home, "agent-1");
    let input = root.path().join("large.bin");
    let bytes: Vec<u8> = (0..1_000_000u32).map(|i| (i * 13 % 251) as u8).collect();
    std::fs::write(&input, &bytes).expect("write input");
    let put = |mission: &str| -> Vec<String> {
        [
            "put",
            input.to_str().expect("utf-8"),
            "--group",
            "g1",
            "--mission",
            mission,
            "--work-item",
            "w1",
            "--media-type",
            "application/octet-stream",
            "--chunk-size",
            "65536",
            "-q",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    };
    fn args(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }

    // A malformed Mission id and a well-formed one the WorkItem does not belong to.
    for (mission, says) in [("m 1", "mission"), ("m2", "belongs to Mission m1")] {
        let outcome = weft(&home, &url, &args(&put(mission)));
        assert!(!outcome.0, "{outcome:?}");
        assert!(outcome.2.contains(says), "{mission}: {}", outcome.2);
        assert!(
            files_under(&data.join("uploads")).is_empty(),
            "no session started"
        );
        assert!(!home.join("uploads.json").exists(), "nothing to resume");
    }

    // Interrupted after 5 chunks of 64 KiB: the server holds exactly those, durably.
    let stopped = weft_with(
        &home,
        &url,
        &args(&put("m1")),
        &[("WEFT_TEST_STOP_AFTER_CHUNKS", "5")],
    );
    assert!(
        !stopped.0 && stopped.2.contains("stopped after 5 chunks"),
        "{stopped:?}"
    );
    let staged = files_under(&data.join("uploads"));
    assert_eq!(staged.len(), 1, "{staged:?}");
    assert_eq!(
        std::fs::metadata(&staged[0]).expect("staged").len(),
        5 * 65536
    );

    // The same command again resumes at the durable offset and publishes the right bytes.
    let resumed = weft(&home, &url, &args(&put("m1")));
    assert!(resumed.0, "{resumed:?}");
    assert!(resumed.2.contains("resuming upload"), "{}", resumed.2);
    assert!(
        resumed.2.contains(&format!("at byte {}", 5 * 65536)),
        "{}",
        resumed.2
    );
    let digest = format!("blake3:{}", blake3::hash(&bytes).to_hex());
    assert_eq!(resumed.1.trim(), digest);
    assert!(
        files_under(&data.join("uploads")).is_empty(),
        "the session is finished"
    );
    let remembered: serde_json::Value =
        serde_json::from_slice(&std::fs::read(home.join("uploads.json")).expect("uploads.json"))
            .expect("json");
    assert_eq!(
        remembered["uploads"],
        serde_json::json!({}),
        "forgotten once finished"
    );
    let output = root.path().join("out.bin");
    let got = weft(
        &home,
        &url,
        &["get", &digest, "-o", output.to_str().expect("utf-8"), "-q"],
    );
    assert!(got.0, "{got:?}");
    assert_eq!(std::fs::read(&output).expect("downloaded"), bytes);
}
