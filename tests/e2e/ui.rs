//! The auditor's page in a real headless browser (Debian's Chromium): the graph shows the
//! expected nodes, a node link leads to that artifact's page, and a screenshot is saved.

use std::path::Path;
use std::process::Command;

use ed25519_dalek::SigningKey;
use weft_api::Id;
use weft_api::client::{Client, CommandSigner};
use weft_api::manifest::{Classification, Content, Execution, Producer, Tool, ToolKind};
use weft_api::session::{Role, SessionGrant};
use weft_api::work::CommandType;
use weft_api::{ArtifactId, Manifest};

use crate::support::{TestServer, admin_client, member_session};

fn id(text: &str) -> Id {
    Id::parse("id", text).expect("valid id")
}

fn chromium() -> String {
    std::env::var("WEFT_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".to_owned())
}

/// Runs headless Chromium with the flags this machine needs (no background networking).
fn browse(profile: &Path, extra: &[&str], url: &str) -> String {
    let output = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            // Lets the sign-in form's POST and its redirect finish before the dump.
            "--virtual-time-budget=10000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("chromium runs (scripts/test installs Debian's chromium)");
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// `w1` takes the live offer of `w-analyse` and starts it; answers its Execution Lease, which
/// every manifest of the WorkItem names (issue #12, LSE-4).
async fn start(worker: &Client, key: &SigningKey, grant: &SessionGrant) -> Id {
    let (agent_id, group_id) = (id("w1"), id("g1"));
    let signer = CommandSigner {
        key,
        agent_id: &agent_id,
        group_id: &group_id,
        session_epoch: grant.session_epoch,
        membership_epoch: grant.membership_epoch,
    };
    let view = worker.work_item(&id("w-analyse")).await.expect("view");
    let offer = view
        .offers
        .iter()
        .find(|offer| offer.status == "live")
        .expect("a live offer");
    let accept = serde_json::json!({"workItemId": "w-analyse", "offerId": offer.offer_id});
    worker
        .command(&signer, CommandType::WorkAcceptOffer, accept, None, None)
        .await
        .expect("accept");
    let start = serde_json::json!({"workItemId": "w-analyse"});
    let started = worker
        .command(&signer, CommandType::WorkStart, start, None, None)
        .await
        .expect("start");
    id(started.state["lease"]["leaseId"].as_str().expect("lease"))
}

async fn publish(
    worker: &Client,
    key: &SigningKey,
    lease: &Id,
    bytes: &[u8],
    sources: &[ArtifactId],
    root: &Path,
) -> ArtifactId {
    let path = root.join(hex::encode(blake3::hash(bytes).as_bytes()));
    std::fs::write(&path, bytes).expect("write");
    let receipt = worker.upload_file(&path, |_| {}).await.expect("upload");
    let manifest = Manifest {
        content: Content {
            blake3: receipt.blake3,
            sha256: receipt.sha256,
            size: receipt.size,
            media_type: "application/json".into(),
            schema: None,
        },
        producer: Producer {
            agent_id: id("w1"),
            agent_card_version: "1".into(),
        },
        mission_id: id("m1"),
        group_id: id("g1"),
        work_item_id: id("w-analyse"),
        execution: Execution {
            lease_id: lease.clone(),
            ownership_epoch: 1,
        },
        sources: sources.to_vec(),
        tools: vec![Tool {
            kind: ToolKind::Model,
            id: "model".into(),
            version: "1".into(),
        }],
        created_at: chrono::Utc::now().fixed_offset(),
        classification: Classification::Internal,
        retrieval_uri: format!(
            "https://weft.example/v1/artifacts/{}/content",
            receipt.blake3
        ),
        annotations: Default::default(),
    };
    worker
        .publish(key, &manifest)
        .await
        .expect("publish")
        .artifact
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auditor_page_draws_provenance_and_links_nodes() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let server = TestServer::start(&data, &[]);
    let admin = admin_client(&server);
    let (key, _) = member_session(&server, &admin, "g1", "w1", Role::Worker, 31).await;
    // A session of its own, whose epochs the worker's Commands quote.
    let grant = Client::new(server.url(), None)
        .open_session(&key, &id("w1"), &id("g1"))
        .await
        .expect("session");
    let token = grant.token.clone();
    let worker = Client::new(server.url(), Some(token.clone()));
    tokio::task::block_in_place(|| {
        crate::support::work_item(&server, root.path(), "g1", "m1", "w-analyse");
        crate::support::offer_to(&server, root.path(), "g1", "w-analyse", "w1");
    });
    let lease = start(&worker, &key, &grant).await;
    let input = publish(&worker, &key, &lease, b"{\"raw\":1}", &[], root.path()).await;
    let report = publish(
        &worker,
        &key,
        &lease,
        b"{\"report\":1}",
        &[input],
        root.path(),
    )
    .await;
    let summary = publish(
        &worker,
        &key,
        &lease,
        b"{\"summary\":1}",
        &[report],
        root.path(),
    )
    .await;

    // Signing in is a POSTed form (DESIGN §8): a local page submits it, as a browser user
    // would from GET /ui/login; the redirect then lands on `next`.
    let page = |next: &str| {
        let file = root.path().join(format!(
            "login-{}.html",
            &blake3::hash(next.as_bytes()).to_hex()[..16]
        ));
        let html = format!(
            r#"<!doctype html><form method="post" action="{}/ui/login"><input name="token" value="{token}"><input name="next" value="{}"></form><script>document.forms[0].submit()</script>"#,
            server.url(),
            next.replace('&', "&amp;").replace('"', "&quot;")
        );
        std::fs::write(&file, html).expect("login page");
        format!("file://{}", file.display())
    };
    let profile = root.path().join("profile");
    let dom = browse(
        &profile,
        &["--dump-dom"],
        &page(&format!("/ui/artifacts/{summary}")),
    );
    assert!(
        dom.contains(&format!(r#"<code id="artifact-id">{summary}</code>"#)),
        "{dom}"
    );
    for node in [summary, report, input] {
        assert!(
            dom.contains(&format!(r#"data-artifact="{node}""#)),
            "node {node} is drawn"
        );
    }
    assert!(
        dom.contains("3 artifacts") && dom.contains("w-analyse"),
        "{dom}"
    );
    // Follow the report node's link.
    let marker = format!(r#"href="/ui/artifacts/{report}"#);
    let start = dom
        .find(&marker)
        .expect("the report node links to its page")
        + r#"href=""#.len();
    let href = dom[start..]
        .split('"')
        .next()
        .expect("href")
        .replace("&amp;", "&");
    let followed = browse(
        &root.path().join("profile-2"),
        &["--dump-dom"],
        &page(&href),
    );
    assert!(
        followed.contains(&format!(r#"<code id="artifact-id">{report}</code>"#)),
        "{followed}"
    );
    assert!(followed.contains(&format!(r#"data-artifact="{input}""#)));
    // A screenshot for the record.
    let shot = root.path().join("auditor-page.png");
    browse(
        &root.path().join("profile-3"),
        &[
            &format!("--screenshot={}", shot.display()),
            "--window-size=1280,900",
        ],
        &page(&format!("/ui/artifacts/{summary}")),
    );
    assert!(
        std::fs::metadata(&shot)
            .map(|m| m.len() > 1000)
            .unwrap_or(false),
        "screenshot saved"
    );
    if let Ok(keep) = std::env::var("WEFT_KEEP_SCREENSHOT") {
        let _ = std::fs::copy(&shot, keep);
    }
    // Without the cookie there is no page.
    let refused = browse(
        &root.path().join("profile-4"),
        &["--dump-dom"],
        &format!("{}/ui/artifacts/{summary}", server.url()),
    );
    assert!(refused.contains("unauthorized"), "{refused}");
}
