//! Structured logs (tracing) and the Prometheus metrics recorder.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

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
        // Colour codes only for a person at a terminal, never in a file or a log collector.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    // A second init (tests start several servers in one process) is harmless.
    let _ = if args.json {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
}

/// Requests by matched route template (never the raw path), method and status.
pub const HTTP_REQUESTS: &str = "weft_http_requests_total";
/// Request latency until the response head, by the same labels, as a Prometheus histogram.
pub const HTTP_DURATION: &str = "weft_http_request_duration_seconds";

/// A counter's name, the labels it starts with, and its help text.
pub(crate) type Counter = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

/// Every counter weft counts, with its `# HELP` text. Each is registered at zero when the
/// recorder is installed, so a scrape sees it before its first event (`rate()` needs that).
/// Labelled counters start with the label set named here.
pub(crate) const COUNTERS: &[Counter] = &[
    (
        "weft_upload_bytes_total",
        &[],
        "Bytes received on blob upload routes.",
    ),
    (
        "weft_uploads_total",
        &[("outcome", "ok")],
        "Blob uploads by outcome: ok, or the refusal code.",
    ),
    (
        "weft_download_bytes_total",
        &[],
        "Bytes of artifact content sent.",
    ),
    (
        "weft_verification_failures_total",
        &[],
        "Downloads whose bytes did not match their digest.",
    ),
    (
        "weft_integrity_failures_total",
        &[],
        "Stored blobs found not to match their address when read.",
    ),
    (
        "weft_gc_disposed_blobs_total",
        &[],
        "Blobs whose bytes collection disposed of under a retention policy (issue #46).",
    ),
    (
        "weft_gc_disposed_bytes_total",
        &[],
        "Bytes collection disposed of under a retention policy.",
    ),
    (
        "weft_gc_disposed_records_total",
        &[],
        "Signed manifests and Evidence records collection disposed of under a retention policy.",
    ),
    (
        "weft_outboard_failures_total",
        &[],
        "Range reads whose outboard failed verification (answered by the full re-hash).",
    ),
    (
        "weft_outboard_rebuilds_total",
        &[],
        "Outboards rebuilt from a full read of their blob (one at a time per blob, shared).",
    ),
];

/// Latency buckets in seconds, from a cached read to a slow lineage query or upload.
const DURATION_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// The process-wide metrics recorder; installed on first use, with every metric described
/// and every counter at zero.
pub fn metrics() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(HTTP_DURATION.to_owned()), DURATION_BUCKETS)
                .expect("the bucket list is not empty")
                .build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder was installed first; then ours stays empty.
            let _ = metrics::set_global_recorder(recorder);
            describe();
            handle
        })
        .clone()
}

/// `# HELP` for every metric, and every counter registered at zero.
fn describe() {
    for (name, labels, help) in COUNTERS {
        metrics::describe_counter!(*name, *help);
        let labels: Vec<metrics::Label> = labels
            .iter()
            .map(|(key, value)| metrics::Label::new(*key, *value))
            .collect();
        metrics::counter!(*name, labels).increment(0);
    }
    metrics::describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests by route template, method and status."
    );
    metrics::describe_histogram!(
        HTTP_DURATION,
        "HTTP request latency until the response head, by route template, method and status."
    );
    metrics::describe_gauge!(
        "weft_group_usage_bytes",
        "Bytes each Group holds (its manifests' and uploads' distinct blobs, disposed ones left out), as of the last collection round (issue #46)."
    );
    metrics::describe_gauge!(
        "weft_group_usage_artifacts",
        "Distinct blobs each Group holds, as of the last collection round."
    );
}
