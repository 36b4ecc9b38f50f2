//! Entry point: parse flags, start logging, hand over to the library.

use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    quiet_on_closed_stdout();
    let cli = server::cli::Cli::parse();
    server::telemetry::init(&cli.log);
    cli.run().await
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
