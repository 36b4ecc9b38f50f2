//! Structured logs (tracing) and the Prometheus metrics recorder.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Log flags shared by every subcommand.
#[derive(Clone, Debug, clap::Args)]
pub struct LogArgs {
    /// Log filter, in `RUST_LOG` syntax.
    #[arg(
        long = "log-level",
        env = "WEFT_LOG",
        default_value = "info",
        global = true
    )]
    pub level: String,
    /// Log as JSON lines instead of text.
    #[arg(long = "log-json", env = "WEFT_LOG_JSON", global = true)]
    pub json: bool,
}

/// Starts logging to stderr. stdout is kept for the answers commands print (and for the
/// `listening on` line the tests read).
pub fn init(args: &LogArgs) {
    let filter = tracing_subscriber::EnvFilter::try_new(&args.level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests start several servers in one process) is harmless.
    let _ = if args.json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// The process-wide metrics recorder; installed on first use.
pub fn metrics() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder was installed first; then ours stays empty.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}
