//! The auditor's page in a real headless browser (Debian's Chromium): the graph shows the
//! expected nodes, a node link leads to that artifact's page, and a screenshot is saved.

use std::io::Write as _;
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
/// A browser that exits with a failure is run again (twice at most, each failure printed
/// with its status): one of the suite's ~30 launches once died under CI's load without a
/// reproducible cause, and what each test asserts is about the page, not the launcher.
fn browse(profile: &Path, extra: &[&str], url: &str) -> String {
    let mut failures = Vec::new();
    for attempt in 1..=3 {
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
            .arg(format!("--user-data-dir={}-{attempt}", profile.display()))
            .args(extra)
            .arg(url)
            .output()
            .expect("chromium runs (scripts/test installs Debian's chromium)");
        if output.status.success() {
            return String::from_utf8_lossy(&output.stdout).into_owned();
        }
        let failure = format!(
            "attempt {attempt} ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        // Straight to the process's stderr: the test harness does not capture it, so a
        // launch that failed shows in CI's log even when a later one passes.
        let _ = writeln!(std::io::stderr(), "chromium failed on {url}, {failure}");
        failures.push(failure);
    }
    panic!("chromium failed three times: {}", failures.join("\n"));
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

/// A running server with a WorkItem `w-analyse` of Mission `m1` in Group `g1` and three
/// artifacts derived in a chain (input ← report ← summary), and a session token of `w1`.
struct Scene {
    root: tempfile::TempDir,
    server: TestServer,
    input: ArtifactId,
    report: ArtifactId,
    summary: ArtifactId,
    /// The same-origin front the browser signs in through (`sign_in.rs`).
    front: String,
    /// `w1`'s session token.
    token: String,
}

impl Scene {
    async fn new() -> Self {
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
        let dir = root.path();
        let input = publish(&worker, &key, &lease, b"{\"raw\":1}", &[], dir).await;
        let report = publish(&worker, &key, &lease, b"{\"report\":1}", &[input], dir).await;
        let summary = publish(&worker, &key, &lease, b"{\"summary\":1}", &[report], dir).await;
        let front = crate::sign_in::start(server.url(), token.clone()).await;
        Self {
            root,
            server,
            front,
            token,
            input,
            report,
            summary,
        }
    }

    /// A page that signs in with the session token and goes on to `next`.
    ///
    /// Signing in is a POSTed form (DESIGN §8) from the console's own origin (issue #40:
    /// a cross-site post is refused): a same-origin front serves a page that submits it, as a
    /// browser user would from GET /ui/login; the sign-in page then lands on `next`.
    fn page(&self, next: &str) -> String {
        let mut url = reqwest::Url::parse(&format!("{}/sign-in", self.front)).expect("url");
        url.query_pairs_mut().append_pair("next", next);
        url.to_string()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_auditor_page_draws_provenance_and_links_nodes() {
    let scene = Scene::new().await;
    let (root, server) = (&scene.root, &scene.server);
    let (input, report, summary) = (scene.input, scene.report, scene.summary);
    let page = |next: &str| scene.page(next);
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
            dom.contains(&format!(r#"data-node="{node}""#)),
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
    assert!(followed.contains(&format!(r#"data-node="{input}""#)));
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

/// Where the screenshots of each page kind are kept: `$CARGO_TARGET_DIR/ui-screenshots/`
/// (or `target/ui-screenshots/` beside this test binary).
fn screenshot_dir() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            // target/debug/deps/e2e-…: three levels up is the target directory.
            std::env::current_exe()
                .ok()
                .and_then(|exe| Some(exe.parent()?.parent()?.parent()?.to_path_buf()))
        })
        .unwrap_or_else(|| std::path::PathBuf::from("target"));
    let dir = target.join("ui-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// axe-core, fetched by `scripts/test` into the cache (`npm pack axe-core@4`), or `WEFT_AXE`.
fn axe_source() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("WEFT_AXE")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(std::path::PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
            Some(cache.join("weft-axe/axe.min.js"))
        })?;
    path.is_file().then_some(path)
}

/// WCAG 2 relative luminance of `#rrggbb`.
fn luminance(hex: &str) -> f64 {
    let channel = |at: usize| {
        let value = u8::from_str_radix(&hex[at..at + 2], 16).expect("hex colour") as f64 / 255.0;
        if value <= 0.03928 {
            value / 12.92
        } else {
            ((value + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * channel(1) + 0.7152 * channel(3) + 0.0722 * channel(5)
}

fn contrast(foreground: &str, background: &str) -> f64 {
    let (a, b) = (luminance(foreground), luminance(background));
    (a.max(b) + 0.05) / (a.min(b) + 0.05)
}

/// The in-page check a test-only copy of a page runs (never served by weft): axe-core's WCAG
/// 2 A/AA rules, and every link, button and field reachable by Tab (a tab index ≥ 0, shown,
/// not disabled). The answer goes into `<pre id="audit">` for `--dump-dom` to carry out.
const AUDIT: &str = r#"
window.addEventListener('load', () => {
  const focusable = [...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, summary')];
  const unreachable = focusable.filter(el => el.tabIndex < 0 || el.disabled || el.getClientRects().length === 0).map(el => el.outerHTML.slice(0, 120));
  axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa'] } }).then(result => {
    const out = document.createElement('pre');
    out.id = 'audit';
    out.textContent = JSON.stringify({
      focusable: focusable.length,
      unreachable,
      violations: result.violations.map(v => ({ id: v.id, impact: v.impact, nodes: v.nodes.map(n => n.html.slice(0, 160)) })),
    });
    document.body.appendChild(out);
  });
});
"#;

/// Every page kind, signed in through the form: a screenshot of each, no script served,
/// every link and button reachable by Tab with a visible focus style, and axe-core's WCAG
/// A/AA rules (contrast among them) passing in the browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_console_page_is_keyboard_reachable_and_passes_axe() {
    let scene = Scene::new().await;
    let summary = scene.summary;
    let shots = screenshot_dir();
    let axe = axe_source();
    if axe.is_none() {
        eprintln!("axe-core is not in the cache (scripts/test fetches it): skipping the axe run");
    }
    let absent = format!("blake3:{}", "0".repeat(64));
    let pages = [
        ("home", "/ui/".to_owned(), "What you can see"),
        (
            "search",
            "/ui/search?q=nothing-here".to_owned(),
            "Nothing visible matches",
        ),
        (
            "artifact",
            format!("/ui/artifacts/{summary}?direction=both&kinds=all"),
            "Verify now",
        ),
        (
            "workitem",
            "/ui/workitems/w-analyse".to_owned(),
            "w-analyse",
        ),
        (
            "mission",
            "/ui/missions/m1".to_owned(),
            r#"data-node="w-analyse""#,
        ),
        ("events", "/ui/groups/g1/events".to_owned(), "prevHash"),
        ("agent", "/ui/search?q=w1".to_owned(), "What it did in g1"),
        ("not-found", format!("/ui/artifacts/{absent}"), "not_found"),
    ];
    // The stylesheet: a visible focus outline on everything focusable, and AA contrast for
    // each text colour on its background (checked here even when axe is absent).
    let style = reqwest::get(format!("{}/ui/style.css", scene.server.url()))
        .await
        .expect("style")
        .text()
        .await
        .expect("css");
    assert!(
        style.contains("a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, summary:focus-visible")
            && style.contains("outline: 3px solid"),
        "a visible focus style"
    );
    for (foreground, background) in [
        ("#111111", "#ffffff"),
        ("#1d4ed8", "#ffffff"),
        ("#ffffff", "#1e293b"),
        ("#ffffff", "#1d4ed8"),
        ("#ffffff", "#334155"),
        ("#b91c1c", "#ffffff"),
        ("#166534", "#ffffff"),
        ("#4b5563", "#ffffff"),
        ("#111111", "#f1f5f9"),
        ("#111111", "#fde68a"),
        ("#374151", "#e0f2fe"),
    ] {
        assert!(style.contains(foreground) || foreground == "#374151");
        let ratio = contrast(foreground, background);
        assert!(ratio >= 4.5, "{foreground} on {background}: {ratio:.2}");
    }
    for (index, (name, uri, expected)) in pages.iter().enumerate() {
        let profile = scene.root.path().join(format!("profile-page-{index}"));
        let dom = browse(&profile, &["--dump-dom"], &scene.page(uri));
        assert!(dom.contains(expected), "{name}: {dom}");
        assert!(
            !dom.contains("tabindex=\"-1\""),
            "{name}: nothing taken out of the Tab order"
        );
        let shot = shots.join(format!("{name}.png"));
        browse(
            &scene.root.path().join(format!("profile-shot-{index}")),
            &[
                &format!("--screenshot={}", shot.display()),
                "--window-size=1280,1000",
            ],
            &scene.page(uri),
        );
        assert!(
            std::fs::metadata(&shot)
                .map(|m| m.len() > 1000)
                .unwrap_or(false),
            "{name}: screenshot saved"
        );
        let Some(axe) = &axe else {
            continue;
        };
        // A test-only copy of the page as the browser built it, with axe-core and the audit
        // script added and the stylesheet fetched from the server.
        let dir = scene.root.path().join(format!("audit-{index}"));
        std::fs::create_dir_all(&dir).expect("audit dir");
        std::fs::copy(axe, dir.join("axe.min.js")).expect("axe");
        std::fs::write(dir.join("audit.js"), AUDIT).expect("audit script");
        let copy = dom
            .replace(
                r#"href="/ui/style.css""#,
                &format!(r#"href="{}/ui/style.css""#, scene.server.url()),
            )
            .replace(
                "</head>",
                r#"<script src="axe.min.js"></script><script src="audit.js"></script></head>"#,
            );
        std::fs::write(dir.join("page.html"), copy).expect("copy");
        let audited = browse(
            &scene.root.path().join(format!("profile-audit-{index}")),
            &["--dump-dom", "--allow-file-access-from-files"],
            &format!("file://{}", dir.join("page.html").display()),
        );
        let start = audited
            .find(r#"<pre id="audit">"#)
            .unwrap_or_else(|| panic!("{name}: axe ran: {audited}"))
            + r#"<pre id="audit">"#.len();
        let end = start + audited[start..].find("</pre>").expect("end");
        let text = audited[start..end]
            .replace("&quot;", "\"")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&amp;", "&");
        let audit: serde_json::Value = serde_json::from_str(&text).expect("audit JSON");
        assert!(
            audit["focusable"].as_u64().unwrap_or(0) >= 2,
            "{name}: {audit}"
        );
        assert_eq!(
            audit["unreachable"],
            serde_json::json!([]),
            "{name}: every control reachable by Tab"
        );
        assert_eq!(
            audit["violations"],
            serde_json::json!([]),
            "{name}: axe-core WCAG A/AA"
        );
    }
    println!("console screenshots: {}", shots.display());
}

/// Issue #50: the console's buttons work when a real browser submits them. Chromium, driven
/// through the DevTools protocol (`cdp.rs`), types the session token into the sign-in form
/// and clicks Sign in, clicks Verify now on an artifact, then Sign out: each form goes with
/// the headers the browser itself sets (`Origin`, `Sec-Fetch-Site`, the cookie), under the
/// console's CSP, and each answers its page, never `forbidden`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_buttons_work_in_a_real_browser() {
    let scene = Scene::new().await;
    let (server, token, summary) = (scene.server.url(), scene.token.clone(), scene.summary);
    let profile = scene.root.path().join("profile-clicks");
    tokio::task::spawn_blocking(move || {
        let mut browser = crate::cdp::Browser::launch(&chromium(), &profile);
        browser.open(&format!("{server}/ui/login"));
        browser.eval(&format!(
            "document.getElementById('token').value = {token:?}"
        ));
        browser.click("form[action='/ui/login'] button[type=submit]");
        // The sign-in answer goes on to the console by itself (a meta refresh).
        browser.text_when("signed in", |text| text.contains("w1 in g1"));

        let artifact = format!("{server}/ui/artifacts/{summary}");
        browser.open(&artifact);
        browser.click("#verify-now");
        browser.text_when("Verify now", |text| {
            text.contains("Verified now: the stored bytes hash to their address")
        });

        // The WorkItem's story, with who did each step (issue #50).
        browser.open(&format!("{server}/ui/workitems/w-analyse"));
        let story = browser.text_when("the WorkItem's story", |text| text.contains("History"));
        let history = story.split("History").nth(1).unwrap_or_default();
        assert!(
            history.contains("work.started by "),
            "the story names who started it: {history}"
        );

        browser.click("form[action='/ui/logout'] button[type=submit]");
        let signed_out = browser.text_when("Sign out", |text| !text.is_empty());
        assert!(!signed_out.contains("w1 in g1"), "Sign out: {signed_out}");
        assert!(
            !signed_out.to_lowercase().contains("forbidden"),
            "{signed_out}"
        );
        browser.open(&artifact);
        let after = browser.text_when("the artifact page, signed out", |text| !text.is_empty());
        assert!(
            after.contains("Sign in") && !after.contains(&summary.to_string()[..20]),
            "the cookie is gone: {after} at {}",
            browser.url()
        );
    })
    .await
    .expect("the browser session");
}
