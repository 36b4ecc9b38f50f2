//! Issue #47: `weft worker` as real processes against the real server. Two Workers with
//! different capabilities take a Mission of five WorkItems with dependencies to `verified`
//! under `weft mission run`; and the faults: an offer for a capability the Worker lacks
//! (declined `capability`, OFR-9), a Worker killed mid-execution (restart: the lease is given
//! up, the item runs again with a new attempt key and the same effect key, DLV-11), the
//! Authority killed while a Worker runs (OFL-3…5: grace, journal, reconcile), an executor that
//! hangs (stopped at its wall-clock limit, the WorkItem failed, never left `active`), and an
//! executor that tries to read another slot's files or write outside its directory (refused
//! by construction when the Worker runs as root with per-slot uids, SCH-12).
//! Long (over 600 lines): one scenario per fault, all sharing the one `Fleet` harness.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{TestServer, WEFT, enrol, weft};

/// A Worker process, stopped (by its handle) when dropped.
struct WorkerProcess {
    child: Child,
    log: PathBuf,
}

impl WorkerProcess {
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

struct Fleet {
    root: tempfile::TempDir,
    server: TestServer,
    coordinator: PathBuf,
}

impl Fleet {
    fn new() -> Self {
        let root = tempfile::tempdir().expect("tempdir");
        let server = TestServer::start(&root.path().join("data"), &[]);
        let coordinator = root.path().join("coordinator");
        enrol(&server, &coordinator, "g1", "coord-1", "coordinator");
        Self {
            root,
            server,
            coordinator,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.root.path().join(name)
    }

    /// Enrols `agent` as a worker of g1 and writes its `worker.toml` (with `extra` lines and
    /// one executor for `capability` running `script` under `sh -c`).
    fn worker_config(&self, agent: &str, capability: &str, script: &str, extra: &str) -> PathBuf {
        let home = self.path(agent);
        enrol(&self.server, &home, "g1", agent, "worker");
        let config = format!(
            "authority = \"{url}\"\nagent_id = \"{agent}\"\nkey = \"{agent}/agent.key\"\n\
             state_dir = \"{agent}-state\"\nslots = 2\npresence_seconds = 2\n{extra}\n\
             [[group]]\nid = \"g1\"\n\n[[executor]]\ncapability = \"{capability}\"\nversion = \"1\"\n\
             command = [\"sh\", \"-c\", {script:?}]\ntypical_seconds = 1\n",
            url = self.server.url(),
        );
        let path = self.path(&format!("{agent}.toml"));
        std::fs::write(&path, config).expect("worker.toml");
        path
    }

    fn start(&self, config: &Path) -> WorkerProcess {
        let log = config.with_extension("log");
        let child = Command::new(WEFT)
            .args(["worker", "--config"])
            .arg(config)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("weft worker starts");
        WorkerProcess { child, log }
    }

    fn plan(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).expect("plan");
        path
    }

    /// `weft mission run --plan` as the coordinator: (success, stdout, stderr).
    fn run_plan(&self, plan: &Path, timeout: u64) -> (bool, String, String) {
        run_plan(&self.coordinator, &self.server.url(), plan, timeout)
    }

    /// [`Fleet::run_plan`] on a thread of its own, while the test does something else.
    fn run_plan_in_background(
        &self,
        plan: &Path,
        timeout: u64,
    ) -> std::thread::JoinHandle<(bool, String, String)> {
        let (home, url, plan) = (self.coordinator.clone(), self.server.url(), plan.to_owned());
        std::thread::spawn(move || run_plan(&home, &url, &plan, timeout))
    }

    fn work_item(&self, id: &str) -> serde_json::Value {
        self.try_work_item(id)
            .unwrap_or_else(|| panic!("work show {id} failed"))
    }

