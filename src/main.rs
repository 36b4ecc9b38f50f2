//! Entry point: parse flags, start logging, hand over to the library.

use clap::Parser as _;

/// mimalloc instead of glibc's malloc: a small request allocates a few dozen times, and
/// glibc's arenas cost about a tenth of a 4 KiB GET's CPU (issue #15).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    purge_freed_pages_soon();
    run()
}

/// How long mimalloc keeps a freed page before returning it to the system, in milliseconds,
/// unless the environment says otherwise: mimalloc v2's default, where v3 (the version built
/// here) keeps pages for a second. A streaming upload frees a part buffer, a hashing batch
/// and hyper's read buffers every few milliseconds; a second of them stayed resident, and a
/// 4 GiB upload to S3 peaked at 77 MiB against 63 MiB with this (issue #42's goal is 64 MiB;
/// `bench/garage.rs`, bench/README).
const PURGE_DELAY_MS: &str = "10";

/// mimalloc reads its options from the environment once, when it starts (before `main`), and
/// the workspace forbids the `unsafe` call that would set one later. So the binary starts
/// itself again, once, with `MIMALLOC_PURGE_DELAY` set (same process id, same arguments and
/// descriptors); an operator's own setting is kept, and if the binary cannot be found again
/// it runs on with the allocator's defaults.
fn purge_freed_pages_soon() {
    const OPTION: &str = "MIMALLOC_PURGE_DELAY";
    if std::env::var_os(OPTION).is_some() {
        return;
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt as _;
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        // `exec` returns only if it failed; then this process goes on as it is.
        let _failed = std::process::Command::new(exe)
            .args(std::env::args_os().skip(1))
            .env(OPTION, PURGE_DELAY_MS)
            .exec();
    }
}

/// A failed command prints `error: …` (and the next step) itself and exits 1: returning the
/// error would let the runtime print a backtrace when `RUST_BACKTRACE` is set, which helps
/// no user.
#[tokio::main]
async fn run() -> std::process::ExitCode {
    quiet_on_closed_stdout();
    let cli = server::cli::Cli::parse();
    server::telemetry::init(&cli.log);
    match cli.run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{}", server::cli::explain(&error));
            std::process::ExitCode::FAILURE
        }
    }
}

/// `weft show … | head` closes stdout early; Rust's `println!` then panics. Exit quietly
/// with the conventional status of a process killed by SIGPIPE instead of printing a panic.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}
