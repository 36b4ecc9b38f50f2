//! CPU accounting for `side_by_side.rs`: the user + system time of nginx (master and
//! workers), of `weft serve` and of the load generator itself, read from `/proc/<pid>/stat`
//! around each small phase, so the bench can print what each request costs in CPU on a
//! machine whose cores all three share.

/// CPU time (user + system) a set of processes has used, read from `/proc/<pid>/stat`
/// (clock ticks of 10 ms): what each server, and the load generator, spends per request.
pub(crate) struct Cpu(pub(crate) Vec<u32>);

impl Cpu {
    /// `pid` and its children (nginx's workers).
    pub(crate) fn of(pid: u32) -> Self {
        let mut pids = vec![pid];
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            if stat_fields(child).and_then(|f| f.get(1).and_then(|p| p.parse::<u32>().ok()))
                == Some(pid)
            {
                pids.push(child);
            }
        }
        Self(pids)
    }

    pub(crate) fn seconds(&self) -> f64 {
        let ticks: u64 = self
            .0
            .iter()
            .filter_map(|&pid| stat_fields(pid))
            .map(|fields| {
                // utime and stime, fields 14 and 15 of stat(5), 12th and 13th after `comm`.
                let field = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok());
                field(11).unwrap_or(0) + field(12).unwrap_or(0)
            })
            .sum();
        ticks as f64 / 100.0
    }
}

/// The fields of `/proc/<pid>/stat` after the command name (state, ppid, …).
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_owned).collect())
}

/// CPU seconds of nginx, weft and the load generator at one instant.
#[derive(Clone, Copy)]
pub(crate) struct Sample {
    nginx: f64,
    weft: f64,
    client: f64,
}

pub(crate) struct Probes {
    pub(crate) nginx: Cpu,
    pub(crate) weft: Cpu,
    pub(crate) client: Cpu,
}

impl Probes {
    pub(crate) fn sample(&self) -> Sample {
        Sample {
            nginx: self.nginx.seconds(),
            weft: self.weft.seconds(),
            client: self.client.seconds(),
        }
    }
}

/// Microseconds of CPU per request of a phase of `count` requests, on the server it ran
/// against (`weft` or not) and in the load generator.
pub(crate) fn per_request(before: Sample, after: Sample, count: usize, weft: bool) -> (f64, f64) {
    let server = if weft {
        after.weft - before.weft
    } else {
        after.nginx - before.nginx
    };
    let us = |seconds: f64| seconds * 1e6 / count as f64;
    (us(server), us(after.client - before.client))
}

/// nginx's un-synced 4 KiB PUT costs about 100 µs of server CPU here; after runs that created
/// and deleted tens of thousands of files it costs several times that, in ext4's inode
/// allocator (bench/README), and every ratio against it flatters weft. Names such rounds.
pub(crate) fn warn_if_slow_file_system(
    cpu: &std::collections::BTreeMap<&'static str, (Vec<f64>, Vec<f64>)>,
) {
    const SLOW_US: f64 = 250.0;
    let Some((server, _)) = cpu.get("nginx 4 KiB PUT (no fsync)") else {
        return;
    };
    let slow: Vec<String> = server
        .iter()
        .enumerate()
        .filter(|(_, us)| **us > SLOW_US)
        .map(|(round, us)| format!("round {} ({us:.0} µs)", round + 1))
        .collect();
    if !slow.is_empty() {
        println!(
            "warning: nginx's PUT cost more than {SLOW_US:.0} µs of CPU in {}: the file system was in its slow state \
             (bench/README), so the PUT ratios of those rounds flatter weft; wait a few minutes and run again",
            slow.join(", ")
        );
    }
}

/// What the CPU per request alone allows: the three processes share the machine's cores, so
/// a phase whose requests cost `server + client` µs of CPU cannot run faster than the cores
/// divided by that, however well it overlaps its waits. Per round, the ratio of weft's bound
/// to nginx's (nginx's cost over weft's) is the most a ratio of rates could be at these costs;
/// where the measured ratio is near it, only cheaper requests can raise it.
pub(crate) fn print_ceilings(
    cpu: &std::collections::BTreeMap<&'static str, (Vec<f64>, Vec<f64>)>,
    pairs: &[(&str, &str, &str)],
    median: impl Fn(Vec<f64>) -> f64,
) {
    println!(
        "what the CPU per request allows (per round: nginx's server + load generator µs over weft's; median):"
    );
    for (label, weft, nginx) in pairs {
        let (Some((weft_server, weft_client)), Some((nginx_server, nginx_client))) =
            (cpu.get(weft), cpu.get(nginx))
        else {
            continue;
        };
        let rounds: Vec<f64> = (0..weft_server.len().min(nginx_server.len()))
            .map(|r| (nginx_server[r] + nginx_client[r]) / (weft_server[r] + weft_client[r]))
            .collect();
        let shown: Vec<String> = rounds.iter().map(|v| format!("{v:.2}")).collect();
        println!(
            "  {label:<58} {:>6.2}x   rounds: {}",
            median(rounds.clone()),
            shown.join(" ")
        );
    }
}
