#!/usr/bin/env python3
"""Soak: two trainguard replicas on loopback under steady load for N minutes, the serving
certificate rotating every few seconds (kubelet-style `..data` symlink swaps), and one replica at
a time stopped with SIGTERM and restarted. The load client spreads requests over both replicas
and, like the API server, retries on a refused or closed connection. Reports requests sent,
requests failed (must be 0) and the RSS growth of each replica instance.

Usage: benches/soak.py [--minutes N] [--rotate-every S] [--restart-every S] [--clients N]
(`make soak` runs it; exits 1 on any failed request.)
"""
import argparse
import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from procutil import rss_kib, wait_port  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
BIN = os.path.join(TARGET, "dist", "trainguard")
PATH = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
BODY = open(os.path.join(ROOT, "fixtures/bench/small-update.review.json"), "rb").read()
UID = json.loads(BODY)["request"]["uid"]
PORTS = [19701, 19702]
ADMIN = [18701, 18702]


class Volume:
    """A directory laid out like a Secret volume: tls.crt -> ..data/tls.crt -> ..<version>/tls.crt."""

    def __init__(self, root):
        self.root = root
        self.generation = 0
        self.rotate()
        for name in ("tls.crt", "tls.key"):
            os.symlink(f"..data/{name}", os.path.join(root, name))

    def rotate(self):
        self.generation += 1
        version = f"..v{self.generation:05d}"
        out = os.path.join(self.root, version)
        subprocess.run([BIN, "certs", "--service", "trainguard-webhook", "--namespace", "soak", "--out", out],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        tmp = os.path.join(self.root, "..data_tmp")
        if os.path.lexists(tmp):
            os.unlink(tmp)
        os.symlink(version, tmp)
        os.rename(tmp, os.path.join(self.root, "..data"))


class Replica:
    def __init__(self, index, volume):
        self.index, self.volume, self.proc, self.instances = index, volume, None, []

    def start(self):
        self.proc = subprocess.Popen(
            [BIN, "serve", "--offline", "--bind", f"127.0.0.1:{PORTS[self.index]}",
             "--admin-bind", f"127.0.0.1:{ADMIN[self.index]}",
             "--tls-cert", os.path.join(self.volume.root, "tls.crt"),
             "--tls-key", os.path.join(self.volume.root, "tls.key"),
             "--cert-reload-interval", "500ms", "--drain-delay", "1s", "--shutdown-grace", "10s"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(PORTS[self.index])
        time.sleep(1)
        self.instances.append({"pid": self.proc.pid, "rss_start": rss_kib(self.proc.pid), "rss_end": None})

    def stop(self):
        self.instances[-1]["rss_end"] = rss_kib(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=30)
        if code != 0:
            raise SystemExit(f"replica {self.index} exited {code} after SIGTERM")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = self.failed = self.retries = 0
        self.failures = []

    def add(self, ok, retries, why=None):
        with self.lock:
            self.sent += 1
            self.retries += retries
            if not ok:
                self.failed += 1
                if len(self.failures) < 10:
                    self.failures.append(why)


def client(worker, stop, stats):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # availability is measured here; trust is tested in tests/
    conns = [None, None]
    n = worker
    while not stop.is_set():
        n += 1
        why = None
        for attempt in range(6):
            i = (n + attempt) % 2
            try:
                if conns[i] is None:
                    conns[i] = http.client.HTTPSConnection("127.0.0.1", PORTS[i], context=ctx, timeout=10)
                conns[i].request("POST", PATH, BODY, {"Content-Type": "application/json"})
                resp = conns[i].getresponse()
                data = resp.read()
                if resp.status == 200 and json.loads(data)["response"]["uid"] == UID:
                    stats.add(True, attempt)
                    break
                why = f"HTTP {resp.status}: {data[:200]!r}"
                stats.add(False, attempt, why)
                break
            except (OSError, http.client.HTTPException) as e:
                why = f"{type(e).__name__}: {e}"
                if conns[i] is not None:
                    conns[i].close()
                conns[i] = None
                time.sleep(0.05 * attempt)
        else:
            stats.add(False, 6, why)
        time.sleep(0.002)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=2)
    ap.add_argument("--rotate-every", type=float, default=3)
    ap.add_argument("--restart-every", type=float, default=10)
    ap.add_argument("--clients", type=int, default=4)
    args = ap.parse_args()
    volume = Volume(tempfile.mkdtemp(prefix="trainguard-soak-"))
    replicas = [Replica(i, volume) for i in range(2)]
    for r in replicas:
        r.start()
    stats, stop = Stats(), threading.Event()
    workers = [threading.Thread(target=client, args=(w, stop, stats), daemon=True) for w in range(args.clients)]
    for w in workers:
        w.start()
    end = time.time() + args.minutes * 60
    next_rotate, next_restart, turn, restarts = time.time() + args.rotate_every, time.time() + args.restart_every, 0, 0
    while time.time() < end:
        now = time.time()
        if now >= next_rotate:
            volume.rotate()
            next_rotate = now + args.rotate_every
        if now >= next_restart:
            replicas[turn].stop()
            replicas[turn].start()
            restarts += 1
            turn = 1 - turn
            next_restart = time.time() + args.restart_every
        time.sleep(0.1)
    stop.set()
    for w in workers:
        w.join(timeout=15)
    for r in replicas:
        r.stop()
    instances = [i for r in replicas for i in r.instances]
    growth = max((i["rss_end"] - i["rss_start"]) / 1024 for i in instances)
    longest = max(instances, key=lambda i: i["rss_end"] - i["rss_start"])
    print(f"soak: {args.minutes} min, 2 replicas, {args.clients} clients, cert rotated every {args.rotate_every}s "
          f"({volume.generation - 1} rotations), a replica restarted every {args.restart_every}s ({restarts} restarts)")
    print(f"soak: requests sent {stats.sent}, failed {stats.failed}, retried connections {stats.retries}")
    print(f"soak: largest RSS growth of one replica instance {growth:.1f} MiB "
          f"({longest['rss_start'] / 1024:.1f} -> {longest['rss_end'] / 1024:.1f} MiB)")
    for why in stats.failures:
        print(f"soak: failure: {why}")
    sys.exit(1 if stats.failed else 0)


if __name__ == "__main__":
    main()
