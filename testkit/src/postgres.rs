//! Throwaway PostgreSQL clusters on loopback for the PostgreSQL index engine's tests (issue
//! #43): `initdb` into a temp directory (trust authentication, superuser `weft`, UTF8, locale
//! `C`), then `postgres` listening on 127.0.0.1 only, on a free port, its Unix socket in the
//! temp directory, `fsync` on (durability is tested), `max_connections=300`,
//! `shared_buffers=64MB`. Its log is `postgres.log` in the temp directory.
//!
//! Finding the binaries: `WEFT_POSTGRES` (the directory holding `initdb`, `postgres` and
//! `pg_isready`), else the newest `/usr/lib/postgresql/*/bin` with an `initdb`, else the
//! directory `initdb` on `PATH` resolves to. [`postgres_bin_dir`] says `None` when there is
//! none; with `WEFT_POSTGRES` set a suite must fail rather than skip ([`postgres_required`]).
//!
//! Root: `initdb` and `postgres` refuse to run as root, and the suites run as root in CI. Then
//! the temp directory is `chown -R`ed to the `postgres` user (else `nobody`) and the server
//! side runs as that user (`CommandExt::uid`/`gid`), so the binaries must be readable by it
//! (a `WEFT_POSTGRES` under `/root` is not). The clients (`psql`, `pg_isready`) run as
//! whoever runs the tests; trust authentication lets them in as `weft`.
//!
//! Lifetimes: `postgres` runs in the foreground (not daemonized by `pg_ctl`) as a child of the
//! test process, beside a small `sh` watchdog that sends it SIGQUIT (an immediate shutdown,
//! what `pg_ctl stop -m immediate` sends) when its standard input closes: when the
//! [`Postgres`] is dropped or stopped, or when the test process dies, even by SIGKILL. So no
//! server outlives its test process, and the watchdog then removes the directory (but for
//! [`Postgres::stop`], which keeps it). `stop` is that immediate shutdown, a crash as far as
//! the data is concerned: the next [`Postgres::start`] recovers from the WAL.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The directory holding `initdb`, `postgres` and `pg_isready`, if this machine has one.
pub fn postgres_bin_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("WEFT_POSTGRES").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let newest = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<f64>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((_, bin)) = newest {
        return Some(bin);
    }
    let paths = std::env::var_os("PATH")?;
    let initdb = std::env::split_paths(&paths)
        .map(|dir| dir.join("initdb"))
        .find(|candidate| candidate.is_file())?;
    // A symlink (`/usr/local/bin/initdb`): the directory of what it points at, which holds
    // the other server binaries.
    let initdb = std::fs::canonicalize(&initdb).unwrap_or(initdb);
    initdb.parent().map(Path::to_path_buf)
}

/// Whether a cluster that does not start must fail the suite: set `WEFT_POSTGRES` and the
/// PostgreSQL runs of every suite are real; a bare `cargo test` on a machine without
/// PostgreSQL skips them, saying so.
pub fn postgres_required() -> bool {
    std::env::var_os("WEFT_POSTGRES").is_some_and(|d| !d.is_empty())
}

/// The trimmed standard output of `program args`, if it ran and succeeded.
fn output_of(program: &str, args: &[&str]) -> Option<String> {
    let output = Command::new(program).args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// The (uid, gid) the server side runs as: `None` unless the tests run as root, then the
/// `postgres` user's, else `nobody`'s.
fn server_user() -> Option<(u32, u32)> {
    if output_of("id", &["-u"])? != "0" {
        return None;
    }
    ["postgres", "nobody"].iter().find_map(|user| {
        let uid = output_of("id", &["-u", user])?.parse().ok()?;
        let gid = output_of("id", &["-g", user])?.parse().ok()?;
        Some((uid, gid))
    })
}

/// One running server: `postgres` itself, and the watchdog whose stdin we hold.
#[derive(Debug)]
struct Running {
    server: Child,
    watchdog: Child,
    stdin: ChildStdin,
}

/// A throwaway PostgreSQL cluster: its own temp directory, its own port.
#[derive(Debug)]
pub struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    user: Option<(u32, u32)>,
    running: Option<Running>,
}

impl Postgres {
    /// Starts a cluster, or `None` without PostgreSQL binaries; panics with the server's log
    /// or `initdb`'s output if it does not start.
    pub fn new() -> Option<Self> {
        let bin = postgres_bin_dir()?;
        Some(Self::create(bin).unwrap_or_else(|error| panic!("{error}")))
    }

