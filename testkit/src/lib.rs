//! Test-only helpers shared by the workspace's suites and benches: Garage (the Rust
//! S3-compatible store) started on loopback, one node or a cluster, each in its own temp
//! directory with its own ports. Never a dependency of the server.
//!
//! Finding the binary: `WEFT_GARAGE` (a path), else `garage` on `PATH`, else
//! `~/.cache/weft-garage/bin/garage`, where `scripts/test` installs it (`cargo install
//! garage --locked`). [`garage_binary`] says `None` when there is none; `scripts/test` sets
//! `WEFT_GARAGE`, and a suite must then fail rather than skip (see [`garage_required`]).
//!
//! Garage runs in its default consistency mode (quorums of 2 of 3 in a three-node cluster),
//! the one weft needs: a read never misses a blob just written. Its log is `garage.log` in
//! the node's directory, at `WEFT_GARAGE_RUST_LOG` (default `warn`).
//!
//! Lifetimes: each node runs under a small `sh` that kills it when its standard input
//! closes, so a node dies with the test process that started it (even on a panic or a
//! SIGKILL of the test process), without `unsafe` or a signal handler.

pub mod postgres;

pub use postgres::{
    Postgres, postgres_bin_dir, postgres_database_or_skip, postgres_required, shared_postgres,
};

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The access key every test Garage imports (Garage's format: `GK` and 24 hex digits).
pub const KEY_ID: &str = "GK0123456789abcdef01234567";
/// Its secret (64 hex digits).
pub const KEY_SECRET: &str = "5d7e2b1a9c8f4e3d6b0a1f2e3d4c5b6a7f8e9d0c1b2a3f4e5d6c7b8a9f0e1d2c";
/// The region every test Garage names.
pub const REGION: &str = "garage";
const RPC_SECRET: &str = "9b2e4f1a7c3d5e8f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f";

/// The Garage binary, if this machine has one.
pub fn garage_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("WEFT_GARAGE").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let candidate = dir.join("garage");
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    let home = std::env::var_os("HOME")?;
    let cached = Path::new(&home).join(".cache/weft-garage/bin/garage");
    cached.is_file().then_some(cached)
}

/// Whether a missing Garage must fail the suite: `scripts/test` sets `WEFT_GARAGE`, so there
/// the Garage runs of every suite are real; a bare `cargo test` on a machine without Garage
/// skips them, saying so.
pub fn garage_required() -> bool {
    std::env::var_os("WEFT_GARAGE").is_some_and(|p| !p.is_empty())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("a free port on loopback")
}

/// The status of `GET /weft/` without a signature, or `None` if the port does not answer.
fn status_of_unsigned_get(port: u16) -> Option<u16> {
    use std::io::Read as _;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        stream,
        "GET /{BUCKET}/ HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
}

/// One Garage server process.
#[derive(Debug)]
pub struct Node {
    binary: PathBuf,
    dir: PathBuf,
    config: PathBuf,
    pub s3_port: u16,
    pub rpc_port: u16,
    /// The `sh` that holds the server; closing its stdin kills the server.
    running: Option<(Child, ChildStdin)>,
    /// A directory the `sh` removes once it killed the server (the shared Garage's, whose
    /// owner is a static that is never dropped).
    remove_on_exit: Option<PathBuf>,
}

