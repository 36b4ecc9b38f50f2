//! Issue #42 with the real binary: `weft serve --blobs s3://…` on a Garage node of its own,
//! a Worker's `weft put` and `weft get` through it, a SIGKILL and a restart, and `weft fsck
//! --blobs s3://…` offline: clean, then, after an object in the bucket was tampered with,
//! reporting the damage. Without a Garage binary it passes after saying it skipped (unless
//! `WEFT_GARAGE` is set, as `scripts/test` sets it).

use object_store::ObjectStoreExt as _;

use crate::support::{TestServer, weft};

fn ok(outcome: (bool, String, String)) -> String {
    assert!(outcome.0, "failed:\n{}\n{}", outcome.1, outcome.2);
    outcome.1
}

fn fsck_on(data: &std::path::Path, blobs: &str, credentials: &str) -> (i32, String) {
    let output = std::process::Command::new(crate::support::WEFT)
        .args(["fsck", "--data-dir"])
        .arg(data)
        .args(["--blobs", blobs, "--s3-credentials-file", credentials])
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("weft runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn a_worker_on_garage_survives_a_crash_and_fsck_checks_the_bucket() {
    let Some(garage) = weft_testkit::Garage::start(1) else {
        assert!(
            !weft_testkit::garage_required(),
            "WEFT_GARAGE is set but no Garage runs"
        );
        eprintln!("skipped: no Garage binary");
        return;
    };
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let home = root.path().join("home");
    let location = garage.location(0, "e2e");
    let credentials = garage
        .credentials_file()
        .to_str()
        .expect("utf-8")
        .to_owned();
    let flags = [
        "--blobs",
        location.as_str(),
        "--s3-credentials-file",
        credentials.as_str(),
    ];
    let server = TestServer::start(&data, &flags);
    let url = server.url();
    crate::support::enrol(&server, &home, "g1", "agent-1", "worker");
    crate::support::leased_work_item(&server, root.path(), "g1", "m1", "w1", &home, "agent-1");
    let input = root.path().join("input.bin");
    let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 256) as u8).collect();
    std::fs::write(&input, &bytes).expect("input");
    let id = ok(weft(
        &home,
        &url,
        &[
            "put",
            input.to_str().expect("utf-8"),
            "--group",
            "g1",
            "--mission",
            "m1",
            "--work-item",
            "w1",
            "--media-type",
            "application/octet-stream",
            "--tool",
            "model:gpt:5",
            "-q",
        ],
    ))
    .trim()
    .to_owned();
    assert!(id.starts_with("blake3:"), "{id}");
    assert!(
        !data.join("blobs").exists(),
        "no blob on the local disk: they are in the bucket"
    );

    // A crash, a restart on the same bucket: the artifact reads back, verified.
    let addr = server.addr.to_string();
    server.kill();
    let server = TestServer::start_on(&data, &addr, &flags);
    let out = root.path().join("out.bin");
    ok(weft(
        &home,
        &server.url(),
        &["get", &id, "-o", out.to_str().expect("utf-8"), "-q"],
    ));
    assert_eq!(std::fs::read(&out).expect("downloaded"), bytes);
    drop(server);

    let (code, report) = fsck_on(&data, &location, &credentials);
    assert_eq!(code, 0, "{report}");
    assert!(report.contains("checked 1 blobs"), "{report}");

    // A flipped bit in the bucket: fsck reports the damage.
    let hex = &id["blake3:".len()..];
    let bucket = object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(weft_testkit::BUCKET)
        .with_region(weft_testkit::REGION)
        .with_endpoint(garage.nodes[0].endpoint())
        .with_allow_http(true)
        .with_access_key_id(weft_testkit::KEY_ID)
        .with_secret_access_key(weft_testkit::KEY_SECRET)
        .build()
        .expect("an S3 client");
    let key = object_store::path::Path::from(format!("e2e/blobs/blake3/{}/{hex}", &hex[..2]));
    let mut flipped = bytes.clone();
    flipped[12345] ^= 1;
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime
        .block_on(bucket.put(&key, flipped.into()))
        .expect("tampered");
    let (code, report) = fsck_on(&data, &location, &credentials);
    assert_eq!(code, 1, "damage: {report}");
    assert!(report.contains("PROBLEM"), "{report}");
}
