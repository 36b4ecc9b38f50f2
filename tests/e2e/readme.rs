//! The README pastes (issue #40): its fenced `sh` blocks, in order, run as written in one
//! `bash -euo pipefail` against a real `weft serve` this test starts.
//!
//! The convention is an HTML comment on the line right before a block's opening fence
//! (invisible when the README is rendered):
//! - `<!-- readme-test: skip (why) -->`: the block is not run. It marks the blocks that build
//!   or start the server (this test starts the binary it was built with instead) and
//!   `scripts/test`.
//! - `<!-- readme-test: server stopped -->`: the server is stopped first (SIGINT, the Ctrl-C
//!   the README's prose asks for), and stays stopped for the blocks after it.
//!
//! Any other `readme-test:` comment fails the test, as does any block that fails.
//!
//! The reader's machine is stood in for, never by rewriting the README's text: the working
//! directory is a temp directory holding the server's data dir `weft-data` (so the admin
//! commands' default `weft-data/admin.token` is the server's), `target/release/weft` (a link
//! to this build's binary) and `examples/` (a link to the repository's); `HOME` is a fresh
//! temp directory (so `~/.weft` and the `$HOME/.weft-…` homes start empty), `WEFT_SERVER` the
//! server's 127.0.0.1:0 address, and nothing else of the caller's environment but `PATH`.
//!
//! The blocks are fed to one shell through its stdin, each wrapped as `{ BLOCK } </dev/null`
//! (so no command eats the script) and followed by a marker line the test waits for, which
//! lets the test stop the server between two blocks while the shell keeps its variables.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::{TestServer, WEFT};

/// What the test does with a block, from the comment before its fence.
#[derive(Debug, PartialEq)]
enum Directive {
    Run,
    Skip,
    ServerStopped,
}

/// A fenced `sh` block of the README.
struct Block {
    /// The README line of its opening fence, for messages.
    line: usize,
    directive: Directive,
    text: String,
}

/// The `sh` blocks of `markdown`, in order, with their directives.
fn sh_blocks(markdown: &str) -> Vec<Block> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut blocks = Vec::new();
    let mut line_idx = 0;
    while line_idx < lines.len() {
        let Some(language) = lines[line_idx].strip_prefix("```") else {
            line_idx += 1;
            continue;
        };
        let opening = line_idx;
        let close = (opening + 1..lines.len())
            .find(|&idx| lines[idx].trim_end() == "```")
            .unwrap_or_else(|| panic!("README line {}: unclosed fence", opening + 1));
        line_idx = close + 1;
        if language.trim() != "sh" {
            continue;
        }
        let before = opening.checked_sub(1).map_or("", |idx| lines[idx]).trim();
        let directive = match before
            .strip_prefix("<!-- readme-test:")
            .and_then(|rest| rest.strip_suffix("-->"))
            .map(str::trim)
        {
            None => Directive::Run,
            Some("server stopped") => Directive::ServerStopped,
            Some(skip) if skip.starts_with("skip (") && skip.ends_with(')') => Directive::Skip,
            Some(other) => panic!("README line {opening}: unknown readme-test directive {other:?}"),
        };
        blocks.push(Block {
            line: opening + 1,
            directive,
            text: lines[opening + 1..close].join("\n"),
        });
    }
    blocks
}

#[test]
fn the_convention_reads_directives_and_only_sh_blocks() {
    let markdown = "text\n\n<!-- readme-test: skip (starts the server) -->\n```sh\nserve\n```\n\n```sh\necho one\n```\n```json\n{}\n```\n<!-- readme-test: server stopped -->\n```sh\nfsck\n```\n";
    let blocks = sh_blocks(markdown);
    let seen: Vec<(&Directive, &str)> = blocks.iter().map(|b| (&b.directive, &*b.text)).collect();
    assert_eq!(
        seen,
        [
            (&Directive::Skip, "serve"),
            (&Directive::Run, "echo one"),
            (&Directive::ServerStopped, "fsck"),
        ]
    );
}

/// Links `target/release/weft` and `examples/` into `work`, the reader's checkout.
fn checkout(work: &Path) {
    let release = work.join("target/release");
    std::fs::create_dir_all(&release).expect("mkdir target/release");
    std::os::unix::fs::symlink(WEFT, release.join("weft")).expect("link the binary");
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    std::os::unix::fs::symlink(examples, work.join("examples")).expect("link examples");
}

