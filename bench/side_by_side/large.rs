//! The large transfers of `side_by_side.rs`: one random file of `SBS_LARGE_MIB` MiB, and per
//! round `dd conv=fsync` of it (the disk's limit for a durable write), its PUT through `curl`
//! to nginx and to weft (durable), its publication, then `SBS_LARGE_GETS` pairs of GETs,
//! nginx's then weft's (verified), with each server's CPU per GET.

use std::path::{Path, PathBuf};

use weft_api::digest::Digests;

use super::cpu::{Probes, per_request};
use super::{Figures, Worker, manifest, median, run, timed_mb_per_s};

/// The file every round sends, and its digests.
pub(crate) struct Large {
    path: PathBuf,
    digests: Digests,
    gets: usize,
}

/// What a round talks to.
pub(crate) struct Servers<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) nginx: &'a str,
    pub(crate) weft: &'a str,
    pub(crate) runtime: &'a tokio::runtime::Runtime,
    pub(crate) client: &'a reqwest::Client,
    pub(crate) probes: &'a Probes,
}

impl Large {
    /// Writes `mib` MiB of random bytes under `dir`, hashing them as they are written.
    pub(crate) fn create(dir: &Path, mib: u64, gets: usize) -> Self {
        let path = dir.join("large.bin");
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).expect("large file"));
        let mut block = vec![0u8; 1 << 20];
        for _ in 0..mib {
            block.iter_mut().for_each(|b| *b = rand::random());
            std::io::Write::write_all(&mut file, &block).expect("write");
        }
        std::io::Write::flush(&mut file).expect("flush");
        let digests = digests_of(&path);
        Self {
            path,
            digests,
            gets,
        }
    }

    /// Makes the file new bytes for `round`: weft answers a PUT of bytes its uploader can
    /// already see by hashing them without writing (`hash_only`), so a second round sending
    /// the same file measured no durable write at all (rounds 2 and 3 of every run before
    /// stop 36). The first eight bytes become the round's number.
    fn renew(&mut self, round: usize) {
        use std::os::unix::fs::FileExt as _;
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&self.path)
            .expect("large file");
        file.write_all_at(&(round as u64).to_le_bytes(), 0)
            .expect("renew");
        self.digests = digests_of(&self.path);
    }

    /// One round of the large transfers; its figures and ratios go to `figures`.
    pub(crate) fn round(
        &mut self,
        round: usize,
        servers: &Servers<'_>,
        worker: &Worker,
        figures: &mut Figures,
    ) {
        let Servers {
            dir,
            nginx,
            weft,
            runtime,
            client,
            probes,
        } = servers;
        if round > 0 {
            self.renew(round);
        }
        let bytes = self.digests.size;
        let digest = self.digests.blake3.to_string();
        let path = self.path.to_str().expect("utf-8 path");
        let auth = format!("Authorization: Bearer {}", worker.token);
        let dd_out = dir.join("dd.out");
        let dd = timed_mb_per_s(bytes, || {
            run(
                "dd",
                &[
                    &format!("if={path}"),
                    &format!("of={}", dd_out.display()),
                    "bs=8M",
                    "conv=fsync",
                    "status=none",
                ],
            )
        });
        let _ = std::fs::remove_file(&dd_out);
        let nginx_large = format!("{nginx}/dav/r{round}/large");
        let nginx_put = timed_mb_per_s(bytes, || run("curl", &["-sSf", "-T", path, &nginx_large]));
        let weft_put = timed_mb_per_s(bytes, || {
            run(
                "curl",
                &[
                    "-sSf",
                    "-T",
                    path,
                    "-H",
                    &auth,
                    &format!("{weft}/v1/blobs/{digest}"),
                ],
            )
        });
        // Published, then read back verified through the content route.
        let envelope = manifest(worker, &self.digests);
        runtime.block_on(async {
            let answer = client
                .post(format!("{weft}/v1/artifacts"))
                .bearer_auth(&worker.token)
                .json(&envelope)
                .send()
                .await
                .expect("publish");
            assert!(answer.status().is_success(), "publish: {}", answer.status());
        });
        // One GET of 1 GiB takes well under a second, so a burst of the machine's other load
        // moves a single pair by tens of percent: `SBS_LARGE_GETS` pairs, each nginx's then
        // weft's, and the round's figures are their medians.
        let content = format!("{weft}/v1/artifacts/{digest}/content");
        let (mut nginx_gets, mut weft_gets, mut get_ratios) = (vec![], vec![], vec![]);
        for _ in 0..self.gets {
            let before = probes.sample();
            let nginx_get = timed_mb_per_s(bytes, || {
                run("curl", &["-sSf", "-o", "/dev/null", &nginx_large])
            });
            let between = probes.sample();
            let weft_get = timed_mb_per_s(bytes, || {
                run("curl", &["-sSf", "-o", "/dev/null", "-H", &auth, &content])
            });
            let after = probes.sample();
            figures
                .nginx_large_get_cpu
                .push(per_request(before, between, 1, false).0 / 1e3);
            figures
                .weft_large_get_cpu
                .push(per_request(between, after, 1, true).0 / 1e3);
            nginx_gets.push(nginx_get);
            weft_gets.push(weft_get);
            get_ratios.push(weft_get / nginx_get);
        }
        let _ = std::fs::remove_file(dir.join(format!("nginx/dav/r{round}/large")));
        figures.dd.push(dd);
        figures.nginx_large_put.push(nginx_put);
        figures.weft_large_put.push(weft_put);
        figures.nginx_large_get.push(median(nginx_gets));
        figures.weft_large_get.push(median(weft_gets));
        figures.ratio(
            "1 GiB PUT: weft (durable) / dd conv=fsync (goal >= 0.9)",
            weft_put / dd,
        );
        figures.ratio("1 GiB PUT: weft (durable) / nginx", weft_put / nginx_put);
        figures.ratio(
            "1 GiB GET: weft (verified) / nginx (goal >= 0.8)",
            median(get_ratios),
        );
    }
}

/// The file's digests, read in 1 MiB blocks.
fn digests_of(path: &Path) -> Digests {
    use std::io::Read as _;
    let mut file = std::fs::File::open(path).expect("large file");
    let mut hasher = blake3::Hasher::new();
    let mut sha = <sha2::Sha256 as sha2::Digest>::new();
    let mut block = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut block).expect("read");
        if n == 0 {
            break;
        }
        hasher.update(&block[..n]);
        sha2::Digest::update(&mut sha, &block[..n]);
        size += n as u64;
    }
    Digests {
        blake3: weft_api::ArtifactId(*hasher.finalize().as_bytes()),
        sha256: weft_api::digest::Sha256Digest(sha2::Digest::finalize(sha).into()),
        size,
    }
}