impl Node {
    fn new(
        binary: &Path,
        dir: PathBuf,
        replication: usize,
        remove_on_exit: Option<PathBuf>,
    ) -> Self {
        std::fs::create_dir_all(&dir).expect("node directory");
        let (s3_port, rpc_port, admin_port) = (free_port(), free_port(), free_port());
        let config = dir.join("garage.toml");
        let text = format!(
            r#"metadata_dir = "{dir}/meta"
data_dir = "{dir}/data"
db_engine = "sqlite"
replication_factor = {replication}
rpc_bind_addr = "127.0.0.1:{rpc_port}"
rpc_public_addr = "127.0.0.1:{rpc_port}"
rpc_secret = "{RPC_SECRET}"

[s3_api]
s3_region = "{REGION}"
api_bind_addr = "127.0.0.1:{s3_port}"
root_domain = ".s3.garage.localhost"

[admin]
api_bind_addr = "127.0.0.1:{admin_port}"
"#,
            dir = dir.display(),
        );
        std::fs::write(&config, text).expect("garage.toml");
        let mut node = Self {
            binary: binary.to_path_buf(),
            dir,
            config,
            s3_port,
            rpc_port,
            running: None,
            remove_on_exit,
        };
        node.start();
        node
    }

    /// Starts the server (again, after [`Node::stop`]: same directories, same ports).
    pub fn start(&mut self) {
        assert!(self.running.is_none(), "the node runs already");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("garage.log"))
            .expect("garage.log");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(r#""$0" -c "$1" server & pid=$!; read _; kill -9 $pid; wait $pid; [ -z "$2" ] || rm -rf "$2""#)
            .arg(&self.binary)
            .arg(&self.config)
            .arg(self.remove_on_exit.as_deref().unwrap_or(Path::new("")))
            .env("RUST_LOG", std::env::var("WEFT_GARAGE_RUST_LOG").unwrap_or_else(|_| "warn".into()))
            .stdin(Stdio::piped())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("garage starts");
        let stdin = child.stdin.take().expect("piped stdin");
        self.running = Some((child, stdin));
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.s3_port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "garage did not listen: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the server (SIGKILL) and waits for it to be gone.
    pub fn stop(&mut self) {
        if let Some((mut child, stdin)) = self.running.take() {
            drop(stdin);
            let _ = child.wait();
        }
    }

    /// The S3 endpoint.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.s3_port)
    }

