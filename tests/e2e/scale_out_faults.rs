//! Issue #43's faults with real processes, over one PostgreSQL cluster of their own and one
//! Garage node: one of three servers SIGKILLed under load (clients retry elsewhere with the
//! same `Idempotency-Key` and get the original answers; nothing acknowledged is lost, nothing
//! runs twice); PostgreSQL restarted under load (writers answer problem+json 503 or 408,
//! never a 500, and resume); the database frozen as a partition would cut it off (`/healthz`
//! says so, no write is acknowledged, and the retry after it runs once). Each load is
//! Membership changes through the operator's route: each appends one `membership.set` and
//! moves the Membership's epoch, so a second execution would show in the log. Without
//! PostgreSQL or Garage binaries these pass after saying they skipped (unless `WEFT_POSTGRES`
//! or `WEFT_GARAGE` is set, as `scripts/test` sets them).

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::TestServer;

/// `n` servers over database `index` and a bucket prefix of `garage`, one Authority (the
/// first server's key) and one operator token, each logging to `root/<i>.log`.
fn servers(
    root: &Path,
    index: &str,
    garage: &weft_testkit::Garage,
    n: usize,
) -> (Vec<TestServer>, String) {
    let blobs = garage.location(0, "faults");
    let credentials = garage
        .credentials_file()
        .to_str()
        .expect("utf-8")
        .to_owned();
    let flags = [
        "--index",
        index,
        "--blobs",
        blobs.as_str(),
        "--s3-credentials-file",
        credentials.as_str(),
        "--request-timeout-secs",
        "4",
    ];
    let first_dir = root.join("0");
    let mut started = vec![TestServer::start_logged(
        &first_dir,
        &flags,
        &root.join("0.log"),
    )];
    for i in 1..n {
        let dir = root.join(i.to_string());
        std::fs::create_dir_all(&dir).expect("dir");
        for file in ["authority.key", "admin.token"] {
            std::fs::copy(first_dir.join(file), dir.join(file)).expect("shared secret");
        }
        started.push(TestServer::start_logged(
            &dir,
            &flags,
            &root.join(format!("{i}.log")),
        ));
    }
    let token = std::fs::read_to_string(first_dir.join("admin.token")).expect("admin.token");
    (started, token.trim().to_owned())
}

/// The servers' logs, for a failure's message.
fn logs(root: &Path, n: usize) -> String {
    (0..n)
        .map(|i| {
            let log = std::fs::read_to_string(root.join(format!("{i}.log"))).unwrap_or_default();
            format!("server {i}:\n{log}\n")
        })
        .collect()
}

/// Creates Group `g1` and registers `agents` Agents, through `server`.
async fn group_with_agents(server: &str, token: &str, agents: usize) {
    let admin = weft_api::client::Client::new(server.to_owned(), Some(token.to_owned()));
    let id = |text: String| weft_api::Id::parse("id", &text).expect("valid id");
    admin.create_group(&id("g1".into())).await.expect("group");
    for n in 0..agents {
        let key = ed25519_dalek::SigningKey::from_bytes(&[u8::try_from(n + 1).expect("n"); 32]);
        admin
            .register_agent(&id(format!("agent-{n}")), &key.verifying_key(), "1")
            .await
            .expect("agent");
    }
}

/// One attempt at agent `n`'s Membership with key `k-n` on `server`: the status and body, or
/// `None` when no answer came (the server is gone, or the client's own deadline passed).
async fn attempt(
    client: &reqwest::Client,
    server: &str,
    token: &str,
    n: usize,
) -> Option<(u16, String, Option<String>)> {
    let response = client
        .put(format!("{server}/v1/admin/groups/g1/members/agent-{n}"))
        .bearer_auth(token)
        .header("Idempotency-Key", format!("k-{n}"))
        .json(&serde_json::json!({ "roles": ["worker"] }))
        .timeout(Duration::from_secs(8))
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    let kind = response
        .headers()
        .get("content-type")
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned);
    let body = response.text().await.ok()?;
    Some((status, body, kind))
}

