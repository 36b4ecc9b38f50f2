//! Crash campaign (not a test; `cargo bench --bench crash`, release): random SIGKILLs of the
//! real `weft serve` under mixed load, a restart after each, and an oracle that re-reads every
//! acknowledged write, re-hashes the chain and runs `weft fsck` (issue #15). The campaign
//! itself is `bench/crash/mod.rs`, shared with the e2e test `tests/e2e/crash.rs`.
//!
//! Settings (environment): `CRASH_KILLS` (1000), `CRASH_SEED` (random; printed, so a run can
//! be repeated), `CRASH_CHECK_EVERY` (10: oracle runs), `CRASH_FSCK_EVERY` (10), `CRASH_SAMPLE`
//! (200 already checked items of each kind read again per oracle run), `CRASH_BURST_MS`
//! (`20-400`), `WEFT_BENCH_DIR` (where the data directory goes; a temp dir under it, removed
//! at the end unless `CRASH_KEEP=1`). Exits 1 on any loss.

#[path = "crash/mod.rs"]
mod campaign;

fn setting<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let seed = setting("CRASH_SEED", rand::random::<u64>());
    let burst_ms = std::env::var("CRASH_BURST_MS")
        .ok()
        .and_then(|text| {
            let (low, high) = text.split_once('-')?;
            Some((low.parse().ok()?, high.parse().ok()?))
        })
        .unwrap_or((20, 400));
    let parent = std::env::var_os("WEFT_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::Builder::new()
        .prefix("weft-crash-")
        .tempdir_in(parent)
        .expect("a temporary directory");
    let settings = campaign::Settings {
        kills: setting("CRASH_KILLS", 1000),
        seed,
        check_every: setting("CRASH_CHECK_EVERY", 10usize).max(1),
        fsck_every: setting("CRASH_FSCK_EVERY", 10usize).max(1),
        burst_ms,
        sample: setting("CRASH_SAMPLE", 200),
        dir: dir.path().to_path_buf(),
        phantom: false,
        verbose: true,
    };
    eprintln!(
        "crash campaign: seed {seed} (CRASH_SEED={seed} repeats the plan), {} kills, bursts {}-{} ms, oracle every {} kills, fsck every {}, data in {}",
        settings.kills,
        burst_ms.0,
        burst_ms.1,
        settings.check_every,
        settings.fsck_every,
        dir.path().display()
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let report = match runtime.block_on(campaign::run(settings)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("the campaign could not start: {e}");
            std::process::exit(2);
        }
    };
    print!("{}", report.render());
    if setting("CRASH_KEEP", 0u8) == 1 {
        eprintln!("kept {}", dir.keep().display());
    }
    if !report.losses.is_empty() {
        std::process::exit(1);
    }
}
