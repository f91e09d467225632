#!/usr/bin/env python3
"""Hostile clients against `trainguard serve --dev` (release binary, shipped limits), loopback
only, bounded loops. Measures what docs/benchmarks.md ("Hostile clients") records:

  big     one 7 MiB CREATE whose podSpecOverrides is [1,1,...] (3.5 M items): answer size, peak RSS
          (VmHWM), the slowest /healthz and /readyz while it is decoded
  unread  32 connections from one address each POST a 256 KiB review of that shape and never read:
          once (the answers fit in the kernel's buffers) and pipelined until the server's writes
          block (dropped at --write-timeout); RSS and open connections over time
  idle    16 addresses x 32 keep-alive connections (127.0.0.1-16), one request each, then idle
          15 s; then a new client from 127.0.0.100: time to its answer

Usage: benches/hostile.py [--scenario big,unread,idle] (builds nothing: run
`cargo build --release --bin trainguard` first; CARGO_TARGET_DIR is honoured).
"""
import argparse
import http.client
import os
import re
import socket
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
BIN = os.path.join(TARGET, "release", "trainguard")
PATH = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
PORT, ADMIN = 19801, 18801


def review(items):
    listed = "[" + ",".join(["1"] * items) + "]"
    return (
        '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"0c6f8a8e-1d1b-4a7e-9a55-0000000000b1",'
        '"kind":{"group":"trainer.kubeflow.org","version":"v1alpha1","kind":"TrainJob"},'
        '"resource":{"group":"trainer.kubeflow.org","version":"v1alpha1","resource":"trainjobs"},'
        '"name":"llama","namespace":"ml-team","operation":"CREATE","userInfo":{"username":"mallory"},'
        '"object":{"apiVersion":"trainer.kubeflow.org/v1alpha1","kind":"TrainJob",'
        '"metadata":{"name":"llama","namespace":"ml-team"},'
        '"spec":{"runtimeRef":{"name":"torch"},"podSpecOverrides":' + listed + "}}}}"
    ).encode()


def request_bytes(body):
    head = (f"POST {PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


def hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def open_connections():
    conn = http.client.HTTPConnection("127.0.0.1", ADMIN, timeout=5)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    m = re.search(r'trainguard_open_connections\{listener="webhook"\} (\d+)', text)
    return int(m.group(1)) if m else -1


class Probes(threading.Thread):
    """Polls /healthz and /readyz from 127.0.0.2 every 100 ms; keeps the slowest answer."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.slowest = 0.0
        self.failed = 0

    def run(self):
        while not self.stop.is_set():
            for path in ("/healthz", "/readyz"):
                started = time.time()
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", ADMIN, timeout=10, source_address=("127.0.0.2", 0))
                    conn.request("GET", path)
                    ok = conn.getresponse().status == 200
                    conn.close()
                except OSError:
                    ok = False
                self.failed += 0 if ok else 1
                self.slowest = max(self.slowest, time.time() - started)
            time.sleep(0.1)


def tls_context(work):
    ctx = ssl.create_default_context(cafile=os.path.join(work, "ca.crt"))
    ctx.check_hostname = False
    return ctx


def connect(ctx, source):
    raw = socket.create_connection(("127.0.0.1", PORT), timeout=30, source_address=(source, 0))
    return ctx.wrap_socket(raw, server_hostname="localhost")


def read_answer(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            return buf
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    length = int(re.search(rb"content-length: (\d+)", head.lower()).group(1))
    while len(rest) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head + b"\r\n\r\n" + rest


def big(proc, ctx):
    body = review(3_500_000)
    probes = Probes()
    probes.start()
    started = time.time()
    sock = connect(ctx, "127.0.0.1")
    sock.sendall(request_bytes(body))
    answer = read_answer(sock)
    took = time.time() - started
    sock.close()
    time.sleep(0.5)
    probes.stop.set()
    probes.join()
    status = answer.split(b" ", 2)[1].decode()
    size = len(answer.split(b"\r\n\r\n", 1)[1])
    print(f"big: {len(body)} byte review -> HTTP {status}, answer {size} bytes in {took:.2f} s; "
          f"peak RSS {hwm_kib(proc.pid) / 1024:.0f} MiB; slowest probe {probes.slowest * 1000:.0f} ms, "
          f"{probes.failed} probes failed")


def unread(proc, ctx, pipelined):
    body = review(128 * 1024)  # 256 KiB
    request = request_bytes(body)
    socks = []
    for _ in range(32):
        sock = connect(ctx, "127.0.0.1")
        sock.setblocking(False)
        socks.append(sock)
    started = time.time()
    # Once, or (pipelined) up to 200 times each until the server stops reading: bounded.
    for sock in socks:
        for _ in range(200 if pipelined else 1):
            try:
                sock.sendall(request)
            except (BlockingIOError, ssl.SSLWantWriteError, OSError):
                break
    what = "pipelined" if pipelined else "once"
    dropped_at = None
    for second in range(0, 61):
        rss = rss_kib(proc.pid) / 1024
        conns = open_connections()
        if second in (0, 10, 30, 60) or (conns == 0 and dropped_at is None):
            print(f"unread ({what}): t={time.time() - started:4.0f} s RSS {rss:.0f} MiB, open connections {conns}")
        if conns == 0 and dropped_at is None:
            dropped_at = time.time() - started
            break
        time.sleep(1)
    print(f"unread ({what}): peak RSS {hwm_kib(proc.pid) / 1024:.0f} MiB; dropped "
          + (f"after {dropped_at:.0f} s" if dropped_at is not None else "not within 60 s (idle timeout 120 s)"))
    for sock in socks:
        sock.close()


def idle(proc, ctx):
    ok = request_bytes(review(1))
    socks = []
    for address in range(1, 17):
        for _ in range(32):
            sock = connect(ctx, f"127.0.0.{address}")
            sock.sendall(ok)
            read_answer(sock)
            socks.append(sock)
    print(f"idle: {len(socks)} keep-alive connections, open {open_connections()}; idle 15 s")
    time.sleep(15)
    started = time.time()
    sock = connect(ctx, "127.0.0.100")
    sock.sendall(ok)
    answer = read_answer(sock)
    took = time.time() - started
    print(f"idle: new client answered HTTP {answer.split(b' ', 2)[1].decode()} in {took * 1000:.0f} ms; "
          f"open {open_connections()}; RSS {rss_kib(proc.pid) / 1024:.0f} MiB")
    sock.close()
    for s in socks:
        s.close()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--scenario", default="big,unread,idle")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        for scenario in args.scenario.split(","):
            proc = subprocess.Popen([BIN, "serve", "--dev", "--dev-dir", work, "--bind", f"127.0.0.1:{PORT}",
                                     "--admin-bind", f"127.0.0.1:{ADMIN}"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_port(PORT)
                wait_port(ADMIN)
                ctx = tls_context(work)
                if scenario == "big":
                    big(proc, ctx)
                elif scenario == "unread":
                    unread(proc, ctx, pipelined=False)
                    unread(proc, ctx, pipelined=True)
                elif scenario == "idle":
                    idle(proc, ctx)
            finally:
                proc.terminate()
                proc.wait(timeout=30)


if __name__ == "__main__":
    main()