    /// The WorkItem's view, or `None` while it does not exist yet.
    fn try_work_item(&self, id: &str) -> Option<serde_json::Value> {
        let (ok, out, _) = weft(
            &self.coordinator,
            &self.server.url(),
            &["work", "show", id, "--json"],
        );
        ok.then(|| serde_json::from_str(&out).expect("work show --json"))
    }
}

fn run_plan(home: &Path, url: &str, plan: &Path, timeout: u64) -> (bool, String, String) {
    let plan = plan.to_str().expect("utf-8");
    weft(
        home,
        url,
        &[
            "mission",
            "run",
            "--plan",
            plan,
            "--timeout-secs",
            &timeout.to_string(),
        ],
    )
}

/// Waits until `check` holds, polling; panics with `what` after `limit`.
fn eventually(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let began = Instant::now();
    while !check() {
        assert!(began.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const FIVE: &str = r#"
mission = "m-five"
title = "Fetch, then build, then package"
[[work]]
id = "fetch-a"
capability = "cap.fetch:1"
objective = "Fetch source A"
[[work]]
id = "fetch-b"
capability = "cap.fetch:1"
objective = "Fetch source B"
[[work]]
id = "build-a"
capability = "cap.build:1"
objective = "Build A"
depends_on = ["fetch-a"]
[[work]]
id = "build-b"
capability = "cap.build:1"
objective = "Build B"
depends_on = ["fetch-b"]
[[work]]
id = "package"
capability = "cap.build:1"
objective = "Package both"
depends_on = ["build-a", "build-b"]
"#;

/// SCH-1, SCH-2, SCH-4, OFR-7, EVD-2: two Workers with different capabilities, five WorkItems with
/// dependencies, to `verified`; each output is an Artifact bound to its lease, with Evidence.
#[test]
fn two_workers_take_a_mission_of_five_to_verified() {
    let fleet = Fleet::new();
    let fetcher = fleet.worker_config(
        "fetcher",
        "cap.fetch",
        "cat > /dev/null; echo \"fetched $WEFT_WORK_ITEM\" > outputs/data.txt; echo '{\"progress\": {\"phase\": \"fetched\", \"percent\": 100}}'",
        "",
    );
    let builder = fleet.worker_config(
        "builder",
        "cap.build",
        "cat > /dev/null; echo \"built $WEFT_WORK_ITEM\" > outputs/build.txt; echo '{\"evidence\": {\"criterion\": \"ac-1\", \"method\": \"automated_test\", \"name\": \"make check\", \"version\": \"1\", \"outcome\": \"pass\", \"summary\": \"3 passed\"}}'",
        "",
    );
    let _f = fleet.start(&fetcher);
    let _b = fleet.start(&builder);
    let plan = fleet.plan("five.toml", FIVE);
    let (ok, out, err) = fleet.run_plan(&plan, 120);
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        out.contains("mission m-five approved: 5 WorkItems verified"),
        "{out}"
    );
    for (id, owner) in [
        ("fetch-a", "fetcher"),
        ("build-b", "builder"),
        ("package", "builder"),
    ] {
        let view = fleet.work_item(id);
        assert_eq!(view["state"], "verified", "{id}: {view}");
        assert_eq!(view["owner"]["agentId"], owner, "{id}");
    }
    // The builder's own Evidence line stands for ac-1; the fetcher's exit status does.
    let (ok, out, _) = weft(
        &fleet.coordinator,
        &fleet.server.url(),
        &["evidence", "ls", "--work-item", "package", "--json"],
    );
    assert!(ok);
    assert!(out.contains("make check"), "{out}");
}

/// OFR-8/9: an offer for a capability the Worker lacks is declined `capability`, with the
/// reason recorded on the offer.
#[test]
fn an_offer_for_a_missing_capability_is_declined_capability() {
    let fleet = Fleet::new();
    let config = fleet.worker_config("fetcher", "cap.fetch", "cat > /dev/null", "");
    let _w = fleet.start(&config);
    let url = fleet.server.url();
    let home = &fleet.coordinator;
    assert!(
        weft(
            home,
            &url,
            &[
                "mission",
                "create",
                "m1",
                "--title",
                "t",
                "--compute-seconds",
                "99999",
                "--wall-clock-seconds",
                "99999",
                "--financial",
                "100",
                "--tokens",
                "9999999",
                "--tool-calls",
                "9999",
                "--side-effects",
                "99"
            ]
        )
        .0
    );
    let contract = fleet.path("contract.json");
    std::fs::write(&contract, crate::support::CONTRACT_JSON).expect("contract");
    assert!(
        weft(
            home,
            &url,
            &[
                "work",
                "authorize",
                "wi-x",
                "--mission",
                "m1",
                "--contract",
                contract.to_str().expect("utf-8")
            ]
        )
        .0
    );
    // The fetcher must be known first: its session exists once its log says it started.
    let offered = weft(
        home,
        &url,
        &[
            "work",
            "offer",
            "wi-x",
            "--candidate",
            "fetcher",
            "--expires-in",
            "600",
            "--capability",
            "cap.summarize:1",
            "--policy-rule",
            "e2e",
        ],
    );
    assert!(offered.0, "{offered:?}");
    eventually("the decline", Duration::from_secs(30), || {
        let view = fleet.work_item("wi-x");
        view["offers"][0]["declined"]["fetcher"] == "capability"
    });
}

/// DIS-1 and the Worker killed mid-execution: on restart its new session revokes the old lease (LSE-9),
/// the queue is rebuilt by replay (SCH-2), the orphaned executor is stopped, and the WorkItem
/// resumes the same attempt under the same attempt key (PRG-9) and effect key, so an effect
/// the executor keyed on it happens once (DLV-11).
#[test]
fn a_worker_killed_mid_execution_resumes_without_duplicating_effects() {
    let fleet = Fleet::new();
    let effects = fleet.path("effects.txt");
    let attempts = fleet.path("attempts.txt");
    std::fs::write(&effects, "").expect("effects");
    let script = format!(
        "cat > /dev/null; echo \"$WEFT_ATTEMPT_KEY\" >> {a}; \
         grep -q \"$WEFT_EFFECT_KEY\" {e} || echo \"$WEFT_EFFECT_KEY\" >> {e}; \
         if [ $(wc -l < {a}) -lt 2 ]; then sleep 30; fi; echo done > outputs/out.txt",
        a = attempts.display(),
        e = effects.display()
    );
    let config = fleet.worker_config("w1", "cap.work", &script, "");
    let mut worker = fleet.start(&config);
    let plan = fleet.plan(
        "one.toml",
        "mission = \"m1\"\ntitle = \"t\"\n[[work]]\nid = \"slow\"\ncapability = \"cap.work:1\"\nobjective = \"o\"\n",
    );
    let coordinator = fleet.run_plan_in_background(&plan, 90);
    eventually("the first attempt", Duration::from_secs(60), || {
        std::fs::read_to_string(&attempts).is_ok_and(|t| t.lines().count() == 1)
    });
    // DIS-1: while it runs, its Worker's Presence discloses its schedule to the coordinators.
    let admin = crate::support::admin_client(&fleet.server);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let group = weft_api::Id::parse("group", "g1").expect("id");
    eventually("the disclosed schedule", Duration::from_secs(30), || {
        runtime.block_on(admin.presence(&group)).is_ok_and(|p| {
            p.agents.iter().any(|a| {
                a.agent_id == "w1"
                    && a.schedules
                        .iter()
                        .any(|s| s.work_item_id.as_str() == "slow")
            })
        })
    });
    worker.kill();
    let _worker = fleet.start(&config);
    let (ok, out, err) = coordinator.join().expect("coordinator thread");
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    let attempts = std::fs::read_to_string(&attempts).expect("attempts");
    let keys: Vec<&str> = attempts.lines().collect();
    assert_eq!(keys.len(), 2, "{attempts}");
    // PRG-9: a start after a replaced session resumes the same attempt, under its key.
    assert_eq!(
        keys[0], keys[1],
        "the resumed attempt keeps its attempt key"
    );
    let effects = std::fs::read_to_string(&effects).expect("effects");
    assert_eq!(
        effects.lines().count(),
        1,
        "the keyed effect happened once: {effects}"
    );
    assert_eq!(fleet.work_item("slow")["state"], "verified");
}

/// An executor that hangs is stopped at its wall-clock limit; the WorkItem is failed
/// (`budget`), never left `active`.
#[test]
fn a_hanging_executor_is_stopped_and_its_work_item_failed() {
    let fleet = Fleet::new();
    let config = fleet.worker_config("w1", "cap.work", "cat > /dev/null; sleep 600", "");
    let worker = fleet.start(&config);
    let plan = fleet.plan(
        "hang.toml",
        "mission = \"m1\"\ntitle = \"t\"\n[[work]]\nid = \"hang\"\ncapability = \"cap.work:1\"\nobjective = \"o\"\nwall_clock_seconds = 2\nmax_attempts = 2\nbackoff_seconds = 0\n",
    );
    let (ok, _, err) = fleet.run_plan(&plan, 60);
    assert!(!ok, "the plan cannot succeed");
    assert!(
        err.contains("hang failed after 2 attempts"),
        "{err}\nworker:\n{}",
        worker.log()
    );
    let view = fleet.work_item("hang");
    assert_eq!(view["state"], "failed", "{view}");
}

/// An executor that exits non-zero fails its WorkItem (T13: with the run's Evidence), and
/// the attempt's usage is charged; before, the Authority refused that `work.fail` (it carried
/// `usage` and no Evidence), the lease lapsed and the WorkItem ran again and again.
#[test]
fn a_failing_executor_fails_its_work_item_with_evidence_and_its_usage() {
    let fleet = Fleet::new();
    let config = fleet.worker_config("w1", "cap.work", "cat > /dev/null; sleep 1; exit 3", "");
    let worker = fleet.start(&config);
    let plan = fleet.plan(
        "fail.toml",
        "mission = \"m1\"\ntitle = \"t\"\n[[work]]\nid = \"bad\"\ncapability = \"cap.work:1\"\nobjective = \"o\"\nmax_attempts = 1\nbackoff_seconds = 0\n",
    );
    let (ok, _, err) = fleet.run_plan(&plan, 60);
    assert!(!ok, "the plan cannot succeed");
    assert!(
        err.contains("bad failed"),
        "{err}\nworker:\n{}",
        worker.log()
    );
    let view = fleet.work_item("bad");
    assert_eq!(view["state"], "failed", "{view}");
    assert!(
        view["budget"]["spent"]["computeSeconds"].as_f64() >= Some(1.0),
        "the attempt's usage is charged: {view}"
    );
}

/// A Membership change makes every session of the Worker's Agent in the Group stale: its
/// stream ends with 401. The Worker starts again with new sessions and takes the next work;
/// before, that Group's subscription ended for good and the Worker stayed up hearing nothing.
#[test]
fn a_worker_whose_session_went_stale_starts_again_and_takes_work() {
    let fleet = Fleet::new();
    let script = "cat > /dev/null; echo ok > outputs/out.txt";
    let config = fleet.worker_config("w1", "cap.work", script, "");
    let worker = fleet.start(&config);
    let one = |mission: &str| {
        format!(
            "mission = \"{mission}\"\ntitle = \"t\"\n[[work]]\nid = \"{mission}-w\"\ncapability = \"cap.work:1\"\nobjective = \"o\"\n"
        )
    };
    let (ok, out, err) = fleet.run_plan(&fleet.plan("first.toml", &one("m1")), 60);
    assert!(
        ok,
        "stdout:\n{out}\nstderr:\n{err}\nworker:\n{}",
        worker.log()
    );
    let token_file = fleet.server.data_dir.join("admin.token");
    let (ok, _, err) = weft(
        &fleet.coordinator,
        &fleet.server.url(),
        &[
            "admin",
            "--admin-token-file",
            token_file.to_str().expect("utf-8"),
            "member",
            "set",
            "g1",
            "w1",
            "--role",
            "worker",
        ],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = fleet.run_plan(&fleet.plan("second.toml", &one("m2")), 60);
    assert!(
        ok,
        "stdout:\n{out}\nstderr:\n{err}\nworker:\n{}",
        worker.log()
    );
}

/// OFL-3…5: the Authority killed while a Worker runs. The run goes on within its grace, its
/// end is buffered in the journal, and on reconnect the journal is reconciled before anything
/// else; the WorkItem then runs again and is verified.
#[test]
fn the_authority_killed_while_a_worker_runs_is_reconciled_on_reconnect() {
    let fleet = Fleet::new();
    let started = fleet.path("started");
    let script = format!(
        "cat > /dev/null; n=$(cat {s} 2>/dev/null || echo 0); echo $((n+1)) > {s}; \
         if [ $n -eq 0 ]; then sleep 2; fi; echo ok > outputs/out.txt",
        s = started.display()
    );
    let config = fleet.worker_config("w1", "cap.work", &script, "offline_grace_seconds = 60");
    let worker = fleet.start(&config);
    let plan = fleet.plan(
        "offline.toml",
        "mission = \"m1\"\ntitle = \"t\"\n[[work]]\nid = \"away\"\ncapability = \"cap.work:1\"\nobjective = \"o\"\nexecution_seconds = 3\n",
    );
    let (url, data) = (fleet.server.url(), fleet.server.data_dir.clone());
    let addr = fleet.server.addr.to_string();
    let coordinator = {
        let (plan, home, url) = (plan.clone(), fleet.coordinator.clone(), url.clone());
        std::thread::spawn(move || {
            // A run fails while the server is away; the next one finishes the plan.
            let plan = plan.to_str().expect("utf-8").to_owned();
            let mut last = (false, String::new(), String::new());
            for _ in 0..30 {
                last = weft(
                    &home,
                    &url,
                    &["mission", "run", "--plan", &plan, "--timeout-secs", "60"],
                );
                if last.0 {
                    break;
                }
                std::thread::sleep(Duration::from_secs(2));
            }
            last
        })
    };
    eventually("the first run", Duration::from_secs(60), || {
        started.exists()
    });
    let Fleet {
        server,
        root,
        coordinator: home,
    } = fleet;
    server.kill();
    std::thread::sleep(Duration::from_secs(5));
    let server = TestServer::start_on(&data, &addr, &[]);
    let (ok, out, err) = coordinator.join().expect("coordinator thread");
    assert!(
        ok,
        "stdout:\n{out}\nstderr:\n{err}\nworker:\n{}",
        worker.log()
    );
    let log = worker.log();
    assert!(log.contains("journals reconciled"), "{log}");
    let runs = std::fs::read_to_string(&started).expect("runs");
    assert_eq!(runs.trim(), "2", "it ran again after the reconcile");
    let (shown, view, _) = weft(&home, &server.url(), &["work", "show", "away", "--json"]);
    assert!(shown);
    assert!(view.contains("\"verified\""), "{view}");
    drop(root);
}

/// SCH-12: with per-slot uids (the Worker runs as root), an executor cannot read another
/// slot's run directory or write into the Worker's state, and its token is in neither its
/// environment nor any file.
#[test]
fn an_executor_cannot_reach_another_slot_or_the_workers_files() {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: per-slot uids need the Worker to run as root");
        return;
    }
    let fleet = Fleet::new();
    // Slot uids must reach their run directories through the test's temp root.
    std::fs::set_permissions(
        fleet.root.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let report = fleet.path("report");
    std::fs::create_dir_all(&report).expect("report dir");
    std::fs::set_permissions(&report, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    let state = fleet.path("w1-state");
    let script = format!(
        "t=$(cat); echo secret > secret.txt; slot=$(basename $(dirname $PWD)); \
         for other in 1 2; do [ $other = $slot ] && continue; \
           for i in 1 2 3 4 5 6 7 8 9 10; do \
             if cat {state}/slots/$other/run/secret.txt 2>/dev/null; then echo read >> {r}/$slot; fi; sleep 0.3; done; done; \
         touch {state}/planted 2>/dev/null && echo wrote >> {r}/$slot; \
         env | grep -q \"$(echo $t | sed 's/.*\"token\":\"\\([^\"]*\\)\".*/\\1/')\" && echo env >> {r}/$slot; \
         echo ok > outputs/out.txt",
        state = state.display(),
        r = report.display(),
    );
    let config = fleet.worker_config("w1", "cap.work", &script, "slot_uid_base = 62000");
    let _w = fleet.start(&config);
    let plan = fleet.plan(
        "iso.toml",
        "mission = \"m1\"\ntitle = \"t\"\n[[work]]\nid = \"one\"\ncapability = \"cap.work:1\"\nobjective = \"o\"\n[[work]]\nid = \"two\"\ncapability = \"cap.work:1\"\nobjective = \"o\"\n",
    );
    let (ok, out, err) = fleet.run_plan(&plan, 90);
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    let breaches: Vec<String> = std::fs::read_dir(&report)
        .expect("report")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .filter(|t| !t.trim().is_empty())
        .collect();
    assert!(
        breaches.is_empty(),
        "an executor reached what it must not: {breaches:?}"
    );
    assert!(!state.join("planted").exists());
}

/// SCH-12: what a run leaves reaches nothing after it. A symlink in `outputs/` to the
/// Worker's key is not published (the Worker followed it before); a process it left in its
/// group, and with per-slot uids one in a session of its own (`setsid`), is stopped when the
/// run ends, so nothing acts without a lease or reaches the slot's next run.
#[test]
fn a_runs_symlinks_and_leftover_processes_reach_nothing() {
    let fleet = Fleet::new();
    let root = rustix::process::geteuid().is_root();
    std::fs::set_permissions(
        fleet.root.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let report = fleet.path("report");
    std::fs::create_dir_all(&report).expect("report dir");
    std::fs::set_permissions(&report, std::os::unix::fs::PermissionsExt::from_mode(0o777))
        .expect("chmod");
    let key = fleet.path("w1").join("agent.key");
    let session = if root {
        format!(
            "setsid sleep 60 & echo $! > {}/session.pid; ",
            report.display()
        )
    } else {
        String::new()
    };
    let script = format!(
        "cat > /dev/null; ln -s {key} outputs/key; sleep 60 & echo $! > {r}/group.pid; \
         {session}echo ok > outputs/out.txt",
        key = key.display(),
        r = report.display(),
    );
    let extra = if root { "slot_uid_base = 62100" } else { "" };
    let config = fleet.worker_config("w1", "cap.work", &script, extra);
    let worker = fleet.start(&config);
    let plan = fleet.plan(
        "left.toml",
        "mission = \"m1\"\ntitle = \"t\"\n[[work]]\nid = \"one\"\ncapability = \"cap.work:1\"\nobjective = \"o\"\n",
    );
    let (ok, out, err) = fleet.run_plan(&plan, 90);
    assert!(
        ok,
        "stdout:\n{out}\nstderr:\n{err}\nworker:\n{}",
        worker.log()
    );
    let pids: Vec<String> = ["group.pid", "session.pid"]
        .iter()
        .filter_map(|name| std::fs::read_to_string(report.join(name)).ok())
        .map(|pid| pid.trim().to_owned())
        .collect();
    assert_eq!(pids.len(), if root { 2 } else { 1 }, "{pids:?}");
    for pid in &pids {
        // Gone, or a zombie its parent has not reaped yet: stopped either way.
        eventually(
            &format!("leftover {pid} stopped"),
            Duration::from_secs(10),
            || {
                std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
                    stat.rsplit_once(')')
                        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
                })
            },
        );
    }
    // The Mission's Artifacts: the run's one regular output, nothing the symlink named.
    let (ok, listed, err) = weft(
        &fleet.coordinator,
        &fleet.server.url(),
        &["ls", "--mission", "m1"],
    );
    assert!(ok, "{err}");
    assert_eq!(listed.lines().count(), 2, "a header and out.txt: {listed}");
}

/// LSE-11, LSE-12, PRG-3: a Coordinator's `preemption.request` reaches the executor as
/// SIGUSR1; it checkpoints at its safe point and exits 75; the Worker emits the checkpoint
/// (an Artifact and `work.checkpointed`), releases the slot, and the WorkItem re-enters the
/// queue and resumes from its checkpoint file, in that order in the log.
#[test]
fn a_preempted_executor_checkpoints_and_resumes_lse_12() {
    let fleet = Fleet::new();
    let script = "cat > /dev/null; \
        if [ -s \"$WEFT_CHECKPOINT\" ]; then cp \"$WEFT_CHECKPOINT\" outputs/resumed-from.txt; exit 0; fi; \
        trap 'echo step-3 > \"$WEFT_CHECKPOINT\"; exit 75' USR1; \
        i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done";
    let config = fleet.worker_config("w1", "cap.work", script, "");
    let _w = fleet.start(&config);
    let plan = fleet.plan(
        "preempt.toml",
        "mission = \"m1\"\ntitle = \"t\"\n[[work]]\nid = \"long\"\ncapability = \"cap.work:1\"\nobjective = \"o\"\n",
    );
    let coordinator = fleet.run_plan_in_background(&plan, 60);
    eventually("the run", Duration::from_secs(60), || {
        fleet
            .try_work_item("long")
            .is_some_and(|v| v["state"] == "active")
    });
    let (ok, _, err) = weft(
        &fleet.coordinator,
        &fleet.server.url(),
        &["work", "preempt", "long"],
    );
    assert!(ok, "{err}");
    let (ok, out, err) = coordinator.join().expect("coordinator thread");
    assert!(ok, "stdout:\n{out}\nstderr:\n{err}");
    let (ok, events, _) = weft(
        &fleet.coordinator,
        &fleet.server.url(),
        &["events", "tail", "--group", "g1"],
    );
    assert!(ok);
    let kinds: Vec<String> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["payload"]["workItemId"] == "long")
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect();
    let at = |kind: &str| {
        kinds
            .iter()
            .position(|k| k == kind)
            .unwrap_or_else(|| panic!("no {kind}: {kinds:?}"))
    };
    assert!(
        at("work.preemption_requested") < at("work.checkpointed"),
        "{kinds:?}"
    );
    let restarted = kinds
        .iter()
        .rposition(|k| k == "work.started")
        .expect("started");
    assert!(
        at("work.checkpointed") < restarted && restarted < at("work.submitted"),
        "{kinds:?}"
    );
    // It resumed from its checkpoint: the output it published says so.
    let (ok, listing, _) = weft(
        &fleet.coordinator,
        &fleet.server.url(),
        &["ls", "--mission", "m1", "--json"],
    );
    assert!(ok);
    assert!(listing.contains("resumed-from.txt"), "{listing}");
}