    /// What the server wrote to its log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("garage.log")).unwrap_or_default()
    }

    /// Runs the `garage` CLI against this node; panics with its output if it fails.
    pub fn cli(&self, args: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let output = Command::new(&self.binary)
                .arg("-c")
                .arg(&self.config)
                .args(args)
                .env("RUST_LOG", "error")
                .output()
                .expect("garage CLI runs");
            if output.status.success() {
                return String::from_utf8_lossy(&output.stdout).into_owned();
            }
            // The first commands after a start can race the node's own start-up.
            if Instant::now() > deadline {
                panic!(
                    "garage {args:?} failed: {}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn node_id(&self) -> String {
        self.cli(&["node", "id", "-q"]).trim().to_owned()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Garage cluster on loopback: one node or several, a layout applied, the test key
/// imported and one bucket, `weft`, it may read and write.
#[derive(Debug)]
pub struct Garage {
    pub nodes: Vec<Node>,
    /// Each node's `<id>@<address>`, for reconnecting one that restarted.
    ids: Vec<String>,
    _dir: Option<tempfile::TempDir>,
    credentials: PathBuf,
}

/// The bucket every test Garage holds.
pub const BUCKET: &str = "weft";

impl Garage {
    /// Starts `n` nodes with replication factor `n`, or `None` without a Garage binary.
    pub fn start(n: usize) -> Option<Self> {
        Self::start_with(n, false)
    }

    fn start_with(n: usize, static_owner: bool) -> Option<Self> {
        let binary = garage_binary()?;
        let dir = tempfile::tempdir().expect("tempdir");
        let nodes: Vec<Node> = (0..n)
            .map(|i| {
                let node_dir = dir.path().join(format!("node{i}"));
                let remove = static_owner.then(|| node_dir.clone());
                Node::new(&binary, node_dir, n, remove)
            })
            .collect();
        let ids: Vec<String> = nodes.iter().map(Node::node_id).collect();
        for id in &ids[1..] {
            nodes[0].cli(&["node", "connect", id]);
        }
        for id in &ids {
            let short = id.split('@').next().unwrap_or(id);
            nodes[0].cli(&["layout", "assign", "-z", "dc1", "-c", "1G", short]);
        }
        nodes[0].cli(&["layout", "apply", "--version", "1"]);
        nodes[0].cli(&["key", "import", "--yes", "-n", "weft", KEY_ID, KEY_SECRET]);
        nodes[0].cli(&["bucket", "create", BUCKET]);
        nodes[0].cli(&[
            "bucket", "allow", "--read", "--write", "--owner", BUCKET, "--key", "weft",
        ]);
        let credentials = dir.path().join("credentials");
        let mut file = std::fs::File::create(&credentials).expect("credentials file");
        writeln!(
            file,
            "[default]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {KEY_SECRET}"
        )
        .expect("credentials written");
        let garage = Self {
            nodes,
            ids,
            _dir: Some(dir),
            credentials,
        };
        garage.wait_until_writable();
        Some(garage)
    }

    /// The layout takes a moment to reach every node: waits until every node's S3 API
    /// answers an unsigned request for the bucket with 403 (up, bucket known, signature
    /// required) rather than an error of its own.
    fn wait_until_writable(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        for node in &self.nodes {
            while status_of_unsigned_get(node.s3_port) != Some(403) {
                assert!(
                    Instant::now() < deadline,
                    "garage on port {} never became ready: {}",
                    node.s3_port,
                    node.log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Waits until node 0 sees every node up again (after a [`Node::start`]): a node that
    /// has just started is not yet connected, and a quorum that needs it fails meanwhile.
    pub fn wait_until_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        // Node 0 would retry on its own after its next ping; asked, it connects at once.
        for (node, id) in self.nodes.iter().zip(&self.ids).skip(1) {
            if node.running.is_some() {
                self.nodes[0].cli(&["node", "connect", id]);
            }
        }
        while self.nodes[0].cli(&["status"]).contains("FAILED NODES") {
            assert!(Instant::now() < deadline, "the cluster never healed");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A file in the AWS shared credentials format holding the test key.
    pub fn credentials_file(&self) -> &Path {
        &self.credentials
    }

    /// `s3://weft/PREFIX?endpoint=…&region=garage` on node `i`.
    pub fn location(&self, node: usize, prefix: &str) -> String {
        format!(
            "s3://{BUCKET}/{prefix}?endpoint={}&region={REGION}",
            self.nodes[node].endpoint()
        )
    }

    /// How many multipart uploads are open (begun, neither completed nor aborted) in the
    /// bucket, as Garage counts them (its `bucket info` prints the line only when some are).
    pub fn open_multipart_uploads(&self) -> u64 {
        let info = self.nodes[0].cli(&["bucket", "info", BUCKET]);
        info.lines()
            .find(|line| line.starts_with("Unfinished uploads:"))
            .map(|line| {
                line.split(|c: char| !c.is_ascii_digit())
                    .find(|word| !word.is_empty())
                    .and_then(|n| n.parse().ok())
                    .unwrap_or_else(|| panic!("no count in {line:?}"))
            })
            .unwrap_or(0)
    }

    /// [`Garage::open_multipart_uploads`] once it equals `expected`, or after 10 s (Garage
    /// updates its bucket counters in the background): the last count seen.
    pub fn settled_open_multipart_uploads(&self, expected: u64) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let n = self.open_multipart_uploads();
            if n == expected || Instant::now() > deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// One single-node Garage per test process, shared by every test in it (each uses its own
/// key prefix); `None` without a Garage binary.
pub fn shared_garage() -> Option<&'static Garage> {
    static GARAGE: OnceLock<Option<Garage>> = OnceLock::new();
    GARAGE
        .get_or_init(|| {
            // Started from a thread that lives as long as the process: nothing here depends
            // on the calling test's thread.
            std::thread::spawn(|| Garage::start_with(1, true))
                .join()
                .expect("garage start-up thread")
        })
        .as_ref()
}
