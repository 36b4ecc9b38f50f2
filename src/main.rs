//! Entry point: parse flags, start logging, hand over to the library.

use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = server::cli::Cli::parse();
    server::telemetry::init(&cli.log);
    cli.run().await
}