#[test]
fn every_sh_block_of_the_readme_runs_as_written_in_order() {
    let readme_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("README.md");
    let blocks = sh_blocks(&readme);
    let n_run = blocks
        .iter()
        .filter(|b| b.directive != Directive::Skip)
        .count();
    assert!(
        n_run >= 4,
        "only {n_run} README blocks to run: is the convention still used?"
    );
    let root = tempfile::tempdir().expect("tempdir");
    let work = root.path().join("checkout");
    checkout(&work);
    let server = TestServer::start(&work.join("weft-data"), &[]);
    if let Err(failure) = run(&blocks, root.path(), &work, Some(server)) {
        panic!("{failure}");
    }
}

#[test]
fn a_failing_block_fails_the_run_and_variables_carry_over() {
    let markdown = "```sh\nX=$(echo one)\n```\n\n```sh\ntest \"$X\" = one\n```\n\n```sh\ntrue\nfalse\n```\n\n```sh\necho never\n```\n";
    let root = tempfile::tempdir().expect("tempdir");
    let work = root.path().join("checkout");
    std::fs::create_dir_all(&work).expect("mkdir");
    let failure =
        run(&sh_blocks(markdown), root.path(), &work, None).expect_err("the third block fails");
    assert!(
        failure.starts_with("the README block at line 9 failed"),
        "{failure}"
    );
}

/// Feeds `blocks` to one `bash -euo pipefail` in `work`, with a fresh `HOME` under `root`,
/// stopping `server` before a `server stopped` block. The error names the failed block.
fn run(
    blocks: &[Block],
    root: &Path,
    work: &Path,
    mut server: Option<TestServer>,
) -> Result<(), String> {
    let home = root.join("home");
    std::fs::create_dir_all(&home).expect("mkdir home");
    let url = server
        .as_ref()
        .map_or_else(|| "http://127.0.0.1:1".to_owned(), TestServer::url);
    let stderr_path = root.join("stderr.txt");
    let mut shell = Command::new("bash")
        .args(["-euo", "pipefail"])
        .current_dir(work)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", &home)
        .env("WEFT_SERVER", &url)
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&stderr_path).expect("stderr file"))
        .spawn()
        .expect("bash runs");
    // A watchdog: a hung block fails the test instead of hanging it (by this shell's id).
    let finished = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let finished = Arc::clone(&finished);
        let pid = shell.id().to_string();
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            while !finished.load(Ordering::Relaxed) {
                if Instant::now() > deadline {
                    let _ = Command::new("kill").args(["-KILL", &pid]).status();
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    let mut script = shell.stdin.take().expect("piped stdin");
    let mut output = BufReader::new(shell.stdout.take().expect("piped stdout"));
    let mut transcript = String::new();
    let mut failed = None;
    for (block_idx, block) in blocks.iter().enumerate() {
        match block.directive {
            Directive::Skip => continue,
            Directive::ServerStopped => {
                if let Some(running) = server.take() {
                    running.interrupt();
                }
            }
            Directive::Run => {}
        }
        let marker = format!("readme-test: block {block_idx} done");
        // A shell that already exited cannot read: the missing marker below says so.
        let _ = writeln!(script, "{{\n{}\n}} </dev/null\necho '{marker}'", block.text)
            .and_then(|()| script.flush());
        let mut done = false;
        let mut line = Vec::new();
        while !done {
            line.clear();
            let n_read = output.read_until(b'\n', &mut line).expect("read stdout");
            if n_read == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&line);
            done = text.trim_end() == marker;
            if !done {
                transcript.push_str(&text);
            }
        }
        if !done {
            failed = Some(block);
            break;
        }
    }
    drop(script);
    let status = shell.wait().expect("bash ends");
    finished.store(true, Ordering::Relaxed);
    watchdog.join().expect("watchdog");
    match failed {
        None if status.success() => Ok(()),
        None => Err(format!("the shell ended with {status}")),
        Some(block) => Err(format!(
            "the README block at line {} failed ({status}):\n{}\n--- stdout ---\n{transcript}\n--- stderr ---\n{}",
            block.line,
            block.text,
            std::fs::read_to_string(&stderr_path).unwrap_or_default()
        )),
    }
}
