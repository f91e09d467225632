#!/usr/bin/env python3
"""User-space instructions per request, trainguard beside the bare TLS baseline, under callgrind.

load.py measures CPU time under a closed-loop load generator, which on a small machine shares
the cores with the servers: its ratios move by 10-20 % between identical runs. This script counts
instructions instead, which do not depend on what else the machine is doing, so a change of a
few percent shows and a before/after pair needs one run each.

Each server runs under `valgrind --tool=callgrind` twice per payload, answering N1 and then N2
requests over one keep-alive connection (curl). Start-up, the TLS handshake and shutdown are the
same in both runs, so (total(N2) - total(N1)) / (N2 - N1) is what one more request costs: the
HTTP parse, the TLS record, the body, the decision and the answer, all in user space. Kernel
time (syscalls, wake-ups) is not counted; load.py still measures that.

With --parts it measures the answer alone instead, without TLS, HTTP or the runtime: the
instructions one review costs to skip the whole body without reading it (the least any decoder
that looks at every byte once can cost), to decode it into the rules' views, and to answer it
whole (decode, rules, response bytes). `benches/review_parts.rs` repeats one part N1 and then N2
times under callgrind, and the difference is divided as above.

Usage: benches/instructions.py [--payloads small,gated,...] [--protocols http1,http2]
                               [--requests 20,220] [--parts] [--out FILE]
Needs valgrind and curl (installed with apt-get when missing), and the dist builds that load.py
uses (`cargo build --profile dist --bin trainguard --example baseline_server`); --parts needs
`cargo build --profile dist --example review_parts`.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from load import ALL_PAYLOADS, BASELINE, EXPECTED, FIXTURES, PATH, ROOT, TARGET, TRAINGUARD, derived_payloads  # noqa: E402
from procutil import wait_port, write_report  # noqa: E402


def ensure_tools():
    missing = [pkg for tool, pkg in [("valgrind", "valgrind"), ("curl", "curl")] if shutil.which(tool) is None]
    if missing:
        print(f"installing {' '.join(missing)}", file=sys.stderr)
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", *missing], check=True)


def certificates(work):
    """The dev certificates trainguard writes (the baseline serves the same pair)."""
    proc = subprocess.Popen([TRAINGUARD, "serve", "--dev", "--dev-dir", work, "--bind", "127.0.0.1:19543",
                             "--admin-bind", "127.0.0.1:19544"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(19543)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def instructions(server, proto, body, requests, work, port):
    """Total user-space instructions of one server run that answers `requests` requests."""
    out_file = os.path.join(work, f"callgrind.{server}.{requests}.out")
    h2 = ["--http2"] if proto == "http2" else []
    if server == "trainguard":
        cmd = [TRAINGUARD, "serve", "--dev", "--dev-dir", work, "--bind", f"127.0.0.1:{port}",
               "--admin-bind", f"127.0.0.1:{port + 1}"] + h2
    else:
        cmd = [BASELINE, f"127.0.0.1:{port}", os.path.join(work, "tls.crt"), os.path.join(work, "tls.key")] + h2
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", *cmd],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, timeout=120)
        url = f"https://localhost:{port}{PATH}"
        answers = subprocess.run(
            ["curl", "-sS", "--http2" if proto == "http2" else "--http1.1", "--cacert", os.path.join(work, "ca.crt"),
             "-H", "Content-Type: application/json", "--data-binary", f"@{body}", *[url] * requests],
            capture_output=True, text=True, check=True).stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    return answers, summary(out_file)


def summary(out_file):
    with open(out_file) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    raise SystemExit(f"{out_file}: no instruction total")


def review_parts(payloads, out):
    """The parts table: instructions per review of skipping, decoding and answering each payload."""
    binary = os.path.join(TARGET, "dist", "examples", "review_parts")
    if not os.path.exists(binary):
        raise SystemExit(f"{binary} is missing: cargo build --profile dist --example review_parts")
    rows = []
    for payload in payloads:
        # Repetitions per run: a large body costs about thirty times a small one.
        n1, n2 = (5, 55) if payload in ("large", "restamped") else (50, 550)
        costs = {}
        with tempfile.TemporaryDirectory(prefix="trainguard-parts-") as work:
            for part in ["skip", "decode", "review"]:
                totals = []
                for n in (n1, n2):
                    out_file = os.path.join(work, f"callgrind.{part}.{n}.out")
                    subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}", binary, part,
                                    payload, str(n)], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                    totals.append(summary(out_file))
                costs[part] = (totals[1] - totals[0]) / (n2 - n1)
                print(f"{payload} {part}: {costs[part]:,.0f} instructions per review", file=sys.stderr)
        rows.append((payload, costs))
    lines = ["Command: `benches/instructions.py --parts --payloads " + ",".join(payloads) + "` (user-space instructions per review "
             "under callgrind, without TLS, HTTP or the runtime; `benches/review_parts.rs`)", "",
             "| payload | skip the whole body | decode | whole answer | answer ÷ skip |", "|---|---|---|---|---|"]
    for payload, c in rows:
        lines.append(f"| {payload} | {c['skip'] / 1000:,.1f}k | {c['decode'] / 1000:,.1f}k | {c['review'] / 1000:,.1f}k | "
                     f"{c['review'] / c['skip']:.2f}× |")
    write_report(out, lines)


def check(answers, requests, allowed):
    got = re.findall(r'"allowed":(true|false)', answers)
    want = ["true" if allowed else "false"] * requests
    if got != want:
        raise SystemExit(f"unexpected answers: {len(got)} of {requests}, allowed {sorted(set(got))}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--payloads", default=",".join(ALL_PAYLOADS), help="comma-separated subset of " + ",".join(ALL_PAYLOADS))
    ap.add_argument("--protocols", default="http1", help="comma-separated: http1, http2")
    ap.add_argument("--requests", default="20,220", help="N1,N2: requests in the short and the long run")
    ap.add_argument("--parts", action="store_true",
                    help="measure skipping, decoding and answering each payload instead of the servers")
    ap.add_argument("--out", help="the report (default: instructions-results.md, or instructions-parts.md with "
                                  "--parts, in the target directory)")
    args = ap.parse_args()
    args.out = args.out or os.path.join(TARGET, "instructions-parts.md" if args.parts else "instructions-results.md")
    protocols = args.protocols.split(",")
    if not set(protocols) <= {"http1", "http2"}:
        ap.error("--protocols takes http1 and http2")
    n1, n2 = map(int, args.requests.split(","))
    if not 0 < n1 < n2:
        ap.error("--requests N1,N2 needs 0 < N1 < N2")
    ensure_tools()
    if args.parts:
        payloads = args.payloads.split(",")
        if not set(payloads) <= set(ALL_PAYLOADS):
            ap.error("--payloads takes " + ",".join(ALL_PAYLOADS))
        review_parts(payloads, args.out)
        return
    work = tempfile.mkdtemp(prefix="trainguard-instructions-")
    try:
        certificates(work)
        available = {k: os.path.join(ROOT, v) for k, v in FIXTURES.items()}
        available.update(derived_payloads(work))
        payloads = {k: available[k] for k in args.payloads.split(",")}
        rows = []
        for proto in protocols:
            for payload, body in payloads.items():
                per_request = {}
                for server in ["trainguard", "baseline"]:
                    totals = []
                    for requests in (n1, n2):
                        answers, total = instructions(server, proto, body, requests, work, 19545)
                        check(answers, requests, EXPECTED[payload][0] if server == "trainguard" else True)
                        totals.append(total)
                    per_request[server] = (totals[1] - totals[0]) / (n2 - n1)
                    print(f"{proto} {payload} {server}: {per_request[server]:,.0f} instructions per request",
                          file=sys.stderr)
                rows.append((proto, payload, per_request["trainguard"], per_request["baseline"]))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    lines = [f"Command: `benches/instructions.py {' '.join(sys.argv[1:])}` (user-space instructions per request "
             f"under callgrind: runs of {n1} and {n2} requests over one connection, the difference divided by {n2 - n1})",
             "", "| protocol | payload | trainguard | baseline | ratio |", "|---|---|---|---|---|"]
    for proto, payload, t, b in rows:
        lines.append(f"| {proto} | {payload} | {t / 1000:,.1f}k | {b / 1000:,.1f}k | {t / b:.2f}× |")
    write_report(args.out, lines)


if __name__ == "__main__":
    main()
