//! Entry point: parse flags, start logging, hand over to the library.

use clap::Parser as _;

/// mimalloc instead of glibc's malloc: a small request allocates a few dozen times, and
/// glibc's arenas cost about a tenth of a 4 KiB GET's CPU (issue #15).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A failed command prints `error: …` (and the next step) itself and exits 1: returning the
/// error would let the runtime print a backtrace when `RUST_BACKTRACE` is set, which helps
/// no user.
#[tokio::main]
async fn main() -> std::process::ExitCode {
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