/// Sends agent `n`'s Membership until a 2xx, trying `servers` in turn from `first`: any other
/// answer must be problem+json 503 or 408 (a lost server or database), else `Err`.
async fn until_done(
    client: reqwest::Client,
    servers: Vec<String>,
    token: String,
    n: usize,
    first: usize,
) -> Result<(u16, String), String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut at = first;
    while Instant::now() < deadline {
        let server = &servers[at % servers.len()];
        match attempt(&client, server, &token, n).await {
            Some((status, body, _)) if (200..300).contains(&status) => return Ok((status, body)),
            Some((status, body, kind)) => {
                let problem = kind.as_deref() == Some("application/problem+json");
                if !(problem && (status == 503 || status == 408)) {
                    return Err(format!("agent-{n} on {server}: {status} {kind:?} {body}"));
                }
            }
            None => {}
        }
        at += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("agent-{n}: no answer within 60 s"))
}

/// The `membership.set` Events of Group `g1` per Agent, and whether the log is one chain
/// with contiguous sequences from 1.
fn log_of_g1(cluster: &weft_testkit::Postgres, database: &str) -> (Vec<String>, bool) {
    let rows = cluster.psql(
        database,
        "SELECT sequence, type, encode(prev_hash, 'hex'), encode(hash, 'hex'), \
         payload::json->>'agentId' FROM events WHERE group_id = 'g1' ORDER BY sequence",
    );
    let mut members = Vec::new();
    let mut chained = true;
    let mut previous_hash = String::new();
    for (at, line) in rows.lines().filter(|line| !line.is_empty()).enumerate() {
        let fields: Vec<&str> = line.split('|').collect();
        chained &= fields[0] == (at + 1).to_string() && (at == 0 || fields[2] == previous_hash);
        previous_hash = fields[3].to_owned();
        if fields[1] == "membership.set" {
            members.push(fields[4].to_owned());
        }
    }
    members.sort();
    (members, chained)
}