    fn create(bin: PathBuf) -> Result<Self, String> {
        // Removed by `Drop`, or by the watchdog when the process dies first.
        let dir = tempfile::tempdir().expect("tempdir").keep();
        let mut postgres = Self {
            bin,
            dir,
            port: super::free_port(),
            user: server_user(),
            running: None,
        };
        if let Some((uid, gid)) = postgres.user {
            let status = Command::new("chown")
                .arg("-R")
                .arg(format!("{uid}:{gid}"))
                .arg(&postgres.dir)
                .status()
                .expect("chown runs");
            assert!(
                status.success(),
                "chown of {} failed",
                postgres.dir.display()
            );
        }
        let initdb = postgres
            .as_server_user(&postgres.bin.join("initdb"))
            .arg("-D")
            .arg(postgres.dir.join("data"))
            .args(["--auth=trust", "--username=weft"])
            .args(["--encoding=UTF8", "--locale=C"])
            .output()
            .map_err(|error| format!("initdb did not run: {error}"))?;
        if !initdb.status.success() {
            return Err(format!(
                "initdb failed: {}{}",
                String::from_utf8_lossy(&initdb.stdout),
                String::from_utf8_lossy(&initdb.stderr)
            ));
        }
        postgres.try_start()?;
        Ok(postgres)
    }

    /// `program`, set to run as the server's user in the cluster's directory.
    fn as_server_user(&self, program: &Path) -> Command {
        use std::os::unix::process::CommandExt as _;
        let mut command = Command::new(program);
        command.current_dir(&self.dir);
        if let Some((uid, gid)) = self.user {
            command.uid(uid).gid(gid);
        }
        command
    }

    /// The client `program` of the cluster's binaries, run by whoever runs the tests, told to
    /// connect to this cluster as `weft`.
    fn client(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        let port = self.port.to_string();
        command.args(["-h", "127.0.0.1", "-p", &port, "-U", "weft"]);
        command
    }

    /// Starts the server (again, after [`Postgres::stop`]: same data directory, same port);
    /// panics with its log if it does not accept connections within 30 s.
    pub fn start(&mut self) {
        self.try_start().unwrap_or_else(|error| panic!("{error}"));
    }

