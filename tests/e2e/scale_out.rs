//! Issue #43 with real processes: two `weft serve` over one PostgreSQL database and one
//! Garage bucket, both appending to one Group at once. Every request is answered, and the
//! Group's log in the database is one chain with contiguous sequences: the Group's row lock
//! (`rows::groups::lock`) serialises the two writers, never a process lock. Without
//! PostgreSQL or Garage binaries it passes after saying it skipped (unless `WEFT_POSTGRES` or
//! `WEFT_GARAGE` is set, as `scripts/test` sets them).

use crate::support::{TestServer, admin_client};

/// Agents whose Memberships each server sets, at once.
const PER_SERVER: usize = 24;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_append_to_one_group_as_one_chain() {
    let Some((cluster, garage)) = crate::support::scale_out_engines() else {
        return;
    };
    let index = cluster.new_database();
    let blobs = garage.location(0, "scale-out");
    let credentials = garage
        .credentials_file()
        .to_str()
        .expect("utf-8")
        .to_owned();
    let flags = [
        "--index",
        index.as_str(),
        "--blobs",
        blobs.as_str(),
        "--s3-credentials-file",
        credentials.as_str(),
    ];
    let root = tempfile::tempdir().expect("tempdir");
    let (dir_a, dir_b) = (root.path().join("a"), root.path().join("b"));
    let (log_a, log_b) = (root.path().join("a.log"), root.path().join("b.log"));
    let logs = || {
        format!(
            "server a:\n{}\nserver b:\n{}",
            std::fs::read_to_string(&log_a).unwrap_or_default(),
            std::fs::read_to_string(&log_b).unwrap_or_default()
        )
    };
    let a = TestServer::start_logged(&dir_a, &flags, &log_a);
    // One Authority: the second server signs with the first one's key.
    std::fs::create_dir_all(&dir_b).expect("dir b");
    std::fs::copy(dir_a.join("authority.key"), dir_b.join("authority.key")).expect("key");
    let b = TestServer::start_logged(&dir_b, &flags, &log_b);
    let (admin_a, admin_b) = (admin_client(&a), admin_client(&b));
    let id = |text: String| weft_api::Id::parse("id", &text).expect("valid id");
    admin_a.create_group(&id("g1".into())).await.expect("group");
    for n in 0..2 * PER_SERVER {
        let key = ed25519_dalek::SigningKey::from_bytes(&[u8::try_from(n + 1).expect("n"); 32]);
        let admin = if n % 2 == 0 { &admin_a } else { &admin_b };
        admin
            .register_agent(&id(format!("agent-{n}")), &key.verifying_key(), "1")
            .await
            .expect("agent");
    }
    // Every Membership at once, half through each server: each appends `membership.set`.
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..2 * PER_SERVER {
        let admin = if n % 2 == 0 {
            admin_a.clone()
        } else {
            admin_b.clone()
        };
        tasks.spawn(async move {
            let id = |text: String| weft_api::Id::parse("id", &text).expect("valid id");
            admin
                .set_membership(
                    &id("g1".into()),
                    &id(format!("agent-{n}")),
                    &[weft_api::session::Role::Worker],
                )
                .await
                .map(|_| ())
                .map_err(|error| format!("agent-{n}: {error}"))
        });
    }
    while let Some(outcome) = tasks.join_next().await {
        if let Err(error) = outcome.expect("task") {
            panic!("every Membership is set: {error}\n{}", logs());
        }
    }
    // The log as the database holds it: contiguous from 1, each Event linked to the one before.
    let rows = cluster.psql(
        index.rsplit('/').next().expect("database name"),
        "SELECT sequence, encode(prev_hash, 'hex'), encode(hash, 'hex') \
         FROM events WHERE group_id = 'g1' ORDER BY sequence",
    );
    let events: Vec<(u64, String, String)> = rows
        .lines()
        .filter(|line| !line.is_empty())
        .map(|line| {
            let mut fields = line.split('|');
            let mut next = || fields.next().expect("a field").to_owned();
            (next().parse().expect("a sequence"), next(), next())
        })
        .collect();
    assert_eq!(events.len(), 1 + 2 * PER_SERVER, "{rows}");
    for (at, (sequence, prev_hash, _)) in events.iter().enumerate() {
        assert_eq!(*sequence, at as u64 + 1, "contiguous:\n{rows}");
        if at > 0 {
            assert_eq!(
                prev_hash,
                &events[at - 1].2,
                "one chain at {sequence}:\n{rows}"
            );
        }
    }
    drop((a, b));
}