fn expected_members(agents: usize) -> Vec<String> {
    let mut members: Vec<String> = (0..agents).map(|n| format!("agent-{n}")).collect();
    members.sort();
    members
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_three_servers_killed_under_load_loses_nothing_and_runs_nothing_twice() {
    let Some((cluster, garage)) = crate::support::scale_out_engines() else {
        return;
    };
    const AGENTS: usize = 60;
    let root = tempfile::tempdir().expect("tempdir");
    let index = cluster.create_database("killed");
    let (mut started, token) = servers(root.path(), &index, &garage, 3);
    let urls: Vec<String> = started.iter().map(TestServer::url).collect();
    group_with_agents(&urls[0], &token, AGENTS).await;
    let client = reqwest::Client::new();
    let answered = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..AGENTS {
        let (client, token, answered) = (client.clone(), token.clone(), Arc::clone(&answered));
        let urls = urls.clone();
        tasks.spawn(async move {
            let first = until_done(client, urls, token, n, n % 3).await;
            answered.fetch_add(1, Ordering::Relaxed);
            (n, first)
        });
    }
    // Server 2 dies mid-load, by SIGKILL: what it committed stays, what it had not is retried.
    while answered.load(Ordering::Relaxed) < AGENTS / 6 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    started.pop().expect("server 2").kill();
    let mut first_answers = vec![(0u16, String::new()); AGENTS];
    while let Some(done) = tasks.join_next().await {
        let (n, first) = done.expect("task");
        match first {
            Ok(answer) => first_answers[n] = answer,
            Err(error) => panic!("{error}\n{}", logs(root.path(), 3)),
        }
    }
    // The same key on a surviving server: the original answer, byte for byte.
    for (n, (status, body)) in first_answers.iter().enumerate() {
        let again = attempt(&client, &urls[n % 2], &token, n)
            .await
            .expect("an answer");
        assert_eq!((again.0, &again.1), (*status, body), "agent-{n}'s replay");
    }
    let (members, chained) = log_of_g1(&cluster, "killed");
    assert_eq!(
        members,
        expected_members(AGENTS),
        "each Membership set once"
    );
    assert!(chained, "one chain, contiguous");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_restarted_under_load_answers_503_and_resumes() {
    let Some((mut cluster, garage)) = crate::support::scale_out_engines() else {
        return;
    };
    const AGENTS: usize = 40;
    let root = tempfile::tempdir().expect("tempdir");
    let index = cluster.create_database("restarted");
    let (started, token) = servers(root.path(), &index, &garage, 2);
    let urls: Vec<String> = started.iter().map(TestServer::url).collect();
    group_with_agents(&urls[0], &token, AGENTS).await;
    let client = reqwest::Client::new();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..AGENTS {
        let (client, token, urls) = (client.clone(), token.clone(), urls.clone());
        tasks.spawn(async move {
            // Spread over two seconds, across the restart.
            tokio::time::sleep(Duration::from_millis(50 * n as u64)).await;
            until_done(client, urls, token, n, n % 2).await
        });
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    cluster.stop();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let restarted = Instant::now();
    cluster.start();
    while let Some(done) = tasks.join_next().await {
        if let Err(error) = done.expect("task") {
            panic!("{error}\n{}", logs(root.path(), 2));
        }
    }
    let resumed = restarted.elapsed();
    assert!(
        resumed < Duration::from_secs(30),
        "resumed after {resumed:?}"
    );
    let (members, chained) = log_of_g1(&cluster, "restarted");
    assert_eq!(
        members,
        expected_members(AGENTS),
        "each Membership set once"
    );
    assert!(chained, "one chain, contiguous");
    // Each server's probe hears the database again (a pooled connection that died with the
    // old server fails one read and is dropped): `/healthz` says 200 again within a bound.
    for url in &urls {
        let back = Instant::now();
        loop {
            let health = client.get(format!("{url}/healthz")).send().await;
            if health.is_ok_and(|health| health.status() == 200) {
                break;
            }
            assert!(
                back.elapsed() < Duration::from_secs(15),
                "{url} never healthy again"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_cut_off_from_its_database_says_so_and_acknowledges_nothing() {
    let Some((cluster, garage)) = crate::support::scale_out_engines() else {
        return;
    };
    let root = tempfile::tempdir().expect("tempdir");
    let index = cluster.create_database("partitioned");
    let (started, token) = servers(root.path(), &index, &garage, 1);
    let url = started[0].url();
    group_with_agents(&url, &token, 1).await;
    let client = reqwest::Client::new();
    let health = |client: reqwest::Client, url: String| async move {
        client
            .get(format!("{url}/healthz"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .ok()
            .map(|response| response.status().as_u16())
    };
    assert_eq!(health(client.clone(), url.clone()).await, Some(200));

    cluster.pause();
    let cut_off = Instant::now();
    let mut said = None;
    while cut_off.elapsed() < Duration::from_secs(15) {
        if health(client.clone(), url.clone()).await == Some(503) {
            said = Some(cut_off.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let write = attempt(&client, &url, &token, 0).await;
    cluster.resume();
    let said = said.unwrap_or_else(|| panic!("/healthz never said 503\n{}", logs(root.path(), 1)));
    assert!(said < Duration::from_secs(10), "said after {said:?}");
    if let Some((status, body, _)) = &write {
        assert!(
            !(200..300).contains(status),
            "acknowledged while cut off: {body}"
        );
    }

    let back = Instant::now();
    while health(client.clone(), url.clone()).await != Some(200) {
        assert!(
            back.elapsed() < Duration::from_secs(15),
            "/healthz never said 200 again"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until_done(client.clone(), vec![url.clone()], token.clone(), 0, 0)
        .await
        .unwrap_or_else(|error| panic!("{error}\n{}", logs(root.path(), 1)));
    let (members, chained) = log_of_g1(&cluster, "partitioned");
    assert_eq!(members, expected_members(1), "set once");
    assert!(chained);
}
