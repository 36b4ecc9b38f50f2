//! `weft migrate` (issue #43) with the real binary: a single-node store (SQLite, local disk)
//! with a small and a large artifact is copied into PostgreSQL and Garage; the source is
//! left as it was; `weft fsck` passes on the copy; a server over the copy serves both
//! artifacts' bytes to the session the single node had issued; a second migration into the
//! same database is refused. Without PostgreSQL or Garage binaries it passes after saying it
//! skipped (unless `WEFT_POSTGRES` or `WEFT_GARAGE` is set, as `scripts/test` sets them).

use std::path::Path;

use crate::support::*;

/// BLAKE3 of every file under `dir`, by path: what "left as it was" compares.
fn contents(dir: &Path) -> Vec<(std::path::PathBuf, String)> {
    files_under(dir)
        .into_iter()
        .filter(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            // SQLite's shared-memory index and the process lock are not the store.
            !name.ends_with("-shm") && !name.ends_with(".lock")
        })
        .map(|path| {
            let bytes = std::fs::read(&path).unwrap_or_default();
            (path, blake3::hash(&bytes).to_hex().to_string())
        })
        .collect()
}

#[test]
fn a_single_node_store_migrates_to_postgresql_and_garage_and_serves_the_same_bytes() {
    let Some((cluster, garage)) = crate::support::scale_out_engines() else {
        return;
    };
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("single");
    let server = TestServer::start(&data, &[]);
    let url = server.url();
    let worker = root.path().join("worker");
    enrol(&server, &worker, "g1", "agent-1", "worker");
    leased_work_item(&server, root.path(), "g1", "m1", "w1", &worker, "agent-1");
    let small = b"a small report".to_vec();
    let large: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
    let mut ids = Vec::new();
    for (name, bytes) in [("small.txt", &small), ("large.bin", &large)] {
        let file = root.path().join(name);
        std::fs::write(&file, bytes).expect("write");
        let put = weft(
            &worker,
            &url,
            &[
                "put",
                file.to_str().expect("utf-8"),
                "--group",
                "g1",
                "--mission",
                "m1",
                "--work-item",
                "w1",
                "--media-type",
                "application/octet-stream",
                "-q",
            ],
        );
        assert!(put.0, "{put:?}");
        ids.push(weft_api::digest::Hasher::digest(bytes).blake3);
    }
    server.interrupt();
    let before = contents(&data);

    let index = cluster.create_database("migrated");
    let blobs = garage.location(0, "migrated");
    let credentials = garage
        .credentials_file()
        .to_str()
        .expect("utf-8")
        .to_owned();
    let engines = [
        "--index",
        index.as_str(),
        "--blobs",
        blobs.as_str(),
        "--s3-credentials-file",
        credentials.as_str(),
    ];
    let from = ["migrate", "--from", data.to_str().expect("utf-8")];
    let migrated = weft(&worker, &url, &[&from[..], &engines[..]].concat());
    assert!(migrated.0, "{migrated:?}");
    assert!(migrated.1.contains("no problem"), "{migrated:?}");
    assert_eq!(contents(&data), before, "the source is left as it was");

    let fsck = weft(
        &worker,
        &url,
        &[
            &["fsck", "--data-dir", data.to_str().expect("utf-8")][..],
            &engines[..],
        ]
        .concat(),
    );
    assert!(fsck.0, "fsck of the copy: {fsck:?}");

    let again = weft(&worker, &url, &[&from[..], &engines[..]].concat());
    assert!(!again.0, "a second migration into one database: {again:?}");
    assert!(again.2.contains("not empty"), "{again:?}");

    // A server over the copy, holding the single node's keys, serves the same bytes to the
    // session the single node issued.
    let scaled = root.path().join("scaled");
    std::fs::create_dir_all(&scaled).expect("dir");
    for file in ["authority.key", "admin.token"] {
        std::fs::copy(data.join(file), scaled.join(file)).expect("key");
    }
    let server = TestServer::start(&scaled, &engines);
    let session: serde_json::Value =
        serde_json::from_slice(&std::fs::read(worker.join("session.json")).expect("session"))
            .expect("session json");
    let token = session["token"].as_str().expect("token");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    for (id, bytes) in ids.iter().zip([&small, &large]) {
        let body = runtime.block_on(async {
            let response = reqwest::Client::new()
                .get(format!("{}/v1/artifacts/{id}/content", server.url()))
                .bearer_auth(token)
                .send()
                .await
                .expect("an answer");
            assert_eq!(response.status(), 200, "{id}");
            response.bytes().await.expect("body")
        });
        assert_eq!(body.as_ref(), bytes.as_slice(), "{id}");
    }
}