    fn try_start(&mut self) -> Result<(), String> {
        assert!(self.running.is_none(), "the cluster runs already");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("postgres.log"))
            .expect("postgres.log");
        let port = self.port.to_string();
        let server = self
            .as_server_user(&self.bin.join("postgres"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-p", &port, "-c", "listen_addresses=127.0.0.1", "-k"])
            .arg(&self.dir)
            .args(["-c", "fsync=on", "-c", "max_connections=300"])
            .args(["-c", "shared_buffers=64MB"])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .map_err(|error| format!("postgres did not run: {error}"))?;
        // `kill -0` holds while the server is a zombie, so the loop ends once it was reaped:
        // by `halt`, or by init when the test process is gone. Only `stop` says `keep`.
        let mut watchdog = self
            .as_server_user(Path::new("sh"))
            .arg("-c")
            .arg(r#"read cmd; kill -QUIT "$0"; while kill -0 "$0" 2>/dev/null; do sleep 0.05; done; [ "$cmd" = keep ] || rm -rf "$1""#)
            .arg(server.id().to_string())
            .arg(&self.dir)
            .stdin(Stdio::piped())
            .spawn()
            .expect("the watchdog sh starts");
        let stdin = watchdog.stdin.take().expect("piped stdin");
        self.running = Some(Running {
            server,
            watchdog,
            stdin,
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = self
                .client("pg_isready")
                .args(["-q", "-d", "postgres"])
                .status()
                .map_err(|error| format!("pg_isready did not run: {error}"))?;
            if ready.success() {
                return Ok(());
            }
            let running = self.running.as_mut().expect("just started");
            let exited = running.server.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() > deadline {
                let error = format!(
                    "postgres on port {} did not start ({exited:?}): {}",
                    self.port,
                    self.log()
                );
                self.stop();
                return Err(error);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server at once (SIGQUIT: an immediate shutdown, no checkpoint; committed
    /// transactions survive, as after a crash) and waits for it to be gone.
    pub fn stop(&mut self) {
        self.halt(true);
    }

    /// Stops the server; its watchdog then removes the directory unless `keep`.
    fn halt(&mut self, keep: bool) {
        if let Some(mut running) = self.running.take() {
            if keep {
                let _ = running.stdin.write_all(b"keep\n");
            }
            drop(running.stdin);
            let _ = running.server.wait();
            let _ = running.watchdog.wait();
        }
    }

    /// Freezes the server and every backend (SIGSTOP): connections stay open and nothing
    /// answers, as when a partition cuts the database off. [`Postgres::resume`] thaws it.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws what [`Postgres::pause`] froze (SIGCONT).
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    /// Sends `signal` to the server and its children, by PID.
    fn signal(&self, signal: &str) {
        let Some(running) = &self.running else {
            return;
        };
        let pid = running.server.id().to_string();
        let children = Command::new("pgrep")
            .args(["-P", &pid])
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default();
        let status = Command::new("kill")
            .arg(signal)
            .arg(&pid)
            .args(children.split_whitespace())
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill {signal} {pid} {children}");
    }

    /// The port the server listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://weft@127.0.0.1:PORT/DATABASE`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://weft@127.0.0.1:{}/{database}", self.port)
    }

    /// `DATABASE` reached through the cluster's Unix socket (in its temp directory), as a
    /// PostgreSQL on the same machine is by default: `postgres://weft@%2F…:PORT/DATABASE`.
    pub fn socket_url(&self, database: &str) -> String {
        let dir = self.dir.to_str().expect("a UTF-8 temp directory");
        format!(
            "postgres://weft@{}:{}/{database}",
            dir.replace('/', "%2F"),
            self.port
        )
    }

    /// Runs `sql` with `psql` in `database`; its unaligned, tuples-only output, or a panic
    /// with what it said.
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let output = self
            .client("psql")
            .args(["-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1"])
            .args(["-d", database, "-c", sql])
            .output()
            .expect("psql runs");
        assert!(
            output.status.success(),
            "psql {sql:?} in {database} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Creates database `name` (from `template0`); answers its URL.
    pub fn create_database(&self, name: &str) -> String {
        let quoted = name.replace('"', "\"\"");
        self.psql(
            "postgres",
            &format!(r#"CREATE DATABASE "{quoted}" TEMPLATE template0"#),
        );
        self.url(name)
    }

    /// Creates a database of a name no other call in this process gave; answers its URL.
    pub fn new_database(&self) -> String {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        self.create_database(&format!("t_{n}_{}", std::process::id()))
    }

    /// What the server wrote to its log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("postgres.log")).unwrap_or_default()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.halt(false);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One cluster per test process, shared by every test in it (each in a database of its own,
/// [`Postgres::new_database`]); `None` without PostgreSQL binaries, or when the cluster does
/// not start and [`postgres_required`] is false. Its server stops and its directory is removed
/// when the process exits.
pub fn shared_postgres() -> Option<&'static Postgres> {
    static POSTGRES: OnceLock<Option<Postgres>> = OnceLock::new();
    POSTGRES
        .get_or_init(|| {
            let bin = postgres_bin_dir()?;
            // Started from a thread that lives as long as the process, as `shared_garage`.
            let started = std::thread::spawn(move || Postgres::create(bin))
                .join()
                .expect("postgres start-up thread");
            match started {
                Ok(postgres) => Some(postgres),
                Err(error) if postgres_required() => panic!("{error}"),
                Err(error) => {
                    eprintln!("no PostgreSQL for this run: {error}");
                    None
                }
            }
        })
        .as_ref()
}

/// A new database of the shared cluster for one test, or `None` (the test is skipped, and says
/// so) when no PostgreSQL runs; with `WEFT_POSTGRES` set, a missing cluster fails the test.
pub fn postgres_database_or_skip() -> Option<String> {
    let Some(cluster) = shared_postgres() else {
        assert!(
            !postgres_required(),
            "WEFT_POSTGRES is set but no PostgreSQL runs"
        );
        eprintln!("skipped: no PostgreSQL");
        return None;
    };
    Some(cluster.new_database())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_serves_two_databases_and_survives_a_restart() {
        let Some(mut postgres) = Postgres::new() else {
            assert!(
                !postgres_required(),
                "WEFT_POSTGRES is set but names no PostgreSQL"
            );
            eprintln!("skipped: no PostgreSQL binaries");
            return;
        };
        let port = postgres.port();
        let url = postgres.create_database("one");
        assert_eq!(url, format!("postgres://weft@127.0.0.1:{port}/one"));
        postgres.create_database("two");
        let names = ["one", "two"];
        for name in names {
            assert_eq!(postgres.psql(name, "select 1"), "1\n", "{}", postgres.log());
            postgres.psql(name, "CREATE TABLE t (x BIGINT); INSERT INTO t VALUES (42)");
        }
        postgres.stop();
        postgres.start();
        assert_eq!(postgres.port(), port);
        for name in names {
            assert_eq!(postgres.psql(name, "select 1"), "1\n", "{}", postgres.log());
            assert_eq!(postgres.psql(name, "SELECT x FROM t"), "42\n");
        }
        assert_eq!(postgres.psql("postgres", "SHOW fsync"), "on\n");
        assert_eq!(postgres.psql("postgres", "SHOW max_connections"), "300\n");
    }

    #[test]
    fn the_shared_cluster_answers() {
        let Some(postgres) = shared_postgres() else {
            return;
        };
        let url = postgres.new_database();
        let name = url.rsplit('/').next().expect("a database in the URL");
        assert_eq!(postgres.psql(name, "select 1"), "1\n");
    }
}
