#!/usr/bin/env python3
"""Throughput and memory benchmark for weft (not a test: it prints figures).

In one run, on the same file and the same disk:
  * baseline 1: plain disk write of the file (copy with fsync), the floor for a durable upload;
  * baseline 2: weft's single-pass dual hash (BLAKE3 + SHA-256, the server's two-thread
    pipeline) over the cached file, the ceiling for anything that hashes every byte;
  * weft upload: `weft put` (stream + hash + fsync + publish a signed manifest);
  * weft verified download: `weft get` (server re-hashes while streaming, client re-hashes
    and writes + fsyncs the file).
Then it uploads and downloads a larger artifact and reports the peak RSS of the server and the
CLI, which must stay flat (far below the artifact size).

Figures are reported as MB/s and as ratios against the baselines measured in the same run,
because these machines are shared and noisy.

Usage: python3 bench/throughput.py [--size-mib 1024] [--memory-gib 3] [--keep]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(message):
    print(message, file=sys.stderr, flush=True)


def make_file(path, size):
    chunk = os.urandom(8 * 1024 * 1024)
    with open(path, "wb") as out:
        written = 0
        while written < size:
            part = chunk[: min(len(chunk), size - written)]
            out.write(part)
            written += len(part)
        out.flush()
        os.fsync(out.fileno())


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def copy_with_fsync(src, dst):
    with open(src, "rb") as source, open(dst, "wb") as target:
        while True:
            block = source.read(8 * 1024 * 1024)
            if not block:
                break
            target.write(block)
        target.flush()
        os.fsync(target.fileno())


def peak_rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return -1


class Weft:
    def __init__(self, binary, workdir):
        self.binary = binary
        self.env = dict(os.environ, WEFT_HOME=os.path.join(workdir, "home"), RUST_BACKTRACE="0")
        self.data = os.path.join(workdir, "data")
        self.server = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", self.data],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=self.env,
        )
        first = self.server.stdout.readline().strip()
        assert first.startswith("listening on "), first
        self.env["WEFT_SERVER"] = first.split(" ", 2)[2]
        token = ["--admin-token-file", os.path.join(self.data, "admin.token")]
        self.run(["keygen"])
        self.run(["admin", *token, "group", "create", "bench"])
        self.run(["admin", *token, "agent", "register", "--agent-id", "bench-agent"])
        self.run(["admin", *token, "member", "set", "bench", "bench-agent", "--role", "worker"])
        self.run(["login", "--agent-id", "bench-agent", "--group", "bench"])

    def run(self, args):
        """Runs the CLI; returns (stdout, peak RSS of exactly that process in KiB)."""
        child = subprocess.Popen([self.binary, *args], env=self.env, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        stdout, stderr = child.stdout.read(), child.stderr.read()
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        if child.returncode != 0:
            raise SystemExit(f"weft {' '.join(args)} failed:\n{stderr}")
        return stdout.strip(), usage.ru_maxrss

    def put(self, path):
        return self.run(["put", path, "--group", "bench", "--mission", "m", "--work-item", "w",
                         "--lease", "l", "--media-type", "application/octet-stream", "-q"])

    def get(self, digest, path):
        return self.run(["get", digest, "-o", path, "-q"])

    def stop(self):
        self.server.terminate()
        self.server.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--memory-gib", type=float, default=3)
    parser.add_argument("--keep", action="store_true")
    options = parser.parse_args()

    log("building the release binary …")
    subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    binary = os.path.join(target, "release", "weft")

    workdir = tempfile.mkdtemp(prefix="weft-bench-", dir=os.environ.get("WEFT_BENCH_DIR"))
    try:
        size = options.size_mib * 1024 * 1024
        source = os.path.join(workdir, "input.bin")
        log(f"writing a {options.size_mib} MiB input file …")
        make_file(source, size)

        t_disk, _ = timed(lambda: copy_with_fsync(source, os.path.join(workdir, "copy.bin")))
        os.remove(os.path.join(workdir, "copy.bin"))
        hash_args = [binary, "hash", source]
        subprocess.run(hash_args, check=True, capture_output=True)  # warm the page cache
        t_hash, _ = timed(lambda: subprocess.run(hash_args, check=True, capture_output=True))
        t_sha, _ = timed(lambda: subprocess.run(["sha256sum", source], check=True, capture_output=True))

        weft = Weft(binary, workdir)
        t_put, (digest, _) = timed(lambda: weft.put(source))
        output = os.path.join(workdir, "output.bin")
        t_get, _ = timed(lambda: weft.get(digest, output))
        assert os.path.getsize(output) == size
        os.remove(output)

        mb = size / 1e6
        rate = lambda seconds: mb / seconds
        print(f"artifact size                  {options.size_mib} MiB")
        print(f"plain disk write (fsync)       {rate(t_disk):8.0f} MB/s   (baseline)")
        print(f"dual hash, weft pipeline       {rate(t_hash):8.0f} MB/s   (baseline)")
        print(f"sha256sum (coreutils)          {rate(t_sha):8.0f} MB/s   (reference)")
        print(f"weft put  (upload + publish)   {rate(t_put):8.0f} MB/s   "
              f"= {t_disk / t_put:.2f}x disk write, {t_hash / t_put:.2f}x dual hash")
        print(f"weft get  (verified download)  {rate(t_get):8.0f} MB/s   "
              f"= {t_disk / t_get:.2f}x disk write, {t_hash / t_get:.2f}x dual hash")

        if options.memory_gib > 0:
            big_size = int(options.memory_gib * 1024 ** 3)
            big = os.path.join(workdir, "big.bin")
            log(f"writing a {options.memory_gib} GiB input file for the memory check …")
            os.remove(source)
            make_file(big, big_size)
            _, (big_digest, put_rss) = timed(lambda: weft.put(big))
            os.remove(big)
            _, (_, get_rss) = timed(lambda: weft.get(big_digest, os.path.join(workdir, "big-out.bin")))
            server_rss = peak_rss_kib(weft.server.pid)
            print(f"memory check: {options.memory_gib} GiB artifact uploaded and downloaded")
            print(f"  server peak RSS (VmHWM, whole run)   {server_rss / 1024:7.1f} MiB")
            print(f"  weft put peak RSS                    {put_rss / 1024:7.1f} MiB")
            print(f"  weft get peak RSS                    {get_rss / 1024:7.1f} MiB")
            peak = max(server_rss, put_rss, get_rss)
            print(f"  largest peak / artifact size         {peak * 1024 / big_size:.4f}")
        weft.stop()
    finally:
        if not options.keep:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            log(f"kept {workdir}")


if __name__ == "__main__":
    main()
